// The double's own contract, checked without the shim: the interpose tests
// (and the recorder's tests later) rely on it behaving like the driver where
// it matters: lookups by (name, version, flags), the real images of kernels/,
// parameter layouts, handle kinds, globals, and bounds on device memory.
#include "driver_exports.h"

#include <cuda.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

std::string readKernelFile(const char* name) {
  const std::string path = std::string(KCAP_KERNELS_DIR) + "/" + name;
  std::FILE* in = std::fopen(path.c_str(), "rb");
  EXPECT_NE(in, nullptr) << path;
  std::string bytes;
  if (in != nullptr) {
    char chunk[4096];
    std::size_t n = 0;
    while ((n = std::fread(chunk, 1, sizeof chunk, in)) > 0) {
      bytes.append(chunk, n);
    }
    std::fclose(in);
  }
  return bytes;
}

class DriverDouble : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
    ASSERT_EQ(cuDevicePrimaryCtxRetain(&context_, 0), CUDA_SUCCESS);
    ASSERT_EQ(cuCtxSetCurrent(context_), CUDA_SUCCESS);
  }
  void TearDown() override { EXPECT_EQ(cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS); }

  void* lookup(const char* name, int version, cuuint64_t flags, CUresult expected = CUDA_SUCCESS,
               CUdriverProcAddressQueryResult expectedStatus = CU_GET_PROC_ADDRESS_SUCCESS) {
    void* fn = nullptr;
    CUdriverProcAddressQueryResult status{};
    EXPECT_EQ(cuGetProcAddress_v2(name, &fn, version, flags, &status), expected) << name;
    EXPECT_EQ(status, expectedStatus) << name;
    return fn;
  }

  CUcontext context_ = nullptr;
};

TEST_F(DriverDouble, ProcAddressPicksNewestVersionNotAboveTheRequest) {
  EXPECT_EQ(lookup("cuLaunchKernel", 13000, 0), reinterpret_cast<void*>(&cuLaunchKernel));
  EXPECT_EQ(lookup("cuLaunchKernel", 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM),
            reinterpret_cast<void*>(&cuLaunchKernel_ptsz));
  EXPECT_EQ(lookup("cuMemAlloc", 13000, 0), reinterpret_cast<void*>(&cuMemAlloc_v2));
  EXPECT_EQ(lookup("cuDeviceGetUuid", 11000, 0), reinterpret_cast<void*>(&cuDeviceGetUuid));
  EXPECT_EQ(lookup("cuDeviceGetUuid", 11040, 0), reinterpret_cast<void*>(&cuDeviceGetUuid_v2));
  EXPECT_EQ(lookup("cuGetProcAddress", 11030, 0), reinterpret_cast<void*>(&cuGetProcAddress));
  EXPECT_EQ(lookup("cuGetProcAddress", 12000, 0), reinterpret_cast<void*>(&cuGetProcAddress_v2));
  // No per-thread variant: the flag gets the ordinary function.
  EXPECT_EQ(lookup("cuModuleLoadData", 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM),
            reinterpret_cast<void*>(&cuModuleLoadData));
  // An H200's driver: the lookup "succeeds" with NULL and says why in the
  // status; the older form fails and leaves the pointer alone.
  EXPECT_EQ(lookup("cuNoSuchFunction", 13000, 0, CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND), nullptr);
  EXPECT_EQ(lookup("cuLibraryLoadData", 11080, 0, CUDA_SUCCESS, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT), nullptr);
  EXPECT_EQ(lookup("cuLaunchKernel", 6000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, CUDA_SUCCESS,
                   CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT),
            nullptr);
  EXPECT_EQ(lookup("cuLaunchKernel", 13000,
                   CU_GET_PROC_ADDRESS_LEGACY_STREAM | CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM),
            reinterpret_cast<void*>(&cuLaunchKernel_ptsz));
  void* untouched = &untouched;
  EXPECT_EQ(cuGetProcAddress("cuNoSuchFunction", &untouched, 13000, 0), CUDA_ERROR_NOT_FOUND);
  EXPECT_EQ(untouched, &untouched);
}

TEST_F(DriverDouble, LoadsEveryImageKindOfKernels) {
  for (const char* file : {"axpy.fatbin", "axpy.sm_90.cubin", "axpy.ptx"}) {
    const std::string image = readKernelFile(file);
    CUmodule module = nullptr;
    ASSERT_EQ(cuModuleLoadData(&module, image.c_str()), CUDA_SUCCESS) << file;
    CUfunction axpy = nullptr;
    EXPECT_EQ(cuModuleGetFunction(&axpy, module, "axpy"), CUDA_SUCCESS) << file;
    CUfunction other = nullptr;
    EXPECT_EQ(cuModuleGetFunction(&other, module, "reduce_sum"), CUDA_ERROR_NOT_FOUND) << file;
    EXPECT_EQ(cuModuleUnload(module), CUDA_SUCCESS);
  }
  // cudart's wrapper around a fatbin (__fatDeviceText).
  const std::string fatbin = readKernelFile("reduce.fatbin");
  struct {
    std::uint32_t magic;
    std::uint32_t version;
    const void* data;
    const void* extra;
  } wrapper{0x466243B1, 1, fatbin.data(), nullptr};
  CUlibrary library = nullptr;
  ASSERT_EQ(cuLibraryLoadData(&library, &wrapper, nullptr, nullptr, 0, nullptr, nullptr, 0), CUDA_SUCCESS);
  CUkernel kernel = nullptr;
  EXPECT_EQ(cuLibraryGetKernel(&kernel, library, "reduce_sum"), CUDA_SUCCESS);
  EXPECT_EQ(cuLibraryUnload(library), CUDA_SUCCESS);

  const char garbage[] = "\x01\x02\x03\x04garbage";
  CUmodule module = nullptr;
  EXPECT_EQ(cuModuleLoadData(&module, garbage), CUDA_ERROR_INVALID_IMAGE);
}

TEST_F(DriverDouble, ParameterLayoutsAndHandleKinds) {
  const std::string image = readKernelFile("struct_param.fatbin");
  CUlibrary library = nullptr;
  ASSERT_EQ(cuLibraryLoadData(&library, image.data(), nullptr, nullptr, 0, nullptr, nullptr, 0), CUDA_SUCCESS);
  CUkernel kernel = nullptr;
  ASSERT_EQ(cuLibraryGetKernel(&kernel, library, "scale_struct"), CUDA_SUCCESS);
  CUfunction function = nullptr;
  ASSERT_EQ(cuKernelGetFunction(&function, kernel), CUDA_SUCCESS);

  std::size_t offset = 1;
  std::size_t size = 0;
  EXPECT_EQ(cuKernelGetParamInfo(kernel, 0, &offset, &size), CUDA_SUCCESS);
  EXPECT_EQ(offset, 0u);
  EXPECT_EQ(size, 32u);  // one by-value ScaleArgs
  EXPECT_EQ(cuFuncGetParamInfo(function, 0, &offset, &size), CUDA_SUCCESS);
  EXPECT_EQ(cuFuncGetParamInfo(function, 1, &offset, &size), CUDA_ERROR_INVALID_VALUE);

  // As on the GPU: a CUkernel is no CUfunction for the name and parameter
  // queries, though it launches as one.
  const char* name = nullptr;
  EXPECT_EQ(cuFuncGetName(&name, reinterpret_cast<CUfunction>(kernel)), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuFuncGetParamInfo(reinterpret_cast<CUfunction>(kernel), 0, &offset, &size), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuKernelGetName(&name, kernel), CUDA_SUCCESS);
  EXPECT_STREQ(name, "scale_struct");
  EXPECT_EQ(cuFuncGetName(&name, function), CUDA_SUCCESS);
  EXPECT_STREQ(name, "scale_struct");
  EXPECT_EQ(cuLibraryUnload(library), CUDA_SUCCESS);

  const std::string axpyImage = readKernelFile("axpy.sm_90.cubin");
  CUmodule module = nullptr;
  ASSERT_EQ(cuModuleLoadData(&module, axpyImage.data()), CUDA_SUCCESS);
  CUfunction axpy = nullptr;
  ASSERT_EQ(cuModuleGetFunction(&axpy, module, "axpy"), CUDA_SUCCESS);
  const std::size_t offsets[] = {0, 8, 16, 24};
  const std::size_t sizes[] = {4, 8, 8, 4};
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(cuFuncGetParamInfo(axpy, i, &offset, &size), CUDA_SUCCESS);
    EXPECT_EQ(offset, offsets[i]);
    EXPECT_EQ(size, sizes[i]);
  }
  EXPECT_EQ(cuModuleUnload(module), CUDA_SUCCESS);
}

TEST_F(DriverDouble, ModuleGlobalsAreDeviceMemoryPerModule) {
  const std::string image = readKernelFile("constant.sm_90.cubin");
  CUmodule first = nullptr;
  CUmodule second = nullptr;
  ASSERT_EQ(cuModuleLoadData(&first, image.data()), CUDA_SUCCESS);
  ASSERT_EQ(cuModuleLoadData(&second, image.data()), CUDA_SUCCESS);
  CUdeviceptr coeffs = 0;
  CUdeviceptr otherCoeffs = 0;
  std::size_t bytes = 0;
  ASSERT_EQ(cuModuleGetGlobal(&coeffs, &bytes, first, "coeffs"), CUDA_SUCCESS);
  EXPECT_EQ(bytes, 64u);
  ASSERT_EQ(cuModuleGetGlobal(&otherCoeffs, nullptr, second, "coeffs"), CUDA_SUCCESS);
  EXPECT_NE(coeffs, otherCoeffs);
  CUdeviceptr count = 0;
  ASSERT_EQ(cuModuleGetGlobal(&count, &bytes, first, "call_count"), CUDA_SUCCESS);
  EXPECT_EQ(bytes, 4u);
  EXPECT_EQ(cuModuleGetGlobal(&count, &bytes, first, "no_such_global"), CUDA_ERROR_NOT_FOUND);

  // poly_eval adds one to call_count per block.
  CUfunction poly = nullptr;
  ASSERT_EQ(cuModuleGetFunction(&poly, first, "poly_eval"), CUDA_SUCCESS);
  CUdeviceptr x = 0;
  CUdeviceptr y = 0;
  ASSERT_EQ(cuMemAlloc(&x, 64 * sizeof(float)), CUDA_SUCCESS);
  ASSERT_EQ(cuMemAlloc(&y, 64 * sizeof(float)), CUDA_SUCCESS);
  int n = 64;
  void* params[] = {&x, &y, &n};
  ASSERT_EQ(cuLaunchKernel(poly, 3, 1, 1, 32, 1, 1, 0, nullptr, params, nullptr), CUDA_SUCCESS);
  int calls = 0;
  ASSERT_EQ(cuMemcpyDtoH(&calls, count, sizeof calls), CUDA_SUCCESS);
  EXPECT_EQ(calls, 3);

  EXPECT_EQ(cuMemFree(x), CUDA_SUCCESS);
  EXPECT_EQ(cuMemFree(y), CUDA_SUCCESS);
  EXPECT_EQ(cuModuleUnload(first), CUDA_SUCCESS);
  EXPECT_EQ(cuModuleUnload(second), CUDA_SUCCESS);
}

TEST_F(DriverDouble, DeviceMemoryIsAlignedAndBounded) {
  CUdeviceptr p = 0;
  ASSERT_EQ(cuMemAlloc(&p, 1000), CUDA_SUCCESS);
  EXPECT_EQ(p % 256, 0u);
  CUdeviceptr base = 0;
  std::size_t size = 0;
  EXPECT_EQ(cuMemGetAddressRange(&base, &size, p + 999), CUDA_SUCCESS);
  EXPECT_EQ(base, p);
  EXPECT_EQ(size, 1000u);
  EXPECT_EQ(cuMemGetAddressRange(&base, &size, p + 1000), CUDA_ERROR_NOT_FOUND);
  std::vector<char> host(1001);
  EXPECT_EQ(cuMemcpyHtoD(p, host.data(), 1000), CUDA_SUCCESS);
  EXPECT_EQ(cuMemcpyHtoD(p, host.data(), 1001), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemsetD32(p + 4, 0, 250), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemFree(p), CUDA_SUCCESS);
  EXPECT_EQ(cuMemFree(p), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(DriverDouble, PitchedMemoryIsCopiedAndSetRowByRow) {
  CUdeviceptr p = 0;
  std::size_t pitch = 0;
  ASSERT_EQ(cuMemAllocPitch(&p, &pitch, 40, 3, 4), CUDA_SUCCESS);
  EXPECT_EQ(pitch, 512u);
  CUdeviceptr base = 0;
  std::size_t size = 0;
  ASSERT_EQ(cuMemGetAddressRange(&base, &size, p), CUDA_SUCCESS);
  EXPECT_EQ(size, 3 * pitch);
  std::memset(reinterpret_cast<void*>(p), 0x55, 3 * pitch);

  // Host rows 16 bytes apart, 12 of each copied to (x 4, y 1) of p.
  std::vector<std::uint8_t> host(16 * 2);
  for (std::size_t i = 0; i < host.size(); ++i) {
    host[i] = static_cast<std::uint8_t>(i);
  }
  CUDA_MEMCPY2D up{};
  up.srcMemoryType = CU_MEMORYTYPE_HOST;
  up.srcHost = host.data();
  up.srcPitch = 16;
  up.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  up.dstDevice = p;
  up.dstPitch = pitch;
  up.dstXInBytes = 4;
  up.dstY = 1;
  up.WidthInBytes = 12;
  up.Height = 2;
  ASSERT_EQ(cuMemcpy2D(&up), CUDA_SUCCESS);
  const auto* bytes = reinterpret_cast<const std::uint8_t*>(p);
  EXPECT_EQ(bytes[pitch + 3], 0x55);
  EXPECT_EQ(bytes[pitch + 4], 0);
  EXPECT_EQ(bytes[pitch + 15], 11);
  EXPECT_EQ(bytes[pitch + 16], 0x55);
  EXPECT_EQ(bytes[2 * pitch + 4], 16);
  EXPECT_EQ(bytes[2 * pitch + 15], 27);

  // Rows 1 and 2 set, 2 elements each from element 1; the rest unchanged.
  ASSERT_EQ(cuMemsetD2D32(p + pitch + 4, pitch, 0xAABBCCDDu, 2, 2), CUDA_SUCCESS);
  std::uint32_t word = 0;
  std::memcpy(&word, bytes + 2 * pitch + 8, 4);
  EXPECT_EQ(word, 0xAABBCCDDu);
  EXPECT_EQ(bytes[2 * pitch + 12], 24);
  ASSERT_EQ(cuMemsetD2D8Async(p, pitch, 7, 2, 1, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(bytes[1], 7);
  EXPECT_EQ(bytes[2], 0x55);

  // Device to device through the unified type, and back to the host.
  CUDA_MEMCPY2D across = up;
  across.srcMemoryType = CU_MEMORYTYPE_UNIFIED;
  across.srcDevice = p + pitch + 4;
  across.srcPitch = pitch;
  across.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  across.dstXInBytes = 20;
  across.dstY = 0;
  ASSERT_EQ(cuMemcpy2DAsync(&across, nullptr), CUDA_SUCCESS);
  std::vector<std::uint8_t> back(12);
  CUDA_MEMCPY2D down{};
  down.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  down.srcDevice = p + pitch + 20;
  down.srcPitch = pitch;
  down.dstMemoryType = CU_MEMORYTYPE_HOST;
  down.dstHost = back.data();
  down.dstPitch = 12;
  down.WidthInBytes = 12;
  down.Height = 1;
  ASSERT_EQ(cuMemcpy2DUnaligned(&down), CUDA_SUCCESS);
  EXPECT_EQ(back[0], 0xDD);
  EXPECT_EQ(back[8], 24);
  EXPECT_EQ(bytes[20], 0xDD);  // row 0 got source row 1

  // Bounds: a last row past the allocation, a pitch below the width.
  up.dstY = 2;
  EXPECT_EQ(cuMemcpy2D(&up), CUDA_ERROR_INVALID_VALUE);
  up.dstY = 0;
  up.srcPitch = 8;
  EXPECT_EQ(cuMemcpy2D(&up), CUDA_ERROR_INVALID_VALUE);
  up.srcPitch = 16;
  // No arrays: a handle is taken, nothing moves.
  up.dstMemoryType = CU_MEMORYTYPE_ARRAY;
  EXPECT_EQ(cuMemcpy2D(&up), CUDA_ERROR_INVALID_HANDLE);
  up.dstArray = reinterpret_cast<CUarray>(&up);
  EXPECT_EQ(cuMemcpy2D(&up), CUDA_SUCCESS);
  EXPECT_EQ(bytes[pitch + 4], 0xDD);
  EXPECT_EQ(cuMemsetD2D16(p, pitch, 1, 257, 3), CUDA_ERROR_INVALID_VALUE);

  EXPECT_EQ(lookup("cuMemcpy2D", 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM),
            reinterpret_cast<void*>(&cuMemcpy2D_v2_ptds));
  EXPECT_EQ(lookup("cuMemsetD2D32Async", 13000, 0), reinterpret_cast<void*>(&cuMemsetD2D32Async));
  EXPECT_EQ(cuMemFree(p), CUDA_SUCCESS);
}

TEST_F(DriverDouble, VolumesAreCopiedSliceBySlice) {
  // A volume of 3 slices of 4 rows, each row 512 bytes apart (pitched as
  // cudaMalloc3D does: one allocation of 12 rows).
  CUdeviceptr p = 0;
  std::size_t pitch = 0;
  ASSERT_EQ(cuMemAllocPitch(&p, &pitch, 40, 12, 4), CUDA_SUCCESS);
  ASSERT_EQ(pitch, 512u);
  std::memset(reinterpret_cast<void*>(p), 0x55, 12 * pitch);
  const auto* bytes = reinterpret_cast<const std::uint8_t*>(p);
  const std::size_t slice = 4 * pitch;

  // Host: slices of 3 rows 16 bytes apart. 10 bytes of 2 rows of 2 slices,
  // from (2, 1, 0) of the host to (4, 1, 1) of p.
  std::vector<std::uint8_t> host(3 * 3 * 16);
  for (std::size_t i = 0; i < host.size(); ++i) {
    host[i] = static_cast<std::uint8_t>(i);
  }
  CUDA_MEMCPY3D up{};
  up.srcMemoryType = CU_MEMORYTYPE_HOST;
  up.srcHost = host.data();
  up.srcXInBytes = 2;
  up.srcY = 1;
  up.srcPitch = 16;
  up.srcHeight = 3;
  up.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  up.dstDevice = p;
  up.dstXInBytes = 4;
  up.dstY = 1;
  up.dstZ = 1;
  up.dstPitch = pitch;
  up.dstHeight = 4;
  up.WidthInBytes = 10;
  up.Height = 2;
  up.Depth = 2;
  ASSERT_EQ(cuMemcpy3D(&up), CUDA_SUCCESS);
  // Slice 1 row 1 <- host slice 0 row 1; slice 2 row 2 <- host slice 1 row 2.
  EXPECT_EQ(bytes[slice + pitch + 3], 0x55);
  EXPECT_EQ(bytes[slice + pitch + 4], 18);
  EXPECT_EQ(bytes[slice + pitch + 13], 27);
  EXPECT_EQ(bytes[slice + pitch + 14], 0x55);
  EXPECT_EQ(bytes[slice + 2 * pitch + 4], 34);
  EXPECT_EQ(bytes[2 * slice + pitch + 4], 48 + 18);
  EXPECT_EQ(bytes[2 * slice + 2 * pitch + 13], 48 + 32 + 11);
  EXPECT_EQ(bytes[2 * slice + 3 * pitch + 4], 0x55);
  EXPECT_EQ(bytes[pitch + 4], 0x55);

  // Device to device through the unified type (async, per-thread form),
  // slices 1..2 rows 1..2 to (100, 0, 0), and back to a packed host buffer.
  CUDA_MEMCPY3D across{};
  across.srcMemoryType = CU_MEMORYTYPE_UNIFIED;
  across.srcDevice = p;
  across.srcXInBytes = 4;
  across.srcY = 1;
  across.srcZ = 1;
  across.srcPitch = pitch;
  across.srcHeight = 4;
  across.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  across.dstDevice = p;
  across.dstXInBytes = 100;
  across.dstPitch = pitch;
  across.dstHeight = 4;
  across.WidthInBytes = 10;
  across.Height = 2;
  across.Depth = 2;
  ASSERT_EQ(cuMemcpy3DAsync_v2_ptsz(&across, nullptr), CUDA_SUCCESS);
  std::vector<std::uint8_t> back(2 * 2 * 10);
  CUDA_MEMCPY3D down{};
  down.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  down.srcDevice = p + 100;
  down.srcPitch = pitch;
  down.srcHeight = 4;
  down.dstMemoryType = CU_MEMORYTYPE_HOST;
  down.dstHost = back.data();
  down.dstPitch = 10;
  down.dstHeight = 2;
  down.WidthInBytes = 10;
  down.Height = 2;
  down.Depth = 2;
  ASSERT_EQ(cuMemcpy3D_v2_ptds(&down), CUDA_SUCCESS);
  EXPECT_EQ(back[0], 18);
  EXPECT_EQ(back[10], 34);
  EXPECT_EQ(back[20], 48 + 18);
  EXPECT_EQ(back[39], 48 + 32 + 11);

  // Depth 1 may leave the heights 0; depth 0 copies nothing.
  down.srcHeight = 0;
  down.dstHeight = 0;
  down.Depth = 1;
  EXPECT_EQ(cuMemcpy3DAsync(&down, nullptr), CUDA_SUCCESS);
  down.Depth = 0;
  EXPECT_EQ(cuMemcpy3D(&down), CUDA_SUCCESS);
  // Bounds: a slice height below the copy's, a last slice past the
  // allocation, a pitch below the width.
  down.Depth = 2;
  EXPECT_EQ(cuMemcpy3D(&down), CUDA_ERROR_INVALID_VALUE);
  down.dstHeight = 2;
  down.srcHeight = 4;
  down.srcZ = 2;
  EXPECT_EQ(cuMemcpy3D(&down), CUDA_ERROR_INVALID_VALUE);
  down.srcZ = 0;
  down.dstPitch = 8;
  EXPECT_EQ(cuMemcpy3D(&down), CUDA_ERROR_INVALID_VALUE);
  down.dstPitch = 10;
  // No arrays: a handle is taken, nothing moves.
  down.dstMemoryType = CU_MEMORYTYPE_ARRAY;
  EXPECT_EQ(cuMemcpy3D(&down), CUDA_ERROR_INVALID_HANDLE);
  down.dstArray = reinterpret_cast<CUarray>(&down);
  EXPECT_EQ(cuMemcpy3D(&down), CUDA_SUCCESS);

  EXPECT_EQ(lookup("cuMemcpy3D", 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM),
            reinterpret_cast<void*>(&cuMemcpy3D_v2_ptds));
  EXPECT_EQ(lookup("cuMemcpy3DAsync", 13000, 0), reinterpret_cast<void*>(&cuMemcpy3DAsync));
  EXPECT_EQ(cuMemFree(p), CUDA_SUCCESS);
}

}  // namespace

// ---- what replay needs of the double (tests/replay) -------------------------------------

// kernels/axpy_changed.cu, in every image form, runs the changed host axpy:
// element 100 one bit off, every other element right.
TEST_F(DriverDouble, TheChangedAxpyBuildRunsItsOwnHostKernel) {
  constexpr int n = 1000;
  for (const char* file : {"axpy_changed.fatbin", "axpy_changed.sm_90.cubin", "axpy_changed.ptx", "axpy.fatbin"}) {
    const std::string image = readKernelFile(file);
    CUmodule module = nullptr;
    ASSERT_EQ(cuModuleLoadData(&module, image.c_str()), CUDA_SUCCESS) << file;
    CUfunction axpy = nullptr;
    ASSERT_EQ(cuModuleGetFunction(&axpy, module, "axpy"), CUDA_SUCCESS) << file;
    std::vector<float> x(n), y(n);
    for (int i = 0; i < n; ++i) {
      x[static_cast<std::size_t>(i)] = static_cast<float>(i);
      y[static_cast<std::size_t>(i)] = static_cast<float>(2 * i);
    }
    CUdeviceptr dx = 0, dy = 0;
    ASSERT_EQ(cuMemAlloc(&dx, n * sizeof(float)), CUDA_SUCCESS);
    ASSERT_EQ(cuMemAlloc(&dy, n * sizeof(float)), CUDA_SUCCESS);
    ASSERT_EQ(cuMemcpyHtoD(dx, x.data(), n * sizeof(float)), CUDA_SUCCESS);
    ASSERT_EQ(cuMemcpyHtoD(dy, y.data(), n * sizeof(float)), CUDA_SUCCESS);
    float a = 2.0f;
    int count = n;
    void* params[] = {&a, &dx, &dy, &count};
    ASSERT_EQ(cuLaunchKernel(axpy, 4, 1, 1, 256, 1, 1, 0, nullptr, params, nullptr), CUDA_SUCCESS);
    ASSERT_EQ(cuMemcpyDtoH(y.data(), dy, n * sizeof(float)), CUDA_SUCCESS);
    const bool changed = std::string(file).rfind("axpy_changed", 0) == 0;
    int wrong = 0;
    for (int i = 0; i < n; ++i) {
      const float right = static_cast<float>(4 * i);
      std::uint32_t want = 0, got = 0;
      std::memcpy(&want, &right, sizeof want);
      std::memcpy(&got, &y[static_cast<std::size_t>(i)], sizeof got);
      if (changed && i == 100) {
        want ^= 1u;
      }
      wrong += got != want;
    }
    EXPECT_EQ(wrong, 0) << file;
    EXPECT_EQ(cuMemFree(dx), CUDA_SUCCESS);
    EXPECT_EQ(cuMemFree(dy), CUDA_SUCCESS);
    EXPECT_EQ(cuModuleUnload(module), CUDA_SUCCESS);
  }
}

TEST_F(DriverDouble, EventsMeasureElapsedHostTime) {
  CUevent start = nullptr, stop = nullptr, untimed = nullptr;
  ASSERT_EQ(cuEventCreate(&start, CU_EVENT_DEFAULT), CUDA_SUCCESS);
  ASSERT_EQ(cuEventCreate(&stop, CU_EVENT_DEFAULT), CUDA_SUCCESS);
  ASSERT_EQ(cuEventCreate(&untimed, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
  float ms = -1;
  EXPECT_EQ(cuEventElapsedTime(&ms, start, stop), CUDA_ERROR_INVALID_HANDLE);  // not recorded yet
  ASSERT_EQ(cuEventRecord(start, nullptr), CUDA_SUCCESS);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_EQ(cuEventRecord(stop, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(cuEventSynchronize(stop), CUDA_SUCCESS);
  ASSERT_EQ(cuEventElapsedTime(&ms, start, stop), CUDA_SUCCESS);
  EXPECT_GE(ms, 19.0f);
  EXPECT_LT(ms, 10000.0f);
  ASSERT_EQ(cuEventElapsedTime(&ms, stop, start), CUDA_SUCCESS);
  EXPECT_LE(ms, -19.0f);
  ASSERT_EQ(cuEventRecord(untimed, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(cuEventElapsedTime(&ms, start, untimed), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuEventElapsedTime(nullptr, start, stop), CUDA_ERROR_INVALID_VALUE);
  for (CUevent e : {start, stop, untimed}) {
    EXPECT_EQ(cuEventDestroy(e), CUDA_SUCCESS);
  }
}

TEST_F(DriverDouble, TensorMapReplaceAddressRewritesTheAddressWord) {
  CUtensorMap map{};
  std::memset(&map, 0xAB, sizeof map);
  alignas(16) static char target[64];
  ASSERT_EQ(cuTensorMapReplaceAddress(&map, target), CUDA_SUCCESS);
  std::uint64_t word = 0;
  std::memcpy(&word, &map, sizeof word);
  EXPECT_EQ(word, reinterpret_cast<std::uintptr_t>(target));
  const auto* bytes = reinterpret_cast<const unsigned char*>(&map);
  for (std::size_t i = 8; i < sizeof map; ++i) {
    ASSERT_EQ(bytes[i], 0xAB) << i;  // the rest untouched
  }
  EXPECT_EQ(cuTensorMapReplaceAddress(&map, target + 1), CUDA_ERROR_INVALID_VALUE);  // misaligned
}

TEST_F(DriverDouble, TensorMapEncodesCheckTheBasicsAndAreDeterministic) {
  alignas(16) static char global[4096];
  const cuuint64_t dims[2] = {64, 16};
  const cuuint64_t strides[1] = {256};
  const cuuint32_t box[2] = {32, 8};
  const cuuint32_t unit[3] = {1, 1, 1};
  const auto tiled = [&](CUtensorMap* map, void* address, const cuuint64_t* s, const cuuint32_t* b, cuuint32_t rank) {
    return cuTensorMapEncodeTiled(map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, rank, address, dims, s, b, unit,
                                  CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                  CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  };
  CUtensorMap a{}, b{};
  ASSERT_EQ(tiled(&a, global, strides, box, 2), CUDA_SUCCESS);
  ASSERT_EQ(tiled(&b, global, strides, box, 2), CUDA_SUCCESS);
  EXPECT_EQ(std::memcmp(&a, &b, sizeof a), 0);  // the same arguments, the same map
  std::uint64_t word = 0;
  std::memcpy(&word, &a, sizeof word);
  EXPECT_EQ(word, reinterpret_cast<std::uintptr_t>(global));
  // Another address changes only the address word.
  ASSERT_EQ(tiled(&b, global + 16, strides, box, 2), CUDA_SUCCESS);
  EXPECT_NE(std::memcmp(&a, &b, 8), 0);
  EXPECT_EQ(std::memcmp(reinterpret_cast<const char*>(&a) + 8, reinterpret_cast<const char*>(&b) + 8, 120), 0);
  // Another box, another map.
  const cuuint32_t otherBox[2] = {16, 8};
  ASSERT_EQ(tiled(&b, global, strides, otherBox, 2), CUDA_SUCCESS);
  EXPECT_NE(std::memcmp(&a, &b, sizeof a), 0);
  // What the real driver refuses first.
  const cuuint64_t oddStrides[1] = {260};
  const cuuint32_t bigBox[2] = {512, 8};
  EXPECT_EQ(tiled(nullptr, global, strides, box, 2), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(tiled(&b, global + 8, strides, box, 2), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(tiled(&b, global, oddStrides, box, 2), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(tiled(&b, global, strides, bigBox, 2), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(tiled(&b, global, strides, box, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(tiled(&b, global, strides, box, 6), CUDA_ERROR_INVALID_VALUE);
  // im2col forms: rank 3 at least.
  const cuuint64_t dims3[3] = {4, 16, 16};
  const cuuint64_t strides3[2] = {16, 256};
  const int lower[1] = {-1};
  const int upper[1] = {1};
  CUtensorMap c{}, d{};
  EXPECT_EQ(cuTensorMapEncodeIm2col(&c, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 3, global, dims3, strides3, lower, upper, 4, 8,
                                    unit, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                                    CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
            CUDA_SUCCESS);
  EXPECT_EQ(cuTensorMapEncodeIm2col(&d, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, global, dims3, strides3, lower, upper, 4, 8,
                                    unit, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                                    CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuTensorMapEncodeIm2colWide(&d, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 3, global, dims3, strides3, -1, 1, 4, 8,
                                        unit, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_IM2COL_WIDE_MODE_W,
                                        CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_NONE,
                                        CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
            CUDA_SUCCESS);
  EXPECT_NE(std::memcmp(&c, &d, sizeof c), 0);
}

// Hints are honoured when the range is free, and ignored with
// KCAP_DOUBLE_REFUSE_ADDRESS_HINTS=1 (replay's relocation tests).
TEST_F(DriverDouble, AddressHintsCanBeRefused) {
  std::size_t granularity = 0;
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  ASSERT_EQ(cuMemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM), CUDA_SUCCESS);
  // A free range: reserve one, free it, ask for it back.
  CUdeviceptr freeRange = 0;
  ASSERT_EQ(cuMemAddressReserve(&freeRange, 2 * granularity, 0, 0, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuMemAddressFree(freeRange, 2 * granularity), CUDA_SUCCESS);
  CUdeviceptr got = 0;
  ASSERT_EQ(cuMemAddressReserve(&got, 2 * granularity, 0, freeRange, 0), CUDA_SUCCESS);
  EXPECT_EQ(got, freeRange);
  ASSERT_EQ(cuMemAddressFree(got, 2 * granularity), CUDA_SUCCESS);

  ASSERT_EQ(setenv("KCAP_DOUBLE_REFUSE_ADDRESS_HINTS", "1", 1), 0);
  ASSERT_EQ(cuMemAddressReserve(&got, 2 * granularity, 0, freeRange, 0), CUDA_SUCCESS);
  EXPECT_NE(got, freeRange);
  EXPECT_NE(got, 0u);
  EXPECT_EQ(cuMemAddressFree(got, 2 * granularity), CUDA_SUCCESS);
  ASSERT_EQ(unsetenv("KCAP_DOUBLE_REFUSE_ADDRESS_HINTS"), 0);
}
