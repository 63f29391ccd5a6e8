// 16 threads x 4 streams x 1000 launches, all threads started at once, the
// streams of a thread interleaved: the shim has to count every launch exactly
// once and must not deadlock (the runner kills the program after a timeout).
#include "driver_program.h"

#include <latch>
#include <thread>
#include <vector>

namespace {

constexpr int kThreads = 16;
constexpr int kStreams = 4;
constexpr int kLaunchesPerStream = 1000;
constexpr int kN = 256;

CUcontext g_context = nullptr;
CUfunction g_axpy = nullptr;

// Each launch adds x (all ones) to the stream's own y.
void worker(std::latch& start, double& total) {
  DRIVER(cuCtxSetCurrent, g_context);
  const std::vector<float> ones(kN, 1.0f);
  const std::vector<float> zeros(kN, 0.0f);
  CUdeviceptr x = 0;
  DRIVER(cuMemAlloc, &x, kN * sizeof(float));
  DRIVER(cuMemcpyHtoD, x, ones.data(), kN * sizeof(float));
  CUstream streams[kStreams] = {};
  CUdeviceptr y[kStreams] = {};
  for (int s = 0; s < kStreams; ++s) {
    DRIVER(cuStreamCreate, &streams[s], CU_STREAM_NON_BLOCKING);
    DRIVER(cuMemAlloc, &y[s], kN * sizeof(float));
    DRIVER(cuMemcpyHtoDAsync, y[s], zeros.data(), kN * sizeof(float), streams[s]);
  }
  float a = 1.0f;
  int n = kN;
  void* params[kStreams][4];
  for (int s = 0; s < kStreams; ++s) {
    params[s][0] = &a;
    params[s][1] = &x;
    params[s][2] = &y[s];
    params[s][3] = &n;
  }

  start.arrive_and_wait();
  for (int i = 0; i < kLaunchesPerStream; ++i) {
    for (int s = 0; s < kStreams; ++s) {
      const CUresult r = cuLaunchKernel(g_axpy, 1, 1, 1, kN, 1, 1, 0, streams[s], params[s], nullptr);
      if (r != CUDA_SUCCESS) {
        test::fail("launch %d on stream %d: %d", i, s, static_cast<int>(r));
      }
    }
  }
  test::callsMade().add(TEST_STR(cuLaunchKernel), kStreams * kLaunchesPerStream);
  test::launchesMade().add("axpy", kStreams * kLaunchesPerStream);

  total = 0;
  std::vector<float> out(kN);
  for (int s = 0; s < kStreams; ++s) {
    DRIVER(cuStreamSynchronize, streams[s]);
    DRIVER(cuMemcpyDtoH, out.data(), y[s], kN * sizeof(float));
    for (const float v : out) {
      CHECK(v == static_cast<float>(kLaunchesPerStream));
      total += v;
    }
    DRIVER(cuMemFree, y[s]);
    DRIVER(cuStreamDestroy, streams[s]);
  }
  DRIVER(cuMemFree, x);
}

}  // namespace

int main() {
  DRIVER(cuInit, 0);
  CUdevice device = 0;
  DRIVER(cuDeviceGet, &device, 0);
  DRIVER(cuDevicePrimaryCtxRetain, &g_context, device);
  DRIVER(cuCtxSetCurrent, g_context);
  const std::string image = test::kernelImage("axpy.fatbin");
  CUmodule module = nullptr;
  DRIVER(cuModuleLoadData, &module, image.data());
  DRIVER(cuModuleGetFunction, &g_axpy, module, "axpy");

  std::latch start(kThreads);
  std::vector<double> totals(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back(worker, std::ref(start), std::ref(totals[static_cast<std::size_t>(t)]));
  }
  for (std::thread& thread : threads) {
    thread.join();
  }
  double total = 0;
  for (const double t : totals) {
    total += t;
  }
  std::printf("result total %.1f\n", total);

  DRIVER(cuModuleUnload, module);
  DRIVER(cuDevicePrimaryCtxRelease, device);
  test::printMade();
  return 0;
}
