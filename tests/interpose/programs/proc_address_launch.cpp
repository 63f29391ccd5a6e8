// A program that reaches the driver the way cudart does: it does not link
// libcuda, dlopens it, dlsyms only "cuGetProcAddress_v2", asks that for
// "cuGetProcAddress" itself and resolves everything else through the answer,
// as (name, CUDA version, flags). Launches go through cuLaunchKernel at 4000
// (legacy stream) and at 7000 with the per-thread flag (the _ptsz variant),
// and through the CUDA 11.3 form of cuGetProcAddress. Code is loaded both as
// a module and as a library (cudart's lazy loading: cuLibraryLoadData,
// cuLibraryGetKernel, launch of the CUkernel cast to CUfunction).
#include "driver_program.h"

#include <cudaTypedefs.h>
#include <dlfcn.h>

#include <vector>

namespace {

constexpr int kCudaVersion = 13000;  // what a CUDA 13 cudart asks for
constexpr int kN = 512;

PFN_cuGetProcAddress_v12000 g_lookup = nullptr;

// Resolves `api` through the program's cuGetProcAddress; `symbol` is the
// exported function the lookup stands for (what the shim counts it as).
template <class Pfn>
test::Entry<Pfn> resolve(const char* api, const char* symbol, int version = kCudaVersion,
                         cuuint64_t flags = CU_GET_PROC_ADDRESS_DEFAULT) {
  void* fn = nullptr;
  CUdriverProcAddressQueryResult status{};
  test::callsMade().add("cuGetProcAddress_v2");
  if (g_lookup(api, &fn, version, flags, &status) != CUDA_SUCCESS || fn == nullptr ||
      status != CU_GET_PROC_ADDRESS_SUCCESS) {
    test::fail("cuGetProcAddress(%s, %d, %llu) failed", api, version, static_cast<unsigned long long>(flags));
  }
  return {symbol, reinterpret_cast<Pfn>(fn)};
}

}  // namespace

int main() {
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (driver == nullptr) {
    test::fail("dlopen libcuda.so.1: %s", dlerror());
  }
  const auto bootstrap = reinterpret_cast<PFN_cuGetProcAddress_v12000>(dlsym(driver, "cuGetProcAddress_v2"));
  CHECK(bootstrap != nullptr);

  // cudart's first lookup: cuGetProcAddress itself, at both of its ABIs.
  void* fn = nullptr;
  CUdriverProcAddressQueryResult status{};
  test::callsMade().add("cuGetProcAddress_v2");
  CHECK(bootstrap("cuGetProcAddress", &fn, 12000, 0, &status) == CUDA_SUCCESS);
  g_lookup = reinterpret_cast<PFN_cuGetProcAddress_v12000>(fn);
  const auto lookupV1 = resolve<PFN_cuGetProcAddress_v11030>("cuGetProcAddress", "cuGetProcAddress", 11030);

  const auto cuInit = resolve<PFN_cuInit_v2000>("cuInit", "cuInit");
  const auto deviceGet = resolve<PFN_cuDeviceGet_v2000>("cuDeviceGet", "cuDeviceGet");
  const auto retain =
      resolve<PFN_cuDevicePrimaryCtxRetain_v7000>("cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRetain");
  const auto release =
      resolve<PFN_cuDevicePrimaryCtxRelease_v11000>("cuDevicePrimaryCtxRelease", "cuDevicePrimaryCtxRelease_v2");
  const auto setCurrent = resolve<PFN_cuCtxSetCurrent_v4000>("cuCtxSetCurrent", "cuCtxSetCurrent");
  const auto loadData = resolve<PFN_cuModuleLoadData_v2000>("cuModuleLoadData", "cuModuleLoadData");
  const auto getFunction = resolve<PFN_cuModuleGetFunction_v2000>("cuModuleGetFunction", "cuModuleGetFunction");
  const auto unload = resolve<PFN_cuModuleUnload_v2000>("cuModuleUnload", "cuModuleUnload");
  const auto memAlloc = resolve<PFN_cuMemAlloc_v3020>("cuMemAlloc", "cuMemAlloc_v2");
  const auto memFree = resolve<PFN_cuMemFree_v3020>("cuMemFree", "cuMemFree_v2");
  const auto htod = resolve<PFN_cuMemcpyHtoD_v3020>("cuMemcpyHtoD", "cuMemcpyHtoD_v2");
  const auto htodPtds = resolve<PFN_cuMemcpyHtoD_v7000_ptds>("cuMemcpyHtoD", "cuMemcpyHtoD_v2_ptds", kCudaVersion,
                                                             CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
  const auto dtoh = resolve<PFN_cuMemcpyDtoH_v3020>("cuMemcpyDtoH", "cuMemcpyDtoH_v2");
  const auto libraryLoad = resolve<PFN_cuLibraryLoadData_v12000>("cuLibraryLoadData", "cuLibraryLoadData");
  const auto libraryKernel = resolve<PFN_cuLibraryGetKernel_v12000>("cuLibraryGetKernel", "cuLibraryGetKernel");
  const auto kernelCount =
      resolve<PFN_cuLibraryGetKernelCount_v12040>("cuLibraryGetKernelCount", "cuLibraryGetKernelCount");
  const auto enumerate =
      resolve<PFN_cuLibraryEnumerateKernels_v12040>("cuLibraryEnumerateKernels", "cuLibraryEnumerateKernels");
  const auto kernelFunction = resolve<PFN_cuKernelGetFunction_v12000>("cuKernelGetFunction", "cuKernelGetFunction");
  const auto libraryUnload = resolve<PFN_cuLibraryUnload_v12000>("cuLibraryUnload", "cuLibraryUnload");
  // A module-loading API asked with the per-thread flag: it has no such
  // variant, so the answer is the ordinary function.
  const auto loadDataPt = resolve<PFN_cuModuleLoadData_v2000>("cuModuleLoadData", "cuModuleLoadData", kCudaVersion,
                                                              CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
  CHECK_DOUBLE(loadDataPt.fn == loadData.fn);

  const auto launch = resolve<PFN_cuLaunchKernel_v4000>("cuLaunchKernel", "cuLaunchKernel", 4000);
  const auto launchPtsz = resolve<PFN_cuLaunchKernel_v7000_ptsz>("cuLaunchKernel", "cuLaunchKernel_ptsz", 7000,
                                                                 CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
  const auto launchNewest = resolve<PFN_cuLaunchKernel_v4000>("cuLaunchKernel", "cuLaunchKernel");
  CHECK(launch.fn != reinterpret_cast<PFN_cuLaunchKernel_v4000>(launchPtsz.fn));
  CHECK_DOUBLE(launch.fn == launchNewest.fn);

  void* raw = nullptr;
  test::callsMade().add("cuGetProcAddress");
  CHECK(lookupV1.fn("cuLaunchKernel", &raw, 11030, CU_GET_PROC_ADDRESS_LEGACY_STREAM) == CUDA_SUCCESS);
  const test::Entry<PFN_cuLaunchKernel_v4000> launchV1{"cuLaunchKernel",
                                                       reinterpret_cast<PFN_cuLaunchKernel_v4000>(raw)};
  CHECK_DOUBLE(launchV1.fn == launch.fn);

  // Lookups of a hooked and an unhooked name agree with dlsym on the driver.
  CHECK_DOUBLE(reinterpret_cast<void*>(launch.fn) == dlsym(driver, "cuLaunchKernel"));
  CHECK_DOUBLE(reinterpret_cast<void*>(launchPtsz.fn) == dlsym(driver, "cuLaunchKernel_ptsz"));
  const auto version = resolve<PFN_cuDriverGetVersion_v2020>("cuDriverGetVersion", "cuDriverGetVersion");
  CHECK_DOUBLE(reinterpret_cast<void*>(version.fn) == dlsym(driver, "cuDriverGetVersion"));

  // Failed lookups fail the same way with and without the shim, and as an
  // H200's driver (580) does: the CUDA 12 form returns CUDA_SUCCESS with
  // NULL and the reason in the status, the CUDA 11.3 form an error.
  test::callsMade().add("cuGetProcAddress_v2");
  raw = &raw;
  CHECK(g_lookup("cuNoSuchFunction", &raw, kCudaVersion, 0, &status) == CUDA_SUCCESS);
  CHECK(raw == nullptr && status == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
  test::callsMade().add("cuGetProcAddress_v2");
  raw = &raw;
  CHECK(g_lookup("cuLibraryLoadData", &raw, 11080, 0, &status) == CUDA_SUCCESS);
  CHECK(raw == nullptr && status == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
  test::callsMade().add("cuGetProcAddress_v2");
  CHECK(g_lookup("cuLaunchKernel", &raw, 6000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &status) == CUDA_SUCCESS);
  CHECK(raw == nullptr && status == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
  test::callsMade().add("cuGetProcAddress");
  raw = &raw;
  CHECK(lookupV1.fn("cuNoSuchFunction", &raw, kCudaVersion, 0) == CUDA_ERROR_NOT_FOUND && raw == &raw);

  CALL(cuInit, 0);
  CUdevice device = 0;
  CALL(deviceGet, &device, 0);
  CUcontext context = nullptr;
  CALL(retain, &context, device);
  CALL(setCurrent, context);

  std::vector<float> x(kN, 1.0f);
  std::vector<float> y(kN, 0.0f);
  CUdeviceptr dx = 0;
  CUdeviceptr dy = 0;
  CALL(memAlloc, &dx, kN * sizeof(float));
  CALL(memAlloc, &dy, kN * sizeof(float));
  CALL(htod, dx, x.data(), kN * sizeof(float));
  CALL(htodPtds, dy, y.data(), kN * sizeof(float));

  // Module path: three launch entry points, each adds x to y once.
  const std::string axpyImage = test::kernelImage("axpy.fatbin");
  CUmodule module = nullptr;
  CALL(loadData, &module, axpyImage.data());
  CUfunction axpy = nullptr;
  CALL(getFunction, &axpy, module, "axpy");
  float a = 1.0f;
  int n = kN;
  void* params[] = {&a, &dx, &dy, &n};
  CALL(launch, axpy, 2, 1, 1, 256, 1, 1, 0, nullptr, params, nullptr);
  CALL(launchPtsz, axpy, 2, 1, 1, 256, 1, 1, 0, nullptr, params, nullptr);
  CALL(launchV1, axpy, 2, 1, 1, 256, 1, 1, 0, nullptr, params, nullptr);
  CALL(launchNewest, axpy, 2, 1, 1, 256, 1, 1, 0, nullptr, params, nullptr);
  test::launchesMade().add("axpy", 4);
  CALL(dtoh, y.data(), dy, kN * sizeof(float));
  for (const float v : y) {
    CHECK(v == 4.0f);
  }
  std::printf("result axpy %.1f\n", static_cast<double>(y[0]));

  // Library path, as cudart's lazy loading: launch the CUkernel itself,
  // then the CUfunction cuKernelGetFunction gives for it.
  const std::string reduceImage = test::kernelImage("reduce.fatbin");
  CUlibrary reduceLibrary = nullptr;
  CALL(libraryLoad, &reduceLibrary, reduceImage.data(), nullptr, nullptr, 0, nullptr, nullptr, 0);
  CUkernel reduce = nullptr;
  CALL(libraryKernel, &reduce, reduceLibrary, "reduce_sum");
  CUdeviceptr sum = 0;
  CALL(memAlloc, &sum, sizeof(float));
  const float zero = 0.0f;
  CALL(htod, sum, &zero, sizeof zero);
  unsigned count = kN;
  void* reduceParams[] = {&dx, &sum, &count};
  CALL(launch, reinterpret_cast<CUfunction>(reduce), 2, 1, 1, 256, 1, 1, 0, nullptr, reduceParams, nullptr);
  CUfunction reduceFunction = nullptr;
  CALL(kernelFunction, &reduceFunction, reduce);
  CALL(launchPtsz, reduceFunction, 1, 1, 1, 256, 1, 1, 0, nullptr, reduceParams, nullptr);
  test::launchesMade().add("reduce_sum", 2);
  float reduced = 0.0f;
  CALL(dtoh, &reduced, sum, sizeof reduced);
  CHECK(reduced == 2.0f * kN);
  std::printf("result reduce_sum %.1f\n", static_cast<double>(reduced));

  // A kernel handle the shim never saw made (cuLibraryEnumerateKernels is
  // not hooked): it still has to be named.
  const std::string scaleImage = test::kernelImage("struct_param.fatbin");
  CUlibrary scaleLibrary = nullptr;
  CALL(libraryLoad, &scaleLibrary, scaleImage.data(), nullptr, nullptr, 0, nullptr, nullptr, 0);
  unsigned kernels = 0;
  CALL(kernelCount, &kernels, scaleLibrary);
  CHECK(kernels == 1);
  CUkernel scale = nullptr;
  CALL(enumerate, &scale, 1, scaleLibrary);
  struct {
    const float* src;
    float* dst;
    float scale;
    int n;
    long long stride;
  } args{reinterpret_cast<const float*>(dx), reinterpret_cast<float*>(dy), 3.0f, kN, 1};
  void* scaleParams[] = {&args};
  CALL(launch, reinterpret_cast<CUfunction>(scale), 1, 1, 1, 64, 1, 1, 0, nullptr, scaleParams, nullptr);
  test::launchesMade().add("scale_struct");
  CALL(dtoh, y.data(), dy, kN * sizeof(float));
  CHECK(y[kN - 1] == 3.0f);
  std::printf("result scale_struct %.1f\n", static_cast<double>(y[kN - 1]));

  CALL(libraryUnload, scaleLibrary);
  CALL(libraryUnload, reduceLibrary);
  CALL(unload, module);
  for (const CUdeviceptr p : {dx, dy, sum}) {
    CALL(memFree, p);
  }
  CALL(release, device);
  test::printMade();
  return 0;
}
