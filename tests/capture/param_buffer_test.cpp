#include "param_buffer.h"

#include <cuda.h>
#include <gtest/gtest.h>

#include <cstring>

namespace kcap {
namespace {

template <class T>
T at(const std::vector<uint8_t>& bytes, size_t offset) {
  T value{};
  std::memcpy(&value, bytes.data() + offset, sizeof value);
  return value;
}

const std::vector<ParamSlot> kAxpy = {{0, 4}, {8, 8}, {16, 8}, {24, 4}};

TEST(ParamBuffer, FromKernelParams) {
  float a = 2.5f;
  uint64_t x = 0x7f0000001000;
  uint64_t y = 0x7f0000002000;
  int n = 77;
  void* params[] = {&a, &x, &y, &n};
  const ParamBuffer buffer = assembleParams(&kAxpy, params, nullptr);
  EXPECT_TRUE(buffer.complete);
  EXPECT_FALSE(buffer.fromExtra);
  ASSERT_EQ(buffer.bytes.size(), 28u);
  EXPECT_EQ(at<float>(buffer.bytes, 0), 2.5f);
  EXPECT_EQ(at<uint32_t>(buffer.bytes, 4), 0u);  // padding is zero
  EXPECT_EQ(at<uint64_t>(buffer.bytes, 8), x);
  EXPECT_EQ(at<uint64_t>(buffer.bytes, 16), y);
  EXPECT_EQ(at<int>(buffer.bytes, 24), 77);
  EXPECT_EQ(buffer.layout().size(), 4u);
  EXPECT_EQ(buffer.kernelLayout, &kAxpy);  // referred to, not copied
}

TEST(ParamBuffer, FromExtraWithAndWithoutLayout) {
  uint8_t packed[28] = {};
  for (size_t i = 0; i < sizeof packed; ++i) {
    packed[i] = static_cast<uint8_t>(i);
  }
  size_t size = sizeof packed;
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, packed, CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END};
  const ParamBuffer known = assembleParams(&kAxpy, nullptr, extra);
  EXPECT_TRUE(known.complete);
  EXPECT_TRUE(known.fromExtra);
  EXPECT_EQ(known.bytes, std::vector<uint8_t>(packed, packed + sizeof packed));
  EXPECT_EQ(known.layout().size(), 4u);
  const ParamBuffer unknown = assembleParams(nullptr, nullptr, extra);
  EXPECT_TRUE(unknown.complete);
  ASSERT_EQ(unknown.layout().size(), 1u);  // every word will be scanned
  EXPECT_EQ(unknown.layout()[0].offset, 0u);
  EXPECT_EQ(unknown.layout()[0].size, 28u);
  const ParamBuffer copy = unknown;  // the whole-buffer slot travels with the copy
  ASSERT_EQ(copy.layout().size(), 1u);
  EXPECT_EQ(copy.layout()[0].size, 28u);
}

TEST(ParamBuffer, MissingPiecesAreIncomplete) {
  int n = 1;
  void* params[] = {&n};
  EXPECT_FALSE(assembleParams(nullptr, params, nullptr).complete);  // no layout for kernelParams
  size_t size = 8;
  void* noBuffer[] = {CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END};
  EXPECT_FALSE(assembleParams(&kAxpy, nullptr, noBuffer).complete);
  const std::vector<ParamSlot> none;
  EXPECT_TRUE(assembleParams(&none, nullptr, nullptr).complete);  // a kernel without parameters
  EXPECT_FALSE(assembleParams(&kAxpy, nullptr, nullptr).complete);
  EXPECT_EQ(layoutSize(kAxpy), 28u);
}

}  // namespace
}  // namespace kcap
