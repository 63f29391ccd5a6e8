// A non-PIE program that takes the address of cuLaunchKernel: the loader
// then makes the program's own PLT stub the canonical address of the symbol,
// and every library that takes the address through the global scope gets
// that stub, including a driver that looks up its own exports that way (the
// driver double built without -Bsymbolic). Its cuGetProcAddress then answers
// with the stub, which leads back into the shim; the shim must not mistake it
// for the driver's function (it would call itself forever).
#include "driver_program.h"

#include <cudaTypedefs.h>
#include <dlfcn.h>

#include <vector>

PFN_cuLaunchKernel_v4000 volatile g_addressTaken = nullptr;

int main() {
  // Taken in code, not in a data initializer: position-dependent code
  // holds the address as an immediate, which only a canonical PLT stub can
  // satisfy.
  g_addressTaken = &cuLaunchKernel;
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  CHECK(driver != nullptr);
  const auto lookup = reinterpret_cast<PFN_cuGetProcAddress_v12000>(dlsym(driver, "cuGetProcAddress_v2"));
  CHECK(lookup != nullptr);
  void* fn = nullptr;
  CUdriverProcAddressQueryResult status{};
  test::callsMade().add("cuGetProcAddress_v2");
  CHECK(lookup("cuLaunchKernel", &fn, 13000, 0, &status) == CUDA_SUCCESS);
  const test::Entry<PFN_cuLaunchKernel_v4000> lookedUp{"cuLaunchKernel",
                                                       reinterpret_cast<PFN_cuLaunchKernel_v4000>(fn)};
  const test::Entry<PFN_cuLaunchKernel_v4000> linked{"cuLaunchKernel", g_addressTaken};

  DRIVER(cuInit, 0);
  CUcontext context = nullptr;
  DRIVER(cuDevicePrimaryCtxRetain, &context, 0);
  DRIVER(cuCtxSetCurrent, context);
  const std::string image = test::kernelImage("axpy.fatbin");
  CUmodule module = nullptr;
  DRIVER(cuModuleLoadData, &module, image.data());
  CUfunction axpy = nullptr;
  DRIVER(cuModuleGetFunction, &axpy, module, "axpy");

  constexpr int kN = 64;
  const std::vector<float> ones(kN, 1.0f);
  CUdeviceptr x = 0;
  CUdeviceptr y = 0;
  DRIVER(cuMemAlloc, &x, kN * sizeof(float));
  DRIVER(cuMemAlloc, &y, kN * sizeof(float));
  DRIVER(cuMemcpyHtoD, x, ones.data(), kN * sizeof(float));
  DRIVER(cuMemcpyHtoD, y, ones.data(), kN * sizeof(float));
  float a = 1.0f;
  int n = kN;
  void* params[] = {&a, &x, &y, &n};
  CALL(lookedUp, axpy, 1, 1, 1, kN, 1, 1, 0, nullptr, params, nullptr);
  CALL(linked, axpy, 1, 1, 1, kN, 1, 1, 0, nullptr, params, nullptr);
  test::launchesMade().add("axpy", 2);

  std::vector<float> out(kN);
  DRIVER(cuMemcpyDtoH, out.data(), y, kN * sizeof(float));
  for (const float v : out) {
    CHECK(v == 3.0f);
  }
  std::printf("result axpy %.1f\n", static_cast<double>(out[0]));
  DRIVER(cuMemFree, x);
  DRIVER(cuMemFree, y);
  DRIVER(cuModuleUnload, module);
  DRIVER(cuDevicePrimaryCtxRelease, 0);
  test::printMade();
  return 0;
}
