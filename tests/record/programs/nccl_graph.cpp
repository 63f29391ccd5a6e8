// An NCCL all-reduce captured into a CUDA graph between two kernels, the
// shape of a tensor-parallel decode step, against the driver double and the
// stand-in for NCCL (fake_nccl.cpp), linked as libnccl.so.2. x = i % 13,
// y = 1. The graph: axpy (y += 2 x), ncclAllReduce of y in place (y += the
// peer's share, by the stand-in's NCCL kernel), axpy (y += 2 x). It is
// launched kLaunches times, with a kernel launch (z += 2 x) before the
// capture and after each graph launch (so that checkpoints fall between
// them and before the capture); the last line prints y's and z's sums.
//
// `nccl_collectives_graph two`: a second graph, captured on a second stream,
// does the same to the first half of w (w = 1; its all-reduces are half as
// large) with two all-reduces in a row, and is launched on that stream after
// each launch of the first: its calls may share kcap's copy memory with the
// first graph's, never with each other. The last line adds w's sum.
#include "driver_program.h"

#include <cstddef>
#include <cstring>
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

int main(int argc, char** argv) {
  const bool two = argc > 1 && std::strcmp(argv[1], "two") == 0;
  const CUfunction axpy = test::axpyOnDeviceZero();
  CUstream stream = nullptr, second = nullptr;
  DRIVER(cuStreamCreate, &stream, CU_STREAM_NON_BLOCKING);
  DRIVER(cuStreamCreate, &second, CU_STREAM_NON_BLOCKING);

  std::vector<float> xs(kN);
  for (int i = 0; i < kN; ++i) xs[static_cast<std::size_t>(i)] = static_cast<float>(i % 13);
  CUdeviceptr x = 0, y = 0, z = 0, w = 0;
  DRIVER(cuMemAlloc, &x, kN * sizeof(float));
  DRIVER(cuMemAlloc, &y, kN * sizeof(float));
  DRIVER(cuMemAlloc, &z, kN * sizeof(float));
  DRIVER(cuMemAlloc, &w, kN * sizeof(float));
  DRIVER(cuMemcpyHtoD, x, xs.data(), kN * sizeof(float));
  const std::vector<float> ones(kN, 1.0f);
  DRIVER(cuMemcpyHtoD, y, ones.data(), kN * sizeof(float));
  DRIVER(cuMemcpyHtoD, z, ones.data(), kN * sizeof(float));
  DRIVER(cuMemcpyHtoD, w, ones.data(), kN * sizeof(float));
  void* comm = nullptr;
  NCCL(ncclCommInitRank(&comm, 2, UniqueId{}, 0));
  const auto launchAxpy = [&](CUdeviceptr target, int n, CUstream on) {
    float a = 2.0f;
    void* params[] = {&a, &x, &target, &n};
    DRIVER(cuLaunchKernel, axpy, kN / 256, 1, 1, 256, 1, 1, 0, on, params, nullptr);
  };
  // axpy, `calls` in-place all-reduces of n elements, axpy: captured on `on`.
  const auto capture = [&](CUdeviceptr target, int n, int calls, CUstream on) {
    CUgraph graph = nullptr;
    DRIVER(cuStreamBeginCapture, on, CU_STREAM_CAPTURE_MODE_GLOBAL);
    launchAxpy(target, n, on);
    for (int c = 0; c < calls; ++c) {
      NCCL(ncclAllReduce(reinterpret_cast<void*>(target), reinterpret_cast<void*>(target), static_cast<std::size_t>(n),
                         kFloat32, kSum, comm, on));
    }
    launchAxpy(target, n, on);
    DRIVER(cuStreamEndCapture, on, &graph);
    CUgraphExec exec = nullptr;
    DRIVER(cuGraphInstantiate, &exec, graph, 0);
    DRIVER(cuGraphDestroy, graph);
    return exec;
  };

  launchAxpy(z, kN, stream);  // before the capture: a checkpoint falls before it
  const CUgraphExec exec = capture(y, kN, 1, stream);
  const CUgraphExec half = two ? capture(w, kN / 2, 2, second) : nullptr;
  for (int k = 0; k < kLaunches; ++k) {
    DRIVER(cuGraphLaunch, exec, stream);
    launchAxpy(z, kN, stream);
    if (two) DRIVER(cuGraphLaunch, half, second);
  }
  DRIVER(cuStreamSynchronize, stream);
  DRIVER(cuStreamSynchronize, second);
  if (two) {
    std::printf("result nccl_graph %.1f %.1f %.1f\n", test::deviceSum(y, kN), test::deviceSum(z, kN),
                test::deviceSum(w, kN));
  } else {
    std::printf("result nccl_graph %.1f %.1f\n", test::deviceSum(y, kN), test::deviceSum(z, kN));
  }
  DRIVER(cuGraphExecDestroy, exec);
  if (two) DRIVER(cuGraphExecDestroy, half);
  NCCL(ncclCommDestroy(comm));
  return 0;
}
