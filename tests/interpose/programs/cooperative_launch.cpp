// Cooperative launches, linked against libcuda: cuLaunchCooperativeKernel and
// cuLaunchKernelEx with the cooperative attribute, plus one launch the driver
// refuses (grid too large), whose error the shim must return unchanged.
// Built twice, like direct_launch (legacy and per-thread default stream).
#include "driver_program.h"

#include <vector>

int main() {
  DRIVER(cuInit, 0);
  CUdevice device = 0;
  DRIVER(cuDeviceGet, &device, 0);
  CUcontext context = nullptr;
  DRIVER(cuDevicePrimaryCtxRetain, &context, device);
  DRIVER(cuCtxSetCurrent, context);
  int sms = 0;
  DRIVER(cuDeviceGetAttribute, &sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device);
  int cooperative = 0;
  DRIVER(cuDeviceGetAttribute, &cooperative, CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH, device);
  CHECK(cooperative == 1);

  const std::string image = test::kernelImage("reduce.fatbin");
  CUmodule module = nullptr;
  DRIVER(cuModuleLoadData, &module, image.data());
  CUfunction reduce = nullptr;
  DRIVER(cuModuleGetFunction, &reduce, module, "reduce_sum");

  constexpr unsigned kN = 4096;
  const std::vector<float> ones(kN, 1.0f);
  CUdeviceptr in = 0;
  CUdeviceptr out = 0;
  DRIVER(cuMemAlloc, &in, kN * sizeof(float));
  DRIVER(cuMemAlloc, &out, sizeof(float));
  DRIVER(cuMemcpyHtoD, in, ones.data(), kN * sizeof(float));
  DRIVER(cuMemsetD32, out, 0, 1);

  unsigned n = kN;
  void* params[] = {&in, &out, &n};
  DRIVER(cuLaunchCooperativeKernel, reduce, 8, 1, 1, 256, 1, 1, 0, nullptr, params);
  DRIVER(cuLaunchCooperativeKernel, reduce, 2, 1, 1, 256, 1, 1, 0, nullptr, params);

  CUlaunchAttribute attribute{};
  attribute.id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
  attribute.value.cooperative = 1;
  CUlaunchConfig config{};
  config.gridDimX = 4;
  config.gridDimY = 1;
  config.gridDimZ = 1;
  config.blockDimX = 256;
  config.blockDimY = 1;
  config.blockDimZ = 1;
  config.attrs = &attribute;
  config.numAttrs = 1;
  DRIVER(cuLaunchKernelEx, &config, reduce, params, nullptr);
  test::launchesMade().add("reduce_sum", 3);

  // More blocks than can be co-resident: refused, and nothing runs.
  const unsigned tooMany = static_cast<unsigned>(sms) * 64;
  test::callsMade().add(TEST_STR(cuLaunchCooperativeKernel));
  test::launchesMade().add("reduce_sum");
  const CUresult refused = cuLaunchCooperativeKernel(reduce, tooMany, 1, 1, 256, 1, 1, 0, nullptr, params);
  CHECK(refused == CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE);
  std::printf("result refused %d\n", static_cast<int>(refused));

  float total = 0.0f;
  DRIVER(cuMemcpyDtoH, &total, out, sizeof total);
  CHECK(total == 3.0f * kN);
  std::printf("result reduce_sum %.1f\n", static_cast<double>(total));

  DRIVER(cuMemFree, in);
  DRIVER(cuMemFree, out);
  DRIVER(cuModuleUnload, module);
  DRIVER(cuDevicePrimaryCtxRelease, device);
  test::printMade();
  return 0;
}
