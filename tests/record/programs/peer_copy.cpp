// Copies from another device's memory, against the driver double with two
// devices (KCAP_DOUBLE_DEVICES=2). Device 1's buffer s is filled before the
// first launch (so before checkpoint mode's first checkpoint, which holds
// device 0's memory only); then, on device 0, each round copies s into x
// (cuMemcpyPeer, cuMemcpyPeerAsync on a stream, and a unified cuMemcpyDtoD
// between the two devices, in turn) and axpy adds 2 x to y. Then two more
// rounds copy rows: a unified 2D copy from device 1 (16 rows of 32 floats,
// both pitches 64 floats) and a cuMemcpy3DPeer (4 slices of 4 rows of 16
// floats, the same pitches). The last line prints y's sum.
#include "driver_program.h"

#include <string>
#include <vector>

namespace {

constexpr int kN = 1024;
constexpr int kRounds = 6;
constexpr std::size_t kBytes = kN * sizeof(float);

}  // namespace

int main() {
  DRIVER(cuInit, 0);
  CUdevice device0 = 0, device1 = 0;
  DRIVER(cuDeviceGet, &device0, 0);
  DRIVER(cuDeviceGet, &device1, 1);
  CUcontext context0 = nullptr, context1 = nullptr;
  DRIVER(cuCtxCreate, &context1, nullptr, 0, device1);
  CUdeviceptr s = 0;
  DRIVER(cuMemAlloc, &s, kBytes);
  std::vector<float> values(kN);
  for (int i = 0; i < kN; ++i) values[static_cast<std::size_t>(i)] = static_cast<float>(i % 37);
  DRIVER(cuMemcpyHtoD, s, values.data(), kBytes);

  DRIVER(cuCtxCreate, &context0, nullptr, 0, device0);
  CUmodule module = nullptr;
  CUfunction axpy = nullptr;
  const std::string image = test::kernelImage("axpy.fatbin");
  DRIVER(cuModuleLoadData, &module, image.data());
  DRIVER(cuModuleGetFunction, &axpy, module, "axpy");
  CUdeviceptr x = 0, y = 0;
  DRIVER(cuMemAlloc, &x, kBytes);
  DRIVER(cuMemAlloc, &y, kBytes);
  DRIVER(cuMemsetD32, y, 0x3f800000u, kN);  // 1.0f
  CUstream stream = nullptr;
  DRIVER(cuStreamCreate, &stream, CU_STREAM_NON_BLOCKING);

  for (int round = 0; round < kRounds; ++round) {
    DRIVER(cuMemsetD32, x, 0, kN);
    switch (round % 3) {
      case 0:
        DRIVER(cuMemcpyPeer, x, context0, s, context1, kBytes);
        break;
      case 1:
        DRIVER(cuMemcpyPeerAsync, x, context0, s, context1, kBytes, stream);
        DRIVER(cuStreamSynchronize, stream);
        break;
      default:
        DRIVER(cuMemcpyDtoD, x, s, kBytes);  // unified addressing: device 1 to device 0
        break;
    }
    float a = 2.0f;
    int n = kN;
    void* params[] = {&a, &x, &y, &n};
    test::launchesMade().add("axpy");
    DRIVER(cuLaunchKernel, axpy, kN / 256, 1, 1, 256, 1, 1, 0, nullptr, params, nullptr);
  }
  const auto launchAxpy = [&] {
    float a = 2.0f;
    int n = kN;
    void* params[] = {&a, &x, &y, &n};
    test::launchesMade().add("axpy");
    DRIVER(cuLaunchKernel, axpy, kN / 256, 1, 1, 256, 1, 1, 0, nullptr, params, nullptr);
  };
  constexpr std::size_t kPitch = 64 * sizeof(float);
  DRIVER(cuMemsetD32, x, 0, kN);
  CUDA_MEMCPY2D rows{};
  rows.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  rows.srcDevice = s;
  rows.srcPitch = kPitch;
  rows.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  rows.dstDevice = x;
  rows.dstPitch = kPitch;
  rows.WidthInBytes = 32 * sizeof(float);
  rows.Height = 16;
  DRIVER(cuMemcpy2D, &rows);
  launchAxpy();
  DRIVER(cuMemsetD32, x, 0, kN);
  CUDA_MEMCPY3D_PEER volume{};
  volume.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  volume.srcDevice = s;
  volume.srcContext = context1;
  volume.srcPitch = kPitch;
  volume.srcHeight = 4;
  volume.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  volume.dstDevice = x;
  volume.dstContext = context0;
  volume.dstPitch = kPitch;
  volume.dstHeight = 4;
  volume.WidthInBytes = 16 * sizeof(float);
  volume.Height = 4;
  volume.Depth = 4;
  DRIVER(cuMemcpy3DPeer, &volume);
  launchAxpy();

  std::vector<float> result(kN);
  DRIVER(cuMemcpyDtoH, result.data(), y, kBytes);
  double sum = 0;
  for (const float value : result) sum += value;
  std::printf("result peer_y_sum %.1f\n", sum);
  // x and y stay allocated: the checkpoint taken at exit holds them.
  test::printMade();
  return 0;
}
