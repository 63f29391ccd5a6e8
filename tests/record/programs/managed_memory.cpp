// Managed memory the host writes between launches, against the driver
// double (whose device memory the host can read and write, as it can
// managed memory). x is managed, y device memory (1.0f). Each of 6 rounds:
// the host writes x[i] = (i + 7 * round) % 23 through its pointer, with no
// CUDA call, and axpy adds 2 x to y. The last line prints y's sum.
#include "driver_program.h"

#include <string>
#include <vector>

namespace {

constexpr int kN = 1024;
constexpr int kRounds = 6;

}  // namespace

int main() {
  DRIVER(cuInit, 0);
  CUdevice device = 0;
  CUcontext context = nullptr;
  DRIVER(cuDeviceGet, &device, 0);
  DRIVER(cuCtxCreate, &context, nullptr, 0, device);
  CUmodule module = nullptr;
  CUfunction axpy = nullptr;
  const std::string image = test::kernelImage("axpy.fatbin");
  DRIVER(cuModuleLoadData, &module, image.data());
  DRIVER(cuModuleGetFunction, &axpy, module, "axpy");
  CUdeviceptr x = 0, y = 0;
  DRIVER(cuMemAllocManaged, &x, kN * sizeof(float), CU_MEM_ATTACH_GLOBAL);
  DRIVER(cuMemAlloc, &y, kN * sizeof(float));
  DRIVER(cuMemsetD32, y, 0x3f800000u, kN);  // 1.0f
  CUstream stream = nullptr;
  DRIVER(cuStreamCreate, &stream, CU_STREAM_NON_BLOCKING);
  auto* host = reinterpret_cast<float*>(x);
  for (int round = 0; round < kRounds; ++round) {
    for (int i = 0; i < kN; ++i) host[i] = static_cast<float>((i + 7 * round) % 23);
    float a = 2.0f;
    int n = kN;
    void* params[] = {&a, &x, &y, &n};
    test::launchesMade().add("axpy");
    DRIVER(cuLaunchKernel, axpy, kN / 256, 1, 1, 256, 1, 1, 0, stream, params, nullptr);
    DRIVER(cuStreamSynchronize, stream);  // the host writes x next
  }
  std::vector<float> values(kN);
  DRIVER(cuMemcpyDtoH, values.data(), y, kN * sizeof(float));
  double sum = 0;
  for (const float v : values) sum += v;
  std::printf("result managed_sum %.1f\n", sum);
  return 0;
}
