// One process driving two devices, against the driver double with two
// devices (KCAP_DOUBLE_DEVICES=2), each with its own context, x and y = 1.
// Each round: on device 0, axpy adds 2 x0 to y0; then, with device 1's
// context current, axpy adds 2 x1 to y1 and a peer copy moves y1 into x0
// (device 1 to device 0), so that device 0's next launch reads what
// device 1's work made. The current context changes with every launch, so
// checkpoints fall due under either. The last line prints both sums.
#include "driver_program.h"

#include <string>
#include <vector>

namespace {

constexpr int kN = 1024;
constexpr int kRounds = 6;
constexpr std::size_t kBytes = kN * sizeof(float);

// One device's share.
struct Device {
  CUcontext context = nullptr;
  CUfunction axpy = nullptr;
  CUdeviceptr x = 0, y = 0;
};

Device open(int ordinal, float x) {
  Device d;
  CUdevice device = 0;
  DRIVER(cuDeviceGet, &device, ordinal);
  DRIVER(cuCtxCreate, &d.context, nullptr, 0, device);
  CUmodule module = nullptr;
  const std::string image = test::kernelImage("axpy.fatbin");
  DRIVER(cuModuleLoadData, &module, image.data());
  DRIVER(cuModuleGetFunction, &d.axpy, module, "axpy");
  const std::vector<float> xs(kN, x), ones(kN, 1.0f);
  DRIVER(cuMemAlloc, &d.x, kBytes);
  DRIVER(cuMemAlloc, &d.y, kBytes);
  DRIVER(cuMemcpyHtoD, d.x, xs.data(), kBytes);
  DRIVER(cuMemcpyHtoD, d.y, ones.data(), kBytes);
  return d;
}

void axpy(Device& d) {
  DRIVER(cuCtxSetCurrent, d.context);
  float a = 2.0f;
  int n = kN;
  void* params[] = {&a, &d.x, &d.y, &n};
  test::launchesMade().add("axpy");
  DRIVER(cuLaunchKernel, d.axpy, kN / 256, 1, 1, 256, 1, 1, 0, nullptr, params, nullptr);
}

double sum(const Device& d) {
  DRIVER(cuCtxSetCurrent, d.context);
  return test::deviceSum(d.y, kN);
}

}  // namespace

int main() {
  DRIVER(cuInit, 0);
  Device d0 = open(0, 0.5f);
  Device d1 = open(1, 0.25f);
  for (int round = 0; round < kRounds; ++round) {
    axpy(d0);
    axpy(d1);
    DRIVER(cuMemcpyPeer, d0.x, d0.context, d1.y, d1.context, kBytes);
  }
  std::printf("result two_device_work %.1f %.1f\n", sum(d0), sum(d1));
  test::printMade();
  return 0;
}
