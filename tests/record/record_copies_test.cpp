// Recording copies and memory that are more than a pointer and a size: 2D
// and 3D copies and memsets with their pitches, tensor map encodes, and VMM
// mappings snapshotted as one range.
#include "record_trace.h"

#include <cuda.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace kcap_test {
namespace {

using namespace kcap_test::record;  // the recording tests' shared helpers (record_trace.h)

// ---- 2D copies and memsets ---------------------------------------------------------------

TEST(Record, TwoDimensionalCopiesAndMemsetsKeepTheirRowsAndPitches) {
  kcap::test::TempDir dir("kcap-record");
  const std::string path = dir.file("pitched.kcap");
  expectRecordedLikePlain(scenarioProgram(), {"pitched"}, path);
  Trace trace(path);
  EXPECT_TRUE(trace.of(Event::API_ERROR).empty());

  constexpr uint64_t kPitch = 512;
  uint64_t p = 0;
  for (const auto& e : trace.of(Event::ALLOC)) {
    if (e.getAlloc().getKind() == schema::AllocKind::MEM_ALLOC_PITCH) {
      p = e.getAlloc().getAddress();
      EXPECT_EQ(e.getAlloc().getPitch(), kPitch);
      EXPECT_EQ(e.getAlloc().getSize(), 8 * kPitch);
    }
  }
  ASSERT_NE(p, 0u);
  std::vector<schema::Memcpy::Reader> copies;
  for (const auto& e : trace.of(Event::MEMCPY)) {
    if (e.getMemcpy().getWidth() != 0) {
      copies.push_back(e.getMemcpy());
    }
  }
  ASSERT_EQ(copies.size(), 5u);
  const auto packed = [](const std::vector<uint8_t>& from, size_t first, size_t pitch, size_t width, size_t rows) {
    std::vector<uint8_t> out;
    for (size_t r = 0; r < rows; ++r) {
      out.insert(out.end(), from.begin() + static_cast<std::ptrdiff_t>(first + r * pitch),
                 from.begin() + static_cast<std::ptrdiff_t>(first + r * pitch + width));
    }
    return out;
  };
  // Host to device: dst at (12, 1), the host rows from (8, 1), packed.
  std::vector<uint8_t> host(4 * 64);
  for (size_t i = 0; i < host.size(); ++i) {
    host[i] = static_cast<uint8_t>(i);
  }
  EXPECT_EQ(copies[0].getDirection(), schema::CopyDirection::HOST_TO_DEVICE);
  EXPECT_EQ(copies[0].getDst(), p + kPitch + 12);
  EXPECT_EQ(copies[0].getSrc(), 0u);
  EXPECT_EQ(copies[0].getWidth(), 40u);
  EXPECT_EQ(copies[0].getHeight(), 3u);
  EXPECT_EQ(copies[0].getDstPitch(), kPitch);
  EXPECT_EQ(copies[0].getSrcPitch(), 64u);
  EXPECT_EQ(copies[0].getSize(), 120u);
  EXPECT_EQ(copies[0].getDepth(), 0u);  // 2D: no slices
  EXPECT_EQ(copies[0].getDstHeight(), 0u);
  EXPECT_EQ(copies[0].getSrcHeight(), 0u);
  EXPECT_FALSE(copies[0].getIsAsync());
  EXPECT_EQ(trace.bytes(copies[0].getData()), packed(host, 64 + 8, 64, 40, 3));
  // Unified on both sides: the recorder found pageable host memory to device.
  std::vector<uint8_t> more(3 * 48);
  for (size_t i = 0; i < more.size(); ++i) {
    more[i] = static_cast<uint8_t>(200 + i % 50);
  }
  EXPECT_EQ(copies[1].getDirection(), schema::CopyDirection::HOST_TO_DEVICE);
  EXPECT_EQ(copies[1].getDst(), p + 4 * kPitch);
  EXPECT_EQ(copies[1].getSrcPitch(), 48u);
  EXPECT_EQ(trace.bytes(copies[1].getData()), packed(more, 0, 48, 32, 3));
  // Device to device, per-thread and async: addresses and pitches, no data.
  EXPECT_EQ(copies[2].getDirection(), schema::CopyDirection::DEVICE_TO_DEVICE);
  EXPECT_EQ(copies[2].getDst(), p + 5 * kPitch + 256);
  EXPECT_EQ(copies[2].getSrc(), p + kPitch);
  EXPECT_EQ(copies[2].getWidth(), 64u);
  EXPECT_EQ(copies[2].getHeight(), 2u);
  EXPECT_EQ(copies[2].getSrcPitch(), kPitch);
  EXPECT_TRUE(copies[2].getIsAsync());
  EXPECT_NE(copies[2].getStream(), 0u);
  EXPECT_EQ(copies[2].getData().getSize(), 0u);
  // From an array: unknown, no address on the array's side, no data.
  EXPECT_EQ(copies[3].getDirection(), schema::CopyDirection::UNKNOWN);
  EXPECT_EQ(copies[3].getDst(), p + 6 * kPitch + 448);
  EXPECT_EQ(copies[3].getSrc(), 0u);
  EXPECT_EQ(copies[3].getWidth(), 16u);
  EXPECT_EQ(copies[3].getData().getSize(), 0u);
  // To the host: no data.
  EXPECT_EQ(copies[4].getDirection(), schema::CopyDirection::DEVICE_TO_HOST);
  EXPECT_EQ(copies[4].getDst(), 0u);
  EXPECT_EQ(copies[4].getSrc(), p);
  EXPECT_EQ(copies[4].getSize(), 8 * kPitch);
  EXPECT_EQ(copies[4].getData().getSize(), 0u);

  std::vector<schema::Memset::Reader> sets;
  for (const auto& e : trace.of(Event::MEMSET)) {
    if (e.getMemset().getPitch() != 0) {
      sets.push_back(e.getMemset());
    }
  }
  ASSERT_EQ(sets.size(), 3u);
  EXPECT_EQ(sets[0].getDst(), p + 7 * kPitch);
  EXPECT_EQ(sets[0].getElementSize(), 4u);
  EXPECT_EQ(sets[0].getCount(), 64u);
  EXPECT_EQ(sets[0].getHeight(), 1u);
  EXPECT_EQ(sets[0].getValue(), 0x3f800000u);
  EXPECT_EQ(sets[1].getDst(), p + 2 * kPitch + 300);
  EXPECT_EQ(sets[1].getElementSize(), 1u);
  EXPECT_EQ(sets[1].getCount(), 20u);
  EXPECT_EQ(sets[1].getHeight(), 3u);
  EXPECT_EQ(sets[1].getPitch(), kPitch);
  EXPECT_EQ(sets[1].getValue(), 0xABu);
  EXPECT_EQ(sets[2].getElementSize(), 2u);
  EXPECT_EQ(sets[2].getHeight(), 2u);
  EXPECT_TRUE(sets[2].getIsAsync());
  EXPECT_EQ(sets[2].getValue(), 0x3c00u);
  for (const auto& e : trace.of(Event::MEMSET)) {
    if (e.getMemset().getPitch() == 0) {
      EXPECT_EQ(e.getMemset().getHeight(), 1u);  // 1D
    }
  }

  // What axpy found in p afterwards: each of them where the program put it.
  const auto launches = trace.launches();
  ASSERT_EQ(launches.size(), 1u);
  const auto range = rangeAt(launches[0].getPre(), p);
  ASSERT_TRUE(range.has_value());
  const std::vector<uint8_t> bytes = trace.bytes(range->getContent());
  ASSERT_EQ(bytes.size(), 8 * kPitch);
  EXPECT_EQ(bytes[kPitch + 12], 72);            // host row 1, byte 8
  EXPECT_EQ(bytes[4 * kPitch + 1], 201);        // unified
  EXPECT_EQ(bytes[5 * kPitch + 256 + 12], 72);  // device to device, from row 1
  EXPECT_EQ(bytes[2 * kPitch + 300], 0xAB);
  EXPECT_EQ(bytes[2 * kPitch + 320], 0);
  EXPECT_EQ(at<float>(capnp::Data::Reader(bytes.data(), bytes.size()), 7 * kPitch), 1.0f);

  // Metadata mode keeps the rows' shape, not their bytes.
  const std::string metadata = dir.file("pitched-metadata.kcap");
  expectClean(recorded(scenarioProgram(), {"pitched"}, {{"KCAP_OUTPUT", metadata}, {"KCAP_MODE", "metadata"}}));
  Trace shape(metadata);
  size_t shaped = 0;
  for (const auto& e : shape.of(Event::MEMCPY)) {
    EXPECT_EQ(e.getMemcpy().getData().getSize(), 0u);
    shaped += e.getMemcpy().getWidth() != 0 && e.getMemcpy().getSrcPitch() == 64 ? 1 : 0;
  }
  EXPECT_EQ(shaped, 1u);
}

// ---- tensor map encodes -----------------------------------------------------------------------

template <class List>
std::vector<int64_t> listOf(List list) {
  std::vector<int64_t> out;
  for (const auto v : list) {
    out.push_back(static_cast<int64_t>(v));
  }
  return out;
}

TEST(Record, TensorMapEncodesKeepTheirArgumentsAndTheMapTheyMade) {
  kcap::test::TempDir dir("kcap-record");
  const std::string path = dir.file("tensor-map.kcap");
  const Outcome plain = expectRecordedLikePlain(scenarioProgram(), {"tensor-map"}, path);
  EXPECT_NE(plain.out.find("result tensor-map out[10] 20.0"), std::string::npos) << plain.out;
  Trace trace(path);

  uint64_t src = 0;
  for (const auto& e : trace.of(Event::ALLOC)) {
    if (src == 0) {
      src = e.getAlloc().getAddress();  // the first allocation: src
    }
  }
  ASSERT_NE(src, 0u);
  const auto encodes = trace.of(Event::TENSOR_MAP_ENCODE);
  ASSERT_EQ(encodes.size(), 4u);

  // The failed one, before any context: arguments, its error, no map.
  const auto failed = encodes[0].getTensorMapEncode();
  EXPECT_NE(encodes[0].getThreadId(), 0u);
  EXPECT_EQ(failed.getApi(), schema::TensorMapApi::TILED);
  EXPECT_EQ(failed.getDataType(), static_cast<int32_t>(CU_TENSOR_MAP_DATA_TYPE_FLOAT32));
  EXPECT_EQ(failed.getRank(), 2u);
  EXPECT_EQ(failed.getGlobalAddress(), 0x1008u);
  EXPECT_EQ(listOf(failed.getGlobalDim()), (std::vector<int64_t>{64, 16}));
  EXPECT_EQ(failed.getResult(), static_cast<int32_t>(CUDA_ERROR_INVALID_VALUE));
  EXPECT_EQ(failed.getMap().size(), 0u);
  const auto errors = trace.of(Event::API_ERROR);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(std::string(errors[0].getApiError().getFunction().cStr()), "cuTensorMapEncodeTiled");
  EXPECT_LT(encodes[0].getSeq(), trace.of(Event::ALLOC).at(0).getSeq());

  // The tiled map the launch takes: every argument, and the 128 bytes.
  const auto tiled = encodes[1].getTensorMapEncode();
  EXPECT_EQ(tiled.getApi(), schema::TensorMapApi::TILED);
  EXPECT_EQ(tiled.getDataType(), static_cast<int32_t>(CU_TENSOR_MAP_DATA_TYPE_FLOAT32));
  EXPECT_EQ(tiled.getRank(), 2u);
  EXPECT_EQ(tiled.getGlobalAddress(), src);
  EXPECT_EQ(listOf(tiled.getGlobalDim()), (std::vector<int64_t>{64, 16}));
  EXPECT_EQ(listOf(tiled.getGlobalStrides()), (std::vector<int64_t>{256}));
  EXPECT_EQ(listOf(tiled.getBoxDim()), (std::vector<int64_t>{32, 8}));
  EXPECT_EQ(listOf(tiled.getElementStrides()), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(tiled.getPixelBoxLowerCorner().size(), 0u);
  EXPECT_EQ(tiled.getPixelBoxUpperCorner().size(), 0u);
  EXPECT_EQ(tiled.getChannelsPerPixel(), 0u);
  EXPECT_EQ(tiled.getPixelsPerColumn(), 0u);
  EXPECT_EQ(tiled.getInterleave(), static_cast<int32_t>(CU_TENSOR_MAP_INTERLEAVE_NONE));
  EXPECT_EQ(tiled.getSwizzle(), static_cast<int32_t>(CU_TENSOR_MAP_SWIZZLE_128B));
  EXPECT_EQ(tiled.getL2Promotion(), static_cast<int32_t>(CU_TENSOR_MAP_L2_PROMOTION_L2_128B));
  EXPECT_EQ(tiled.getOobFill(), static_cast<int32_t>(CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
  EXPECT_EQ(tiled.getIm2colWideMode(), 0);
  EXPECT_EQ(tiled.getResult(), 0);
  ASSERT_EQ(tiled.getMap().size(), 128u);
  EXPECT_EQ(at<uint64_t>(tiled.getMap(), 0), src);  // the double's layout: the address first
  const auto launches = trace.launches();
  ASSERT_EQ(launches.size(), 1u);
  const auto launch = launches[0];
  EXPECT_EQ(std::string(launch.getKernelName().cStr()), "tma_scale");
  ASSERT_GE(launch.getParams().size(), 128u);
  EXPECT_EQ(std::vector<uint8_t>(launch.getParams().begin(), launch.getParams().begin() + 128),
            std::vector<uint8_t>(tiled.getMap().begin(), tiled.getMap().end()));
  ASSERT_GE(launch.getPointers().size(), 1u);
  EXPECT_EQ(launch.getPointers()[0].getOffset(), 0u);
  EXPECT_TRUE(launch.getPointers()[0].getInTensorMap());
  EXPECT_LT(encodes[1].getSeq(), trace.of(Event::LAUNCH).at(0).getSeq());

  // im2col: the pixel box corners, channels and pixels.
  const auto im2col = encodes[2].getTensorMapEncode();
  EXPECT_EQ(im2col.getApi(), schema::TensorMapApi::IM2COL);
  EXPECT_EQ(im2col.getRank(), 3u);
  EXPECT_EQ(im2col.getGlobalAddress(), src);
  EXPECT_EQ(listOf(im2col.getGlobalDim()), (std::vector<int64_t>{4, 16, 16}));
  EXPECT_EQ(listOf(im2col.getGlobalStrides()), (std::vector<int64_t>{16, 256}));
  EXPECT_EQ(im2col.getBoxDim().size(), 0u);
  EXPECT_EQ(listOf(im2col.getElementStrides()), (std::vector<int64_t>{1, 1, 1}));
  EXPECT_EQ(listOf(im2col.getPixelBoxLowerCorner()), (std::vector<int64_t>{-1}));
  EXPECT_EQ(listOf(im2col.getPixelBoxUpperCorner()), (std::vector<int64_t>{1}));
  EXPECT_EQ(im2col.getChannelsPerPixel(), 4u);
  EXPECT_EQ(im2col.getPixelsPerColumn(), 8u);
  EXPECT_EQ(im2col.getSwizzle(), static_cast<int32_t>(CU_TENSOR_MAP_SWIZZLE_NONE));
  EXPECT_EQ(im2col.getOobFill(), static_cast<int32_t>(CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA));
  EXPECT_EQ(im2col.getMap().size(), 128u);
  EXPECT_NE(std::vector<uint8_t>(im2col.getMap().begin(), im2col.getMap().end()),
            std::vector<uint8_t>(tiled.getMap().begin(), tiled.getMap().end()));

  // im2colWide: the W corners and the mode.
  const auto wide = encodes[3].getTensorMapEncode();
  EXPECT_EQ(wide.getApi(), schema::TensorMapApi::IM2COL_WIDE);
  EXPECT_EQ(wide.getDataType(), static_cast<int32_t>(CU_TENSOR_MAP_DATA_TYPE_FLOAT16));
  EXPECT_EQ(wide.getPixelBoxLowerCornerWidth(), -2);
  EXPECT_EQ(wide.getPixelBoxUpperCornerWidth(), 2);
  EXPECT_EQ(wide.getPixelBoxLowerCorner().size(), 0u);
  EXPECT_EQ(wide.getChannelsPerPixel(), 4u);
  EXPECT_EQ(wide.getPixelsPerColumn(), 16u);
  EXPECT_EQ(wide.getIm2colWideMode(), static_cast<int32_t>(CU_TENSOR_MAP_IM2COL_WIDE_MODE_W128));
  EXPECT_EQ(wide.getSwizzle(), static_cast<int32_t>(CU_TENSOR_MAP_SWIZZLE_64B));
  EXPECT_EQ(wide.getL2Promotion(), static_cast<int32_t>(CU_TENSOR_MAP_L2_PROMOTION_L2_256B));
  EXPECT_EQ(wide.getMap().size(), 128u);

  // kcap dump: the encodes readably, and which encode made the launch's map.
  const Outcome dump = kcap({"dump", path});
  EXPECT_EQ(dump.exitCode, 0) << dump.describe();
  char global[32];
  std::snprintf(global, sizeof global, "0x%llx", static_cast<unsigned long long>(src));
  EXPECT_NE(dump.out.find("tensorMapEncode   tiled f32 rank 2 global 0x1008 dims [64, 16] strides [256] box [32, "
                          "8] elementStrides [1, 1] interleave none swizzle 128B l2 128B oobFill none result=1\n"),
            std::string::npos)
      << dump.out;
  EXPECT_NE(dump.out.find(std::string("tiled f32 rank 2 global ") + global +
                          " dims [64, 16] strides [256] box [32, 8] elementStrides [1, 1] interleave none "
                          "swizzle 128B l2 128B oobFill none map=128B\n"),
            std::string::npos)
      << dump.out;
  EXPECT_NE(dump.out.find(std::string("im2col f32 rank 3 global ") + global +
                          " dims [4, 16, 16] strides [16, 256] elementStrides [1, 1, 1] lowerCorner [-1] "
                          "upperCorner [1] channels 4 pixels 8 interleave none swizzle none l2 none oobFill "
                          "nanRequestZeroFma map=128B\n"),
            std::string::npos)
      << dump.out;
  EXPECT_NE(dump.out.find("im2colWide f16 rank 3 global " + std::string(global) +
                          " dims [4, 16, 16] strides [16, 256] elementStrides [1, 1, 1] lowerCornerW -2 "
                          "upperCornerW 2 mode W128 channels 4 pixels 16 interleave none swizzle 64B l2 256B "
                          "oobFill none map=128B\n"),
            std::string::npos)
      << dump.out;
  EXPECT_NE(dump.out.find("ptrs=[0:" + std::string(global) + "(tensorMap encode #" +
                          std::to_string(encodes[1].getSeq()) + ")"),
            std::string::npos)
      << dump.out;
  const Outcome json = kcap({"dump", path, "--json", "--type", "tensorMapEncode"});
  EXPECT_EQ(json.exitCode, 0) << json.describe();
  EXPECT_NE(json.out.find("\"tensorMapEncode\":{\"api\":\"tiled\""), std::string::npos) << json.out;
  EXPECT_NE(json.out.find("\"pixelBoxLowerCorner\":[-1]"), std::string::npos) << json.out;

  // Metadata mode records them all the same (small, and what a user reads).
  const std::string metadata = dir.file("tensor-map-metadata.kcap");
  expectClean(recorded(scenarioProgram(), {"tensor-map"}, {{"KCAP_OUTPUT", metadata}, {"KCAP_MODE", "metadata"}}));
  Trace shape(metadata);
  const auto recordedAgain = shape.of(Event::TENSOR_MAP_ENCODE);
  ASSERT_EQ(recordedAgain.size(), 4u);
  EXPECT_EQ(recordedAgain[1].getTensorMapEncode().getMap().size(), 128u);
  EXPECT_EQ(listOf(recordedAgain[1].getTensorMapEncode().getBoxDim()), (std::vector<int64_t>{32, 8}));
}

// ---- 3D copies -------------------------------------------------------------------------------

TEST(Record, ThreeDimensionalCopiesKeepTheirSlicesRowsAndPitches) {
  kcap::test::TempDir dir("kcap-record");
  const std::string path = dir.file("volume.kcap");
  expectRecordedLikePlain(scenarioProgram(), {"volume"}, path);
  Trace trace(path);
  EXPECT_TRUE(trace.of(Event::API_ERROR).empty());

  constexpr uint64_t kPitch = 512, kSliceRows = 4, kSlice = kSliceRows * kPitch;
  uint64_t v = 0;
  for (const auto& e : trace.of(Event::ALLOC)) {
    if (e.getAlloc().getKind() == schema::AllocKind::MEM_ALLOC_PITCH) {
      v = e.getAlloc().getAddress();
      EXPECT_EQ(e.getAlloc().getSize(), 2 * kSlice);
    }
  }
  ASSERT_NE(v, 0u);
  const auto at = [&](uint64_t x, uint64_t y, uint64_t z) { return (z * kSliceRows + y) * kPitch + x; };
  std::vector<schema::Memcpy::Reader> copies;
  for (const auto& e : trace.of(Event::MEMCPY)) {
    if (e.getMemcpy().getWidth() != 0) {
      copies.push_back(e.getMemcpy());
    }
  }
  ASSERT_EQ(copies.size(), 7u);
  // Rows of `width` bytes, slice after slice, from a volume laid out by
  // pitch and slice height, starting at `first`.
  const auto packed = [](const std::vector<uint8_t>& from, size_t first, size_t pitch, size_t sliceRows, size_t width,
                         size_t rows, size_t slices) {
    std::vector<uint8_t> out;
    for (size_t z = 0; z < slices; ++z) {
      for (size_t y = 0; y < rows; ++y) {
        const size_t start = first + (z * sliceRows + y) * pitch;
        out.insert(out.end(), from.begin() + static_cast<std::ptrdiff_t>(start),
                   from.begin() + static_cast<std::ptrdiff_t>(start + width));
      }
    }
    return out;
  };

  // Host to device (cuMemcpy3D): dst at (12, 1, 0), the host rows from
  // (8, 1, 1) of slices of 5 rows 64 bytes apart, packed.
  std::vector<uint8_t> host(3 * 5 * 64);
  for (size_t i = 0; i < host.size(); ++i) {
    host[i] = static_cast<uint8_t>(i * 7);
  }
  EXPECT_EQ(copies[0].getDirection(), schema::CopyDirection::HOST_TO_DEVICE);
  EXPECT_EQ(copies[0].getDst(), v + at(12, 1, 0));
  EXPECT_EQ(copies[0].getSrc(), 0u);
  EXPECT_EQ(copies[0].getWidth(), 40u);
  EXPECT_EQ(copies[0].getHeight(), 3u);
  EXPECT_EQ(copies[0].getDepth(), 2u);
  EXPECT_EQ(copies[0].getDstPitch(), kPitch);
  EXPECT_EQ(copies[0].getDstHeight(), kSliceRows);
  EXPECT_EQ(copies[0].getSrcPitch(), 64u);
  EXPECT_EQ(copies[0].getSrcHeight(), 5u);
  EXPECT_EQ(copies[0].getSize(), 240u);
  EXPECT_FALSE(copies[0].getIsAsync());
  EXPECT_EQ(trace.bytes(copies[0].getData()), packed(host, (5 + 1) * 64 + 8, 64, 5, 40, 3, 2));
  // From a host volume already packed (cuMemcpy3DAsync): its bytes as they are.
  std::vector<uint8_t> dense(64);
  for (size_t i = 0; i < dense.size(); ++i) {
    dense[i] = static_cast<uint8_t>(100 + i);
  }
  EXPECT_EQ(copies[1].getDirection(), schema::CopyDirection::HOST_TO_DEVICE);
  EXPECT_EQ(copies[1].getDst(), v + 300);
  EXPECT_EQ(copies[1].getWidth(), 16u);
  EXPECT_EQ(copies[1].getSrcPitch(), 16u);
  EXPECT_EQ(copies[1].getSrcHeight(), 2u);
  EXPECT_TRUE(copies[1].getIsAsync());
  EXPECT_NE(copies[1].getStream(), 0u);
  EXPECT_EQ(trace.bytes(copies[1].getData()), dense);
  // Unified on both sides, slices of one row: the recorder found pageable
  // host memory to device; the rows 96 bytes apart, packed.
  std::vector<uint8_t> more(2 * 2 * 48);
  for (size_t i = 0; i < more.size(); ++i) {
    more[i] = static_cast<uint8_t>(200 + i % 50);
  }
  EXPECT_EQ(copies[2].getDirection(), schema::CopyDirection::HOST_TO_DEVICE);
  EXPECT_EQ(copies[2].getDst(), v + at(400, 3, 0));
  EXPECT_EQ(copies[2].getHeight(), 1u);
  EXPECT_EQ(copies[2].getDepth(), 2u);
  EXPECT_EQ(copies[2].getSrcPitch(), 48u);
  EXPECT_EQ(copies[2].getSrcHeight(), 2u);
  EXPECT_EQ(trace.bytes(copies[2].getData()), packed(more, 0, 48, 2, 32, 1, 2));
  // Device to device, per-thread and async: addresses, pitches and slice
  // heights, no data.
  EXPECT_EQ(copies[3].getDirection(), schema::CopyDirection::DEVICE_TO_DEVICE);
  EXPECT_EQ(copies[3].getDst(), v + at(256, 2, 0));
  EXPECT_EQ(copies[3].getSrc(), v + at(0, 1, 0));
  EXPECT_EQ(copies[3].getWidth(), 64u);
  EXPECT_EQ(copies[3].getHeight(), 2u);
  EXPECT_EQ(copies[3].getDepth(), 2u);
  EXPECT_EQ(copies[3].getDstHeight(), kSliceRows);
  EXPECT_EQ(copies[3].getSrcHeight(), kSliceRows);
  EXPECT_EQ(copies[3].getSrcPitch(), kPitch);
  EXPECT_TRUE(copies[3].getIsAsync());
  EXPECT_NE(copies[3].getStream(), 0u);
  EXPECT_EQ(copies[3].getData().getSize(), 0u);
  // From an array: unknown, no address, pitch or slice height on the
  // array's side, no data.
  EXPECT_EQ(copies[4].getDirection(), schema::CopyDirection::UNKNOWN);
  EXPECT_EQ(copies[4].getDst(), v + 448);
  EXPECT_EQ(copies[4].getSrc(), 0u);
  EXPECT_EQ(copies[4].getSrcPitch(), 0u);
  EXPECT_EQ(copies[4].getSrcHeight(), 0u);
  EXPECT_EQ(copies[4].getDepth(), 2u);
  EXPECT_EQ(copies[4].getData().getSize(), 0u);
  // Depth 0 copies nothing: recorded with no rows (depth 0 alone would
  // read as a 2D copy).
  EXPECT_EQ(copies[5].getDirection(), schema::CopyDirection::HOST_TO_DEVICE);
  EXPECT_EQ(copies[5].getDepth(), 0u);
  EXPECT_EQ(copies[5].getHeight(), 0u);
  EXPECT_EQ(copies[5].getSize(), 0u);
  EXPECT_EQ(copies[5].getData().getSize(), 0u);
  // To the host: no data.
  EXPECT_EQ(copies[6].getDirection(), schema::CopyDirection::DEVICE_TO_HOST);
  EXPECT_EQ(copies[6].getDst(), 0u);
  EXPECT_EQ(copies[6].getSrc(), v);
  EXPECT_EQ(copies[6].getSize(), 2 * kSlice);
  EXPECT_EQ(copies[6].getData().getSize(), 0u);

  // What axpy found in v afterwards: each of them where the program put it.
  const auto launches = trace.launches();
  ASSERT_EQ(launches.size(), 1u);
  const auto range = rangeAt(launches[0].getPre(), v);
  ASSERT_TRUE(range.has_value());
  const std::vector<uint8_t> bytes = trace.bytes(range->getContent());
  ASSERT_EQ(bytes.size(), 2 * kSlice);
  EXPECT_EQ(bytes[at(12, 1, 0)], 184);  // host (8, 1, 1)
  EXPECT_EQ(bytes[at(12, 3, 1)], 248);  // host (8, 3, 2)
  EXPECT_EQ(bytes[at(11, 1, 0)], 0);
  EXPECT_EQ(bytes[at(300, 1, 1)], 148);  // dense byte 48
  EXPECT_EQ(bytes[at(400, 3, 1)], 246);  // unified, more[96]
  EXPECT_EQ(bytes[at(268, 2, 0)], 184);  // device to device, from (12, 1, 0)
  EXPECT_EQ(bytes[at(268, 3, 1)], 56);   // from (12, 2, 1)

  // kcap dump shows the slices.
  const Outcome dump = kcap({"dump", path});
  EXPECT_EQ(dump.exitCode, 0) << dump.describe();
  EXPECT_NE(dump.out.find("depth=2 dstHeight=4 srcHeight=5"), std::string::npos) << dump.out;

  // Metadata mode keeps the slices' shape, not their bytes.
  const std::string metadata = dir.file("volume-metadata.kcap");
  expectClean(recorded(scenarioProgram(), {"volume"}, {{"KCAP_OUTPUT", metadata}, {"KCAP_MODE", "metadata"}}));
  Trace shape(metadata);
  size_t shaped = 0;
  for (const auto& e : shape.of(Event::MEMCPY)) {
    EXPECT_EQ(e.getMemcpy().getData().getSize(), 0u);
    shaped += e.getMemcpy().getDepth() == 2 && e.getMemcpy().getSrcHeight() == 5 ? 1 : 0;
  }
  EXPECT_EQ(shaped, 1u);
}

TEST(Record, VirtualMemoryMappingsJoinIntoOneSnapshot) {
  kcap::test::TempDir dir("kcap-record");
  const std::string path = dir.file("vmm.kcap");
  expectRecordedLikePlain(scenarioProgram(), {"vmm"}, path);
  Trace trace(path);
  std::vector<schema::Alloc::Reader> allocs;
  for (const auto& e : trace.of(Event::ALLOC)) {
    allocs.push_back(e.getAlloc());
  }
  ASSERT_GE(allocs.size(), 5u);
  const uint64_t chunk = 2u << 20;
  EXPECT_EQ(allocs[0].getKind(), schema::AllocKind::VMM_RESERVE);
  EXPECT_EQ(allocs[0].getSize(), 4 * chunk);
  const uint64_t base = allocs[0].getAddress();
  EXPECT_EQ(allocs[1].getKind(), schema::AllocKind::VMM_CREATE);
  EXPECT_EQ(allocs[1].getDevice(), 0);
  EXPECT_EQ(allocs[2].getKind(), schema::AllocKind::VMM_MAP);
  EXPECT_EQ(allocs[2].getAddress(), base);
  EXPECT_EQ(allocs[2].getHandle(), allocs[1].getHandle());
  EXPECT_EQ(allocs[2].getDevice(), 0);
  EXPECT_EQ(allocs[4].getKind(), schema::AllocKind::VMM_MAP);
  EXPECT_EQ(allocs[4].getAddress(), base + chunk);
  const auto launches = trace.launches();
  ASSERT_EQ(launches.size(), 1u);
  const uint64_t x = base + chunk - 2048;
  ASSERT_EQ(launches[0].getPointers().size(), 2u);
  EXPECT_EQ(launches[0].getPointers()[0].getValue(), x);
  EXPECT_EQ(launches[0].getPointers()[0].getAllocationBase(), base);  // the first mapping
  // Both mappings, as one range: the kernel reads across the boundary.
  const auto range = rangeAt(launches[0].getPre(), base);
  ASSERT_TRUE(range.has_value());
  EXPECT_EQ(range->getKind(), schema::MemoryKind::VMM);
  EXPECT_EQ(range->getContent().getSize(), 2 * chunk);
  const std::vector<uint8_t> bytes = trace.bytes(range->getContent());
  std::vector<float> straddling(1024);
  std::memcpy(straddling.data(), bytes.data() + (chunk - 2048), 4096);
  EXPECT_EQ(straddling, ramp(1.0f, 1024));
  std::multiset<schema::AllocKind> freed;
  for (const auto& e : trace.of(Event::FREE)) {
    freed.insert(e.getFree().getKind());
  }
  EXPECT_EQ(freed.count(schema::AllocKind::VMM_MAP), 1u);
  EXPECT_EQ(freed.count(schema::AllocKind::VMM_CREATE), 2u);
  EXPECT_EQ(freed.count(schema::AllocKind::VMM_RESERVE), 1u);
}

}  // namespace
}  // namespace kcap_test
