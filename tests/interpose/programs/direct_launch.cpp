// A driver-API program linked against libcuda: every call binds to an
// exported symbol, so the shim must export them. Built twice: as is, and with
// CUDA_API_PER_THREAD_DEFAULT_STREAM (what nvcc --default-stream per-thread
// does), which binds the same calls to the _ptsz / _ptds symbols.
//
// Loads each kernel image of kernels/ through a different API (fatbin from
// memory, cubin from a file, PTX with options, fatbin through
// cuModuleLoadFatBinary), launches with kernelParams and with `extra`, and
// checks the results.
#include "driver_program.h"

#include <dlfcn.h>

#include <cstddef>
#include <vector>

namespace {

constexpr int kN = 1000;

struct ScaleArgs {  // kernels/struct_param.cu
  const float* src;
  float* dst;
  float scale;
  int n;
  long long stride;
};

CUdeviceptr upload(const std::vector<float>& values) {
  CUdeviceptr device = 0;
  DRIVER(cuMemAlloc, &device, values.size() * sizeof(float));
  DRIVER(cuMemcpyHtoD, device, values.data(), values.size() * sizeof(float));
  return device;
}

std::vector<float> download(CUdeviceptr device, std::size_t count) {
  std::vector<float> values(count);
  DRIVER(cuMemcpyDtoH, values.data(), device, count * sizeof(float));
  return values;
}

}  // namespace

int main() {
  DRIVER(cuInit, 0);
  CUdevice device = 0;
  DRIVER(cuDeviceGet, &device, 0);
  CUcontext context = nullptr;
  DRIVER(cuDevicePrimaryCtxRetain, &context, device);
  DRIVER(cuCtxSetCurrent, context);

  std::vector<float> x(kN);
  std::vector<float> y(kN);
  for (int i = 0; i < kN; ++i) {
    x[static_cast<std::size_t>(i)] = static_cast<float>(i);
    y[static_cast<std::size_t>(i)] = static_cast<float>(2 * i);
  }
  const CUdeviceptr dx = upload(x);
  const CUdeviceptr dy = upload(y);

  // axpy, fatbin from memory: once with kernelParams, once with `extra`.
  const std::string axpyImage = test::kernelImage("axpy.fatbin");
  CUmodule axpyModule = nullptr;
  DRIVER(cuModuleLoadData, &axpyModule, axpyImage.data());
  CUfunction axpy = nullptr;
  DRIVER(cuModuleGetFunction, &axpy, axpyModule, "axpy");
  DRIVER(cuFuncSetAttribute, axpy, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 0);
  float a = 2.0f;
  int n = kN;
  void* axpyParams[] = {&a, const_cast<CUdeviceptr*>(&dx), const_cast<CUdeviceptr*>(&dy), &n};
  const unsigned blocks = (kN + 255) / 256;
  DRIVER(cuLaunchKernel, axpy, blocks, 1, 1, 256, 1, 1, 0, nullptr, axpyParams, nullptr);
  test::launchesMade().add("axpy");

  struct {
    float a;
    const float* x;
    float* y;
    int n;
  } packed{2.0f, reinterpret_cast<const float*>(dx), reinterpret_cast<float*>(dy), kN};
  static_assert(offsetof(decltype(packed), y) == 16 && offsetof(decltype(packed), n) == 24);
  // The kernel's parameter size, not the struct's: the driver rejects a
  // buffer with tail padding (error 701 on an H200, driver 580).
  std::size_t packedSize = offsetof(decltype(packed), n) + sizeof(int);
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &packed, CU_LAUNCH_PARAM_BUFFER_SIZE, &packedSize,
                   CU_LAUNCH_PARAM_END};
  DRIVER(cuLaunchKernel, axpy, blocks, 1, 1, 256, 1, 1, 0, nullptr, nullptr, extra);
  test::launchesMade().add("axpy");

  // The same function through the global scope, as a plugin would find it.
  using LaunchKernel = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                    CUstream, void**, void**);
  const auto found = reinterpret_cast<LaunchKernel>(dlsym(RTLD_DEFAULT, TEST_STR(cuLaunchKernel)));
  CHECK(found == &cuLaunchKernel);
  const test::Entry<LaunchKernel> globalLaunch{TEST_STR(cuLaunchKernel), found};
  CALL(globalLaunch, axpy, blocks, 1, 1, 256, 1, 1, 0, nullptr, axpyParams, nullptr);
  test::launchesMade().add("axpy");

  const std::vector<float> axpyOut = download(dy, kN);
  double axpySum = 0;
  for (int i = 0; i < kN; ++i) {
    CHECK(axpyOut[static_cast<std::size_t>(i)] == static_cast<float>(8 * i));
    axpySum += axpyOut[static_cast<std::size_t>(i)];
  }
  std::printf("result axpy_sum %.1f\n", axpySum);

  // reduce_sum, cubin from a file, into a zeroed output.
  CUmodule reduceModule = nullptr;
  DRIVER(cuModuleLoad, &reduceModule, test::kernelPath("reduce.sm_90.cubin").c_str());
  CUfunction reduce = nullptr;
  DRIVER(cuModuleGetFunction, &reduce, reduceModule, "reduce_sum");
  CUdeviceptr sum = 0;
  DRIVER(cuMemAlloc, &sum, sizeof(float));
  DRIVER(cuMemsetD32, sum, 0, 1);
  unsigned count = kN;
  void* reduceParams[] = {const_cast<CUdeviceptr*>(&dx), &sum, &count};
  DRIVER(cuLaunchKernel, reduce, 4, 1, 1, 256, 1, 1, 0, nullptr, reduceParams, nullptr);
  test::launchesMade().add("reduce_sum");
  const float reduced = download(sum, 1)[0];
  const int expectedSum = kN * (kN - 1) / 2;
  CHECK(reduced == static_cast<float>(expectedSum));
  std::printf("result reduce_sum %.1f\n", static_cast<double>(reduced));

  // scale_struct, PTX with (no) JIT options, a by-value struct parameter,
  // on a stream, into a buffer cleared with cuMemsetD8.
  const std::string ptx = test::kernelImage("struct_param.ptx");
  CUmodule scaleModule = nullptr;
  DRIVER(cuModuleLoadDataEx, &scaleModule, ptx.c_str(), 0, nullptr, nullptr);
  CUfunction scale = nullptr;
  DRIVER(cuModuleGetFunction, &scale, scaleModule, "scale_struct");
  CUdeviceptr dz = 0;
  DRIVER(cuMemAlloc, &dz, kN * sizeof(float));
  DRIVER(cuMemsetD8, dz, 0, kN * sizeof(float));
  CUstream stream = nullptr;
  DRIVER(cuStreamCreate, &stream, CU_STREAM_NON_BLOCKING);
  ScaleArgs args{reinterpret_cast<const float*>(dx), reinterpret_cast<float*>(dz), 0.5f, kN / 2, 2};
  void* scaleParams[] = {&args};
  DRIVER(cuLaunchKernel, scale, 2, 1, 1, 128, 1, 1, 0, stream, scaleParams, nullptr);
  test::launchesMade().add("scale_struct");
  DRIVER(cuStreamSynchronize, stream);
  const std::vector<float> scaled = download(dz, kN);
  for (int i = 0; i < kN; ++i) {
    const float want = i % 2 == 0 ? static_cast<float>(i) * 0.5f : 0.0f;
    CHECK(scaled[static_cast<std::size_t>(i)] == want);
  }
  std::printf("result scale_struct_last %.1f\n", static_cast<double>(scaled[kN - 2]));

  // poly_eval, fatbin through cuModuleLoadFatBinary, reading __constant__
  // coeffs and counting blocks in __device__ call_count.
  const std::string polyImage = test::kernelImage("constant.fatbin");
  CUmodule polyModule = nullptr;
  DRIVER(cuModuleLoadFatBinary, &polyModule, polyImage.data());
  CUfunction poly = nullptr;
  DRIVER(cuModuleGetFunction, &poly, polyModule, "poly_eval");
  CUdeviceptr coeffs = 0;
  std::size_t coeffsSize = 0;
  DRIVER(cuModuleGetGlobal, &coeffs, &coeffsSize, polyModule, "coeffs");
  CHECK(coeffsSize == 16 * sizeof(float));
  float c[16] = {1.0f, 2.0f};  // y = 1 + 2x
  DRIVER(cuMemcpyHtoDAsync, coeffs, c, sizeof c, stream);
  DRIVER(cuStreamSynchronize, stream);
  CUdeviceptr dw = 0;
  DRIVER(cuMemAlloc, &dw, kN * sizeof(float));
  void* polyParams[] = {const_cast<CUdeviceptr*>(&dx), &dw, &n};
  DRIVER(cuLaunchKernel, poly, blocks, 1, 1, 256, 1, 1, 0, nullptr, polyParams, nullptr);
  test::launchesMade().add("poly_eval");
  const std::vector<float> polyOut = download(dw, kN);
  for (int i = 0; i < kN; ++i) {
    CHECK(polyOut[static_cast<std::size_t>(i)] == 1.0f + 2.0f * static_cast<float>(i));
  }
  CUdeviceptr callCount = 0;
  DRIVER(cuModuleGetGlobal, &callCount, nullptr, polyModule, "call_count");
  int calls = 0;
  DRIVER(cuMemcpyDtoH, &calls, callCount, sizeof calls);
  CHECK(calls == static_cast<int>(blocks));
  std::printf("result poly_eval_call_count %d\n", calls);

  // Device-to-device copy, then release everything.
  DRIVER(cuMemcpyDtoD, dz, dw, kN * sizeof(float));
  CHECK(download(dz, kN) == polyOut);
  DRIVER(cuStreamDestroy, stream);
  for (const CUdeviceptr p : {dx, dy, dz, dw, sum}) {
    DRIVER(cuMemFree, p);
  }
  for (CUmodule m : {axpyModule, reduceModule, scaleModule, polyModule}) {
    DRIVER(cuModuleUnload, m);
  }
  DRIVER(cuDevicePrimaryCtxRelease, device);
  test::printMade();
  return 0;
}
