// A program that looks driver functions up with dlsym on a dlopen'ed libcuda
// (Triton does this for cuLaunchKernelEx; cuBLASLt for ~90 functions) and
// launches with cuLaunchKernelEx: launch attributes, kernelParams and
// `extra`, legacy and per-thread variants.
#include "driver_program.h"

#include <cudaTypedefs.h>
#include <dlfcn.h>

#include <cstddef>
#include <vector>

namespace {

void* g_driver = nullptr;

template <class Pfn>
test::Entry<Pfn> find(const char* symbol) {
  dlerror();
  void* fn = dlsym(g_driver, symbol);
  const char* error = dlerror();  // a found symbol leaves no error behind
  if (fn == nullptr || error != nullptr) {
    test::fail("dlsym(%s): %s", symbol, error ? error : "NULL without an error");
  }
  return {symbol, reinterpret_cast<Pfn>(fn)};
}

}  // namespace

int main() {
  g_driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (g_driver == nullptr) {
    test::fail("dlopen libcuda.so.1: %s", dlerror());
  }
  const auto cuInit = find<PFN_cuInit_v2000>("cuInit");
  const auto deviceGet = find<PFN_cuDeviceGet_v2000>("cuDeviceGet");
  const auto retain = find<PFN_cuDevicePrimaryCtxRetain_v7000>("cuDevicePrimaryCtxRetain");
  const auto release = find<PFN_cuDevicePrimaryCtxRelease_v11000>("cuDevicePrimaryCtxRelease_v2");
  const auto setCurrent = find<PFN_cuCtxSetCurrent_v4000>("cuCtxSetCurrent");
  const auto loadData = find<PFN_cuModuleLoadData_v2000>("cuModuleLoadData");
  const auto getFunction = find<PFN_cuModuleGetFunction_v2000>("cuModuleGetFunction");
  const auto setAttribute = find<PFN_cuFuncSetAttribute_v9000>("cuFuncSetAttribute");
  const auto unload = find<PFN_cuModuleUnload_v2000>("cuModuleUnload");
  const auto memAlloc = find<PFN_cuMemAlloc_v3020>("cuMemAlloc_v2");
  const auto memFree = find<PFN_cuMemFree_v3020>("cuMemFree_v2");
  const auto htod = find<PFN_cuMemcpyHtoD_v3020>("cuMemcpyHtoD_v2");
  const auto dtoh = find<PFN_cuMemcpyDtoH_v3020>("cuMemcpyDtoH_v2");
  const auto launchEx = find<PFN_cuLaunchKernelEx_v11060>("cuLaunchKernelEx");
  const auto launchExPtsz = find<PFN_cuLaunchKernelEx_v11060_ptsz>("cuLaunchKernelEx_ptsz");

  // Names the driver does not have, and a library that is not the driver.
  dlerror();
  CHECK(dlsym(g_driver, "cuNoSuchFunction") == nullptr && dlerror() != nullptr);
  void* libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  CHECK(libc != nullptr && dlsym(libc, "cuLaunchKernelEx") == nullptr);

  CALL(cuInit, 0);
  CUdevice device = 0;
  CALL(deviceGet, &device, 0);
  CUcontext context = nullptr;
  CALL(retain, &context, device);
  CALL(setCurrent, context);

  constexpr int kN = 300;
  std::vector<float> x(kN);
  for (int i = 0; i < kN; ++i) {
    x[static_cast<std::size_t>(i)] = static_cast<float>(i % 7);
  }
  const std::vector<float> zeros(kN, 0.0f);
  CUdeviceptr dx = 0;
  CUdeviceptr dy = 0;
  CALL(memAlloc, &dx, kN * sizeof(float));
  CALL(memAlloc, &dy, kN * sizeof(float));
  CALL(htod, dx, x.data(), kN * sizeof(float));
  CALL(htod, dy, zeros.data(), kN * sizeof(float));

  const std::string image = test::kernelImage("axpy.sm_90.cubin");
  CUmodule module = nullptr;
  CALL(loadData, &module, image.data());
  CUfunction axpy = nullptr;
  CALL(getFunction, &axpy, module, "axpy");
  CALL(setAttribute, axpy, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1);

  // Attributes as Triton sets them: cluster dimension with a scheduling
  // preference, programmatic stream serialization.
  CUlaunchAttribute attributes[3] = {};
  attributes[0].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
  attributes[0].value.clusterDim.x = 1;
  attributes[0].value.clusterDim.y = 1;
  attributes[0].value.clusterDim.z = 1;
  attributes[1].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE;
  attributes[1].value.clusterSchedulingPolicyPreference = CU_CLUSTER_SCHEDULING_POLICY_SPREAD;
  attributes[2].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
  attributes[2].value.programmaticStreamSerializationAllowed = 1;
  CUlaunchConfig config{};
  config.gridDimX = 3;
  config.gridDimY = 1;
  config.gridDimZ = 1;
  config.blockDimX = 128;
  config.blockDimY = 1;
  config.blockDimZ = 1;
  config.attrs = attributes;
  config.numAttrs = 3;

  float a = 1.0f;
  int n = kN;
  void* params[] = {&a, &dx, &dy, &n};
  CALL(launchEx, &config, axpy, params, nullptr);
  CALL(launchExPtsz, &config, axpy, params, nullptr);
  struct {
    float a;
    CUdeviceptr x;
    CUdeviceptr y;
    int n;
  } packed{1.0f, dx, dy, kN};
  std::size_t packedSize = offsetof(decltype(packed), n) + sizeof(int);  // no tail padding
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &packed, CU_LAUNCH_PARAM_BUFFER_SIZE, &packedSize,
                   CU_LAUNCH_PARAM_END};
  config.numAttrs = 0;
  config.attrs = nullptr;
  CALL(launchEx, &config, axpy, nullptr, extra);
  test::launchesMade().add("axpy", 3);

  std::vector<float> y(kN);
  CALL(dtoh, y.data(), dy, kN * sizeof(float));
  double total = 0;
  for (int i = 0; i < kN; ++i) {
    CHECK(y[static_cast<std::size_t>(i)] == 3.0f * x[static_cast<std::size_t>(i)]);
    total += y[static_cast<std::size_t>(i)];
  }
  std::printf("result axpy_total %.1f\n", total);

  CALL(unload, module);
  CALL(memFree, dx);
  CALL(memFree, dy);
  CALL(release, device);
  test::printMade();
  return 0;
}
