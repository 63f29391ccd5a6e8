// An NCCL all-reduce captured into a CUDA graph between two kernels, the
// shape of a tensor-parallel decode step, against the driver double and the
// stand-in for NCCL (fake_nccl.cpp), linked as libnccl.so.2. x = i % 13,
// y = 1. The graph: axpy (y += 2 x), ncclAllReduce of y in place (y += the
// peer's share, by the stand-in's NCCL kernel), axpy (y += 2 x). It is
// launched kLaunches times, with a kernel launch (z += 2 x) before the
// capture and after each graph launch (so that checkpoints fall between
// them and before the capture); the last line prints y's and z's sums.
#include "driver_program.h"

#include <cstddef>
#include <string>
#include <vector>

struct UniqueId {  // ncclUniqueId
  char internal[128];
};

extern "C" {
int ncclCommInitRank(void**, int, UniqueId, int);
int ncclCommDestroy(void*);
int ncclAllReduce(const void*, void*, std::size_t, int, int, void*, CUstream);
}

namespace {

constexpr int kN = 1024;
constexpr int kLaunches = 3;
constexpr int kFloat32 = 7;
constexpr int kSum = 0;

#define NCCL(call) CHECK((call) == 0)

}  // namespace

int main() {
  const CUfunction axpy = test::axpyOnDeviceZero();
  CUstream stream = nullptr;
  DRIVER(cuStreamCreate, &stream, CU_STREAM_NON_BLOCKING);

  std::vector<float> xs(kN);
  for (int i = 0; i < kN; ++i) xs[static_cast<std::size_t>(i)] = static_cast<float>(i % 13);
  CUdeviceptr x = 0, y = 0, z = 0;
  DRIVER(cuMemAlloc, &x, kN * sizeof(float));
  DRIVER(cuMemAlloc, &y, kN * sizeof(float));
  DRIVER(cuMemAlloc, &z, kN * sizeof(float));
  DRIVER(cuMemcpyHtoD, x, xs.data(), kN * sizeof(float));
  const std::vector<float> ones(kN, 1.0f);
  DRIVER(cuMemcpyHtoD, y, ones.data(), kN * sizeof(float));
  DRIVER(cuMemcpyHtoD, z, ones.data(), kN * sizeof(float));
  void* comm = nullptr;
  NCCL(ncclCommInitRank(&comm, 2, UniqueId{}, 0));
  const auto launchAxpy = [&](CUdeviceptr target) {
    float a = 2.0f;
    int n = kN;
    void* params[] = {&a, &x, &target, &n};
    DRIVER(cuLaunchKernel, axpy, kN / 256, 1, 1, 256, 1, 1, 0, stream, params, nullptr);
  };

  launchAxpy(z);  // before the capture: a checkpoint falls before it
  CUgraph graph = nullptr;
  DRIVER(cuStreamBeginCapture, stream, CU_STREAM_CAPTURE_MODE_GLOBAL);
  launchAxpy(y);
  NCCL(ncclAllReduce(reinterpret_cast<void*>(y), reinterpret_cast<void*>(y), kN, kFloat32, kSum, comm, stream));
  launchAxpy(y);
  DRIVER(cuStreamEndCapture, stream, &graph);
  CUgraphExec exec = nullptr;
  DRIVER(cuGraphInstantiate, &exec, graph, 0);

  for (int k = 0; k < kLaunches; ++k) {
    DRIVER(cuGraphLaunch, exec, stream);
    launchAxpy(z);
  }
  DRIVER(cuStreamSynchronize, stream);
  std::printf("result nccl_graph %.1f %.1f\n", test::deviceSum(y, kN), test::deviceSum(z, kN));
  DRIVER(cuGraphExecDestroy, exec);
  DRIVER(cuGraphDestroy, graph);
  NCCL(ncclCommDestroy(comm));
  return 0;
}
