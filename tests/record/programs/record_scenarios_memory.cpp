// record_scenarios' memory scenarios (record_scenarios.cpp's table says
// what each does): tensor-map, vmm, large, disk-full, pitched, volume.
#include "record_scenarios.h"

#include <dlfcn.h>
#include <sys/resource.h>
#include <signal.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace scenarios {

int tensorMap() {
  DRIVER(cuInit, 0);
  const cuuint64_t dims[2] = {64, 16};
  const cuuint64_t strides[1] = {256};
  const cuuint32_t box[2] = {32, 8};
  const cuuint32_t unit[3] = {1, 1, 1};
  CUtensorMap misaligned{};
  CHECK(cuTensorMapEncodeTiled(&misaligned, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, reinterpret_cast<void*>(0x1008), dims,
                               strides, box, unit, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                               CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                               CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_ERROR_INVALID_VALUE);
  start();
  const CUdeviceptr src = upload(iota(1.0f));
  CUdeviceptr out = 0;
  DRIVER(cuMemAlloc, &out, kN * sizeof(float));
  void* const global = reinterpret_cast<void*>(src);
  CUtensorMap tiled{};
  DRIVER(cuTensorMapEncodeTiled, &tiled, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, global, dims, strides, box, unit,
         CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
         CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  const cuuint64_t dims3[3] = {4, 16, 16};
  const cuuint64_t strides3[2] = {16, 256};
  const int lower[1] = {-1};
  const int upper[1] = {1};
  CUtensorMap im2col{};
  DRIVER(cuTensorMapEncodeIm2col, &im2col, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 3, global, dims3, strides3, lower, upper, 4,
         8, unit, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_NONE,
         CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA);
  CUtensorMap wide{};
  DRIVER(cuTensorMapEncodeIm2colWide, &wide, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 3, global, dims3, strides3, -2, 2, 4, 16,
         unit, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_IM2COL_WIDE_MODE_W128, CU_TENSOR_MAP_SWIZZLE_64B,
         CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  CUmodule module = nullptr;
  DRIVER(cuModuleLoadData, &module, test::kTmaScalePtx);
  CUfunction function = nullptr;
  DRIVER(cuModuleGetFunction, &function, module, "tma_scale");
  int n = kN;
  void* params[] = {&tiled, &out, &n};
  test::launchesMade().add("tma_scale");
  DRIVER(cuLaunchKernel, function, 1, 1, 1, 32, 1, 1, 0, nullptr, params, nullptr);
  const std::vector<float> values = download(out, kN);
  CHECK(values[10] == 20.0f);
  std::printf("result tensor-map out[10] %.1f\n", static_cast<double>(values[10]));
  return 0;
}

int vmm() {
  const Context c = start();
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = c.device;
  std::size_t granularity = 0;
  DRIVER(cuMemGetAllocationGranularity, &granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
  CUdeviceptr base = 0;
  DRIVER(cuMemAddressReserve, &base, 4 * granularity, 0, 0, 0);
  CUmemGenericAllocationHandle chunks[2] = {};
  for (int i = 0; i < 2; ++i) {
    DRIVER(cuMemCreate, &chunks[i], granularity, &prop, 0);
    DRIVER(cuMemMap, base + static_cast<CUdeviceptr>(i) * granularity, granularity, 0, chunks[i], 0);
  }
  CUmemAccessDesc access{};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  DRIVER(cuMemSetAccess, base, 2 * granularity, &access, 1);
  // x straddles the two mappings: half in each.
  const CUdeviceptr x = base + granularity - kN * sizeof(float) / 2;
  DRIVER(cuMemcpyHtoD, x, iota(1.0f).data(), kN * sizeof(float));
  Axpy axpy;
  CHECK(axpy.launch(1.0f, nullptr, x) == CUDA_SUCCESS);
  std::printf("result vmm_y_last %.1f\n", static_cast<double>(download(axpy.y, kN)[kN - 1]));
  DRIVER(cuMemUnmap, base, 2 * granularity);
  for (const auto chunk : chunks) {
    DRIVER(cuMemRelease, chunk);
  }
  DRIVER(cuMemAddressFree, base, 4 * granularity);
  return 0;
}

// What the `large` scenario sets each word of 1 MiB piece `p` to.
std::uint32_t largeWord(std::size_t piece) { return static_cast<std::uint32_t>(piece * 2654435761u); }

int large() {
  constexpr std::size_t kPiece = 1u << 20, kPieces = 80;
  start();
  Axpy axpy;
  CUdeviceptr big = 0;
  DRIVER(cuMemAlloc, &big, kPieces * kPiece + 4096);
  // Memsets, not copies from the host: the trace sees these bytes first
  // in the launch's snapshot, as with memory a kernel wrote.
  for (std::size_t piece = 0; piece < kPieces; ++piece) {
    DRIVER(cuMemsetD32, big + piece * kPiece, largeWord(piece == 70 ? 3 : piece), kPiece / 4);
  }
  DRIVER(cuMemsetD32, big + kPieces * kPiece, 0xabcdef01u, 1024);
  CHECK(axpy.launch(1.0f, nullptr, big) == CUDA_SUCCESS);
  DRIVER(cuMemsetD32, big + kPiece, 0x5a5a5a5au, 1024);
  CHECK(axpy.launch(1.0f, nullptr, big) == CUDA_SUCCESS);
  printBits("large_y5", axpy.y, 5);
  DRIVER(cuMemFree, big);
  return 0;
}

int diskFull() {
  const rlimit limit{256u << 10, 256u << 10};
  setrlimit(RLIMIT_FSIZE, &limit);
  signal(SIGXFSZ, SIG_IGN);  // writes past the limit fail with EFBIG instead
  start();
  Axpy axpy;
  // 1 MiB that does not compress, reachable from every launch.
  std::vector<std::uint32_t> noise(256u << 10);
  std::uint32_t state = 12345;
  for (auto& word : noise) {
    state = state * 1664525u + 1013904223u;
    word = state;
  }
  CUdeviceptr big = 0;
  DRIVER(cuMemAlloc, &big, noise.size() * sizeof noise[0]);
  DRIVER(cuMemcpyHtoD, big, noise.data(), noise.size() * sizeof noise[0]);
  for (int i = 0; i < 6; ++i) {
    CHECK(axpy.launch(1.0f, nullptr, big) == CUDA_SUCCESS);  // y += the noise, as floats
    DRIVER(cuMemcpyDtoD, big, big + 4096, 4096);             // keep changing it
  }
  printBits("disk_full_y1", axpy.y, 1);
  DRIVER(cuMemFree, big);
  return 0;
}

int pitched() {
  constexpr std::size_t kRows = 8;
  start();
  Axpy axpy;
  CUstream stream = nullptr;
  DRIVER(cuStreamCreate, &stream, CU_STREAM_NON_BLOCKING);
  CUdeviceptr p = 0;
  std::size_t pitch = 0;
  DRIVER(cuMemAllocPitch, &p, &pitch, 256, kRows, 4);
  CHECK(pitch * kRows == kN * sizeof(float));
  DRIVER(cuMemsetD32, p, 0, kN);
  std::vector<std::uint8_t> model(pitch * kRows, 0);  // what p holds, computed alongside
  const auto copyRows = [](std::uint8_t* to, std::size_t toPitch, const std::uint8_t* from, std::size_t fromPitch,
                           std::size_t width, std::size_t height) {
    for (std::size_t r = 0; r < height; ++r) {
      std::memcpy(to + r * toPitch, from + r * fromPitch, width);
    }
  };

  // Host to device, from (8, 1) of host rows 64 bytes apart to (12, 1).
  std::vector<std::uint8_t> host(4 * 64);
  for (std::size_t i = 0; i < host.size(); ++i) {
    host[i] = static_cast<std::uint8_t>(i);
  }
  CUDA_MEMCPY2D up{};
  up.srcMemoryType = CU_MEMORYTYPE_HOST;
  up.srcHost = host.data();
  up.srcXInBytes = 8;
  up.srcY = 1;
  up.srcPitch = 64;
  up.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  up.dstDevice = p;
  up.dstXInBytes = 12;
  up.dstY = 1;
  up.dstPitch = pitch;
  up.WidthInBytes = 40;
  up.Height = 3;
  DRIVER(cuMemcpy2D, &up);
  copyRows(model.data() + pitch + 12, pitch, host.data() + 64 + 8, 64, 40, 3);

  // Both sides unified: pageable host memory to rows 4..6.
  std::vector<std::uint8_t> more(3 * 48);
  for (std::size_t i = 0; i < more.size(); ++i) {
    more[i] = static_cast<std::uint8_t>(200 + i % 50);
  }
  CUDA_MEMCPY2D unified{};
  unified.srcMemoryType = CU_MEMORYTYPE_UNIFIED;
  unified.srcDevice = reinterpret_cast<CUdeviceptr>(more.data());
  unified.srcPitch = 48;
  unified.dstMemoryType = CU_MEMORYTYPE_UNIFIED;
  unified.dstDevice = p + 4 * pitch;
  unified.dstPitch = pitch;
  unified.WidthInBytes = 32;
  unified.Height = 3;
  DRIVER(cuMemcpy2DUnaligned, &unified);
  copyRows(model.data() + 4 * pitch, pitch, more.data(), 48, 32, 3);

  // Device to device, per-thread and async: rows 1..2 to (256, 5).
  using Copy2DAsync = CUresult (*)(const CUDA_MEMCPY2D*, CUstream);
  const auto copyPtsz = reinterpret_cast<Copy2DAsync>(dlsym(RTLD_DEFAULT, "cuMemcpy2DAsync_v2_ptsz"));
  CHECK(copyPtsz != nullptr);
  CUDA_MEMCPY2D across{};
  across.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  across.srcDevice = p;
  across.srcY = 1;
  across.srcPitch = pitch;
  across.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  across.dstDevice = p;
  across.dstXInBytes = 256;
  across.dstY = 5;
  across.dstPitch = pitch;
  across.WidthInBytes = 64;
  across.Height = 2;
  test::checked("cuMemcpy2DAsync_v2_ptsz", copyPtsz(&across, stream), __FILE__, __LINE__);
  DRIVER(cuStreamSynchronize, stream);
  copyRows(model.data() + 5 * pitch + 256, pitch, model.data() + pitch, pitch, 64, 2);

  // Memsets: row 7's first 64 floats = 1.0f; 0xAB in rows 2..4 from byte
  // 300 (per-thread); 0x3c00 in rows 4..5 from byte 400 (async).
  DRIVER(cuMemsetD2D32, p + 7 * pitch, pitch, 0x3f800000u, 64, 1);
  const float one = 1.0f;
  for (std::size_t i = 0; i < 64; ++i) {
    std::memcpy(model.data() + 7 * pitch + 4 * i, &one, 4);
  }
  using Set2D8 = CUresult (*)(CUdeviceptr, std::size_t, unsigned char, std::size_t, std::size_t);
  const auto setPtds = reinterpret_cast<Set2D8>(dlsym(RTLD_DEFAULT, "cuMemsetD2D8_v2_ptds"));
  CHECK(setPtds != nullptr);
  test::checked("cuMemsetD2D8_v2_ptds", setPtds(p + 2 * pitch + 300, pitch, 0xAB, 20, 3), __FILE__, __LINE__);
  for (std::size_t r = 2; r < 5; ++r) {
    std::memset(model.data() + r * pitch + 300, 0xAB, 20);
  }
  DRIVER(cuMemsetD2D16Async, p + 4 * pitch + 400, pitch, 0x3c00, 8, 2, stream);
  DRIVER(cuStreamSynchronize, stream);
  const unsigned short half = 0x3c00;
  for (std::size_t r = 4; r < 6; ++r) {
    for (std::size_t i = 0; i < 8; ++i) {
      std::memcpy(model.data() + r * pitch + 400 + 2 * i, &half, 2);
    }
  }

  // From a CUDA array (the double moves nothing), and back to the host.
  CUDA_MEMCPY2D fromArray{};
  fromArray.srcMemoryType = CU_MEMORYTYPE_ARRAY;
  fromArray.srcArray = reinterpret_cast<CUarray>(&fromArray);
  fromArray.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  fromArray.dstDevice = p + 6 * pitch + 448;
  fromArray.dstPitch = pitch;
  fromArray.WidthInBytes = 16;
  fromArray.Height = 1;
  DRIVER(cuMemcpy2D, &fromArray);
  std::vector<std::uint8_t> back(model.size());
  CUDA_MEMCPY2D down{};
  down.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  down.srcDevice = p;
  down.srcPitch = pitch;
  down.dstMemoryType = CU_MEMORYTYPE_HOST;
  down.dstHost = back.data();
  down.dstPitch = pitch;
  down.WidthInBytes = pitch;
  down.Height = kRows;
  DRIVER(cuMemcpy2D, &down);
  CHECK(back == model);

  CHECK(axpy.launch(1.0f, nullptr, p) == CUDA_SUCCESS);
  const std::size_t row7 = pitch / sizeof(float) * 7;
  std::printf("result pitched y[%zu] %.1f\n", row7, static_cast<double>(download(axpy.y, kN)[row7]));
  DRIVER(cuStreamDestroy, stream);
  return 0;
}

// Copies `depth` slices of `height` rows of `width` bytes between two
// volumes laid out by pitch and slice height (rows per slice), as
// cuMemcpy3D does: the programs' model of what a 3D copy writes.
void copyVolume(std::uint8_t* to, std::size_t toPitch, std::size_t toHeight, const std::uint8_t* from,
                std::size_t fromPitch, std::size_t fromHeight, std::size_t width, std::size_t height,
                std::size_t depth) {
  for (std::size_t z = 0; z < depth; ++z) {
    for (std::size_t y = 0; y < height; ++y) {
      std::memcpy(to + (z * toHeight + y) * toPitch, from + (z * fromHeight + y) * fromPitch, width);
    }
  }
}

int volume() {
  constexpr std::size_t kSlices = 2, kSliceRows = 4;
  start();
  Axpy axpy;
  CUstream stream = nullptr;
  DRIVER(cuStreamCreate, &stream, CU_STREAM_NON_BLOCKING);
  CUdeviceptr v = 0;
  std::size_t pitch = 0;
  DRIVER(cuMemAllocPitch, &v, &pitch, 256, kSlices * kSliceRows, 4);
  CHECK(pitch * kSlices * kSliceRows == kN * sizeof(float));
  DRIVER(cuMemsetD32, v, 0, kN);
  std::vector<std::uint8_t> model(pitch * kSlices * kSliceRows, 0);  // what v holds, computed alongside
  const auto at = [&](std::size_t x, std::size_t y, std::size_t z) { return (z * kSliceRows + y) * pitch + x; };

  // Host to device: 3 host slices of 5 rows 64 bytes apart; 2 slices of 3
  // rows of 40 bytes from (8, 1, 1) of the host to (12, 1, 0) of v.
  std::vector<std::uint8_t> host(3 * 5 * 64);
  for (std::size_t i = 0; i < host.size(); ++i) {
    host[i] = static_cast<std::uint8_t>(i * 7);
  }
  CUDA_MEMCPY3D up{};
  up.srcMemoryType = CU_MEMORYTYPE_HOST;
  up.srcHost = host.data();
  up.srcXInBytes = 8;
  up.srcY = 1;
  up.srcZ = 1;
  up.srcPitch = 64;
  up.srcHeight = 5;
  up.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  up.dstDevice = v;
  up.dstXInBytes = 12;
  up.dstY = 1;
  up.dstPitch = pitch;
  up.dstHeight = kSliceRows;
  up.WidthInBytes = 40;
  up.Height = 3;
  up.Depth = 2;
  DRIVER(cuMemcpy3D, &up);
  copyVolume(model.data() + at(12, 1, 0), pitch, kSliceRows, host.data() + (1 * 5 + 1) * 64 + 8, 64, 5, 40, 3, 2);

  // From a host volume whose rows and slices follow one another (pitch =
  // width, slice height = height), async: to (300, 0, 0).
  std::vector<std::uint8_t> dense(16 * 2 * 2);
  for (std::size_t i = 0; i < dense.size(); ++i) {
    dense[i] = static_cast<std::uint8_t>(100 + i);
  }
  CUDA_MEMCPY3D packed{};
  packed.srcMemoryType = CU_MEMORYTYPE_HOST;
  packed.srcHost = dense.data();
  packed.srcPitch = 16;
  packed.srcHeight = 2;
  packed.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  packed.dstDevice = v;
  packed.dstXInBytes = 300;
  packed.dstPitch = pitch;
  packed.dstHeight = kSliceRows;
  packed.WidthInBytes = 16;
  packed.Height = 2;
  packed.Depth = 2;
  DRIVER(cuMemcpy3DAsync, &packed, stream);
  DRIVER(cuStreamSynchronize, stream);
  copyVolume(model.data() + at(300, 0, 0), pitch, kSliceRows, dense.data(), 16, 2, 16, 2, 2);

  // Both sides unified: slices of 1 row of 32 bytes from pageable host
  // memory (rows 48 bytes apart, slices 2 rows apart) to (400, 3, 0).
  std::vector<std::uint8_t> more(2 * 2 * 48);
  for (std::size_t i = 0; i < more.size(); ++i) {
    more[i] = static_cast<std::uint8_t>(200 + i % 50);
  }
  CUDA_MEMCPY3D unified{};
  unified.srcMemoryType = CU_MEMORYTYPE_UNIFIED;
  unified.srcDevice = reinterpret_cast<CUdeviceptr>(more.data());
  unified.srcPitch = 48;
  unified.srcHeight = 2;
  unified.dstMemoryType = CU_MEMORYTYPE_UNIFIED;
  unified.dstDevice = v;
  unified.dstXInBytes = 400;
  unified.dstY = 3;
  unified.dstPitch = pitch;
  unified.dstHeight = kSliceRows;
  unified.WidthInBytes = 32;
  unified.Height = 1;
  unified.Depth = 2;
  DRIVER(cuMemcpy3D, &unified);
  copyVolume(model.data() + at(400, 3, 0), pitch, kSliceRows, more.data(), 48, 2, 32, 1, 2);

  // Device to device, per-thread and async: rows 1..2 of both slices to
  // (256, 2, 0).
  using Copy3DAsync = CUresult (*)(const CUDA_MEMCPY3D*, CUstream);
  const auto copyPtsz = reinterpret_cast<Copy3DAsync>(dlsym(RTLD_DEFAULT, "cuMemcpy3DAsync_v2_ptsz"));
  CHECK(copyPtsz != nullptr);
  CUDA_MEMCPY3D across{};
  across.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  across.srcDevice = v;
  across.srcY = 1;
  across.srcPitch = pitch;
  across.srcHeight = kSliceRows;
  across.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  across.dstDevice = v;
  across.dstXInBytes = 256;
  across.dstY = 2;
  across.dstPitch = pitch;
  across.dstHeight = kSliceRows;
  across.WidthInBytes = 64;
  across.Height = 2;
  across.Depth = 2;
  test::checked("cuMemcpy3DAsync_v2_ptsz", copyPtsz(&across, stream), __FILE__, __LINE__);
  DRIVER(cuStreamSynchronize, stream);
  copyVolume(model.data() + at(256, 2, 0), pitch, kSliceRows, model.data() + at(0, 1, 0), pitch, kSliceRows, 64, 2, 2);

  // From a CUDA array (the double moves nothing) to (448, 0, 0); one of
  // depth 0 (copies nothing).
  CUDA_MEMCPY3D fromArray{};
  fromArray.srcMemoryType = CU_MEMORYTYPE_ARRAY;
  fromArray.srcArray = reinterpret_cast<CUarray>(&fromArray);
  fromArray.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  fromArray.dstDevice = v;
  fromArray.dstXInBytes = 448;
  fromArray.dstPitch = pitch;
  fromArray.dstHeight = kSliceRows;
  fromArray.WidthInBytes = 16;
  fromArray.Height = 1;
  fromArray.Depth = 2;
  DRIVER(cuMemcpy3D, &fromArray);
  CUDA_MEMCPY3D none = up;
  none.Depth = 0;
  DRIVER(cuMemcpy3D, &none);

  // Back to the host, whole (per-thread).
  using Copy3D = CUresult (*)(const CUDA_MEMCPY3D*);
  const auto copyPtds = reinterpret_cast<Copy3D>(dlsym(RTLD_DEFAULT, "cuMemcpy3D_v2_ptds"));
  CHECK(copyPtds != nullptr);
  std::vector<std::uint8_t> back(model.size());
  CUDA_MEMCPY3D down{};
  down.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  down.srcDevice = v;
  down.srcPitch = pitch;
  down.srcHeight = kSliceRows;
  down.dstMemoryType = CU_MEMORYTYPE_HOST;
  down.dstHost = back.data();
  down.dstPitch = pitch;
  down.dstHeight = kSliceRows;
  down.WidthInBytes = pitch;
  down.Height = kSliceRows;
  down.Depth = kSlices;
  test::checked("cuMemcpy3D_v2_ptds", copyPtds(&down), __FILE__, __LINE__);
  CHECK(back == model);

  CHECK(axpy.launch(1.0f, nullptr, v) == CUDA_SUCCESS);
  const std::size_t element = at(400, 3, 1) / sizeof(float);
  std::printf("result volume y[%zu] %.1f\n", element, static_cast<double>(download(axpy.y, kN)[element]));
  DRIVER(cuStreamDestroy, stream);
  return 0;
}

}  // namespace scenarios
