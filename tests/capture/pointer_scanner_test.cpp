#include "pointer_scanner.h"

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace kcap {
namespace {

class PointerScannerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Allocation a;
    a.base = 0x7f0000000000;
    a.size = 1 << 20;
    allocations_.add(a);
    a.base = 0x7f0000200000;
    a.size = 4096;
    allocations_.add(a);
  }
  template <class T>
  void put(std::vector<uint8_t>& buffer, size_t offset, T value) {
    std::memcpy(buffer.data() + offset, &value, sizeof value);
  }
  AllocationMap allocations_;
  KnownTensorMaps tensorMaps_;
};

TEST_F(PointerScannerTest, PlainPointerAndScalarParameters) {
  // axpy(float a, const float* x, float* y, int n): offsets 0, 8, 16, 24
  std::vector<uint8_t> params(28);
  put(params, 0, 2.0f);
  put<uint64_t>(params, 8, 0x7f0000000000 + 64);
  put<uint64_t>(params, 16, 0x7f0000200000);
  put(params, 24, 1000);
  auto found = scanParams(params.data(), params.size(), {{0, 4}, {8, 8}, {16, 8}, {24, 4}}, allocations_, tensorMaps_);
  ASSERT_EQ(found.size(), 2u);
  EXPECT_EQ(found[0].offset, 8u);
  EXPECT_EQ(found[0].value, 0x7f0000000040u);
  EXPECT_EQ(found[0].allocationBase, 0x7f0000000000u);
  EXPECT_EQ(found[1].offset, 16u);
  EXPECT_EQ(found[1].allocationBase, 0x7f0000200000u);
  EXPECT_FALSE(found[0].inTensorMap);
}

TEST_F(PointerScannerTest, ScanningIntoAVectorReplacesWhatItHeld) {
  // The launch path reuses one vector a launch: a scan must not append to
  // the previous launch's pointers.
  std::vector<uint8_t> params(16);
  put<uint64_t>(params, 0, 0x7f0000000000 + 8);
  put<uint64_t>(params, 8, 0x7f0000200000 + 16);
  std::vector<ParamPointer> found;
  const std::vector<ParamSlot> twoWords{{0, 8}, {8, 8}};
  scanParams(params.data(), params.size(), twoWords, allocations_, tensorMaps_, found);
  ASSERT_EQ(found.size(), 2u);
  EXPECT_EQ(found[1].allocationBase, 0x7f0000200000u);
  put<uint64_t>(params, 0, 7);  // no longer an address
  scanParams(params.data(), params.size(), twoWords, allocations_, tensorMaps_, found);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].offset, 8u);
  EXPECT_EQ(found[0].value, 0x7f0000200010u);
  scanParams(params.data(), params.size(), std::span<const ParamSlot>(), allocations_, tensorMaps_, found);
  EXPECT_TRUE(found.empty());
}

TEST_F(PointerScannerTest, PointersInsideAByValueStruct) {
  // scale_struct(ScaleArgs{src, dst, scale, n, stride}): one 32-byte parameter
  std::vector<uint8_t> params(32);
  put<uint64_t>(params, 0, 0x7f0000000100);
  put<uint64_t>(params, 8, 0x7f0000200010);
  put(params, 16, 0.5f);
  put(params, 20, 7);
  put<int64_t>(params, 24, 1);
  auto found = scanParams(params.data(), params.size(), {{0, 32}}, allocations_, tensorMaps_);
  ASSERT_EQ(found.size(), 2u);
  EXPECT_EQ(found[0].offset, 0u);
  EXPECT_EQ(found[1].offset, 8u);
}

// A 128-byte parameter is a tensor map when an encode made those bytes,
// wherever it lies (112 on the H200: the offset says nothing).
TEST_F(PointerScannerTest, TensorMapGlobalAddress) {
  std::vector<uint8_t> params(240, 0);
  put<uint64_t>(params, 0, 0x7f0000000000);    // an ordinary pointer
  put<uint64_t>(params, 112, 0x7f0000000800);  // tensor map at 112: global address first
  put<uint64_t>(params, 120, 0x7f0000000000);  // later words are not pointers
  tensorMaps_.add(params.data() + 112);
  auto found = scanParams(params.data(), params.size(), {{0, 8}, {112, 128}}, allocations_, tensorMaps_);
  ASSERT_EQ(found.size(), 2u);
  EXPECT_FALSE(found[0].inTensorMap);
  EXPECT_TRUE(found[1].inTensorMap);
  EXPECT_EQ(found[1].offset, 112u);
}

// Sixteen pointers by value (a grouped kernel's argument) are not a map, even
// 64-aligned: every one of them is found.
TEST_F(PointerScannerTest, A128ByteStructNoEncodeMadeIsScannedWhole) {
  std::vector<uint8_t> params(128, 0);
  for (size_t i = 0; i < 16; ++i) put<uint64_t>(params, i * 8, 0x7f0000000000 + i * 0x100);
  tensorMaps_.add(std::vector<uint8_t>(128, 7).data());  // some other map
  auto found = scanParams(params.data(), params.size(), {{0, 128}}, allocations_, tensorMaps_);
  ASSERT_EQ(found.size(), 16u);
  for (const ParamPointer& p : found) EXPECT_FALSE(p.inTensorMap);
}

TEST_F(PointerScannerTest, WordsOutsideAnyAllocationAreNotPointers) {
  std::vector<uint8_t> params(24);
  put<uint64_t>(params, 0, 0x7f0000100000);  // one past the first allocation
  put<uint64_t>(params, 8, 42);
  put<uint64_t>(params, 16, 0x7f0000201000);  // one past the second
  EXPECT_TRUE(scanParams(params.data(), params.size(), {{0, 8}, {8, 8}, {16, 8}}, allocations_, tensorMaps_).empty());
}

TEST_F(PointerScannerTest, LayoutBeyondTheBufferIsIgnored) {
  std::vector<uint8_t> params(8);
  put<uint64_t>(params, 0, 0x7f0000000000);
  EXPECT_TRUE(scanParams(params.data(), params.size(), {{8, 8}, {4, 8}}, allocations_, tensorMaps_).empty());
}

TEST_F(PointerScannerTest, PointerArrayInsideABuffer) {
  std::vector<uint8_t> buffer(40, 0);
  // the device buffer starts 4 bytes past an 8-byte boundary: words are at 4, 12, ...
  put<uint64_t>(buffer, 4, 0x7f0000000200);
  put<uint64_t>(buffer, 12, 0x7f0000200020);
  put<uint64_t>(buffer, 20, 12345);
  auto found = scanIndirect(buffer.data(), buffer.size(), 0x7f0000000004, allocations_);
  ASSERT_EQ(found.size(), 2u);
  EXPECT_EQ(found[0].offset, 4u);
  EXPECT_EQ(found[0].allocationBase, 0x7f0000000000u);
  EXPECT_EQ(found[1].offset, 12u);
  EXPECT_EQ(found[1].allocationBase, 0x7f0000200000u);
}

std::array<uint8_t, kTensorMapBytes> mapBytes(uint64_t n) {
  std::array<uint8_t, kTensorMapBytes> bytes{};
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>((n >> (8 * (i % 8))) + i * 7);
  return bytes;
}

// Maps added while other threads ask: one added before a question is
// always found, one never added never is; past the lock-free table's half,
// maps go to the locked overflow and are found there.
TEST(KnownTensorMaps, QuestionsWhileMapsAreAddedThroughOverflow) {
  KnownTensorMaps maps;
  EXPECT_FALSE(maps.contains(mapBytes(1).data()));
  constexpr uint64_t kMaps = 2000;  // past the table's half
  std::atomic<uint64_t> added{0};
  std::vector<std::string> failures(3);
  std::vector<std::thread> readers;
  for (int r = 0; r < 3; ++r) {
    readers.emplace_back([&, r] {
      std::string& failure = failures[static_cast<size_t>(r)];
      for (uint64_t round = 0; failure.empty(); ++round) {
        const uint64_t known = added.load(std::memory_order_acquire);
        if (known != 0 && !maps.contains(mapBytes(round % known).data())) {
          failure = "map " + std::to_string(round % known) + " lost";
        }
        if (maps.contains(mapBytes(kMaps + round % 97).data())) failure = "a map never added was found";
        if (known == kMaps && round > 20000) break;
      }
    });
  }
  for (uint64_t n = 0; n < kMaps; ++n) {
    maps.add(mapBytes(n).data());
    if (n % 3 == 0) maps.add(mapBytes(n).data());  // again: no second entry
    added.store(n + 1, std::memory_order_release);
  }
  for (auto& reader : readers) reader.join();
  for (const std::string& failure : failures) EXPECT_EQ(failure, "");
  for (uint64_t n = 0; n < kMaps; ++n) ASSERT_TRUE(maps.contains(mapBytes(n).data())) << n;
}

}  // namespace
}  // namespace kcap
