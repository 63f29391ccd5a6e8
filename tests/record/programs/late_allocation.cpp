// Device memory allocated after the recording's first checkpoint and read
// before it is written in full, as a caching allocator's new segment is:
// run against the driver double with KCAP_DOUBLE_DIRTY_ALLOCATIONS, memory
// is handed out holding bytes an earlier allocation left, as a real
// driver's is. x = i % 13, y = 1: axpy (y += 2 x); then b is allocated and
// axpy (b += 2 x) runs over its first half only (reading what b held);
// axpy (y += 2 x). The last line prints the sums of y and b.
//
// `late_allocation capture`: b is allocated while a blocking stream
// captures into a graph (as a caching allocator grows a graph's private
// pool), the axpy over b is captured, and the graph is launched once the
// capture has ended. Anything that waited on the legacy stream meanwhile
// would invalidate the capture, and the program would fail.
//
// `late_allocation pool`: stream-ordered allocations on a stream of their
// own, recorded with a checkpoint at every launch. a (new to the pool) is
// read before it is written; it is freed and b, of a's size, gets a's
// memory and what a left there (freed since the last checkpoint); b is
// freed, y's axpy comes between (a checkpoint), and c gets the same memory
// (freed before that checkpoint). axpy over the first half of each; the
// last line prints the sums of y and c.
#include "driver_program.h"

#include <cstddef>
#include <cstring>
#include <vector>

namespace {

constexpr int kN = 1024;

}  // namespace

int main(int argc, char** argv) {
  const bool capture = argc > 1 && std::strcmp(argv[1], "capture") == 0;
  const bool pool = argc > 1 && std::strcmp(argv[1], "pool") == 0;
  const CUfunction axpy = test::axpyOnDeviceZero();
  std::vector<float> xs(kN);
  for (int i = 0; i < kN; ++i) xs[static_cast<std::size_t>(i)] = static_cast<float>(i % 13);
  const std::vector<float> ones(kN, 1.0f);
  CUdeviceptr x = 0, y = 0, b = 0;
  DRIVER(cuMemAlloc, &x, kN * sizeof(float));
  DRIVER(cuMemAlloc, &y, kN * sizeof(float));
  DRIVER(cuMemcpyHtoD, x, xs.data(), kN * sizeof(float));
  DRIVER(cuMemcpyHtoD, y, ones.data(), kN * sizeof(float));
  const auto launchAxpy = [&](CUdeviceptr target, int n, CUstream stream) {
    float a = 2.0f;
    void* params[] = {&a, &x, &target, &n};
    DRIVER(cuLaunchKernel, axpy, kN / 256, 1, 1, 256, 1, 1, 0, stream, params, nullptr);
  };
  launchAxpy(y, kN, nullptr);
  if (capture) {
    CUstream stream = nullptr;
    CUgraph graph = nullptr;
    CUgraphExec exec = nullptr;
    DRIVER(cuStreamCreate, &stream, CU_STREAM_DEFAULT);  // blocking: the legacy stream waits for it
    DRIVER(cuStreamBeginCapture, stream, CU_STREAM_CAPTURE_MODE_RELAXED);
    DRIVER(cuMemAlloc, &b, kN * sizeof(float));
    launchAxpy(b, kN / 2, stream);
    DRIVER(cuStreamEndCapture, stream, &graph);
    DRIVER(cuGraphInstantiate, &exec, graph, 0);
    DRIVER(cuGraphLaunch, exec, stream);
    DRIVER(cuStreamSynchronize, stream);
  } else if (pool) {
    CUstream stream = nullptr;
    DRIVER(cuStreamCreate, &stream, CU_STREAM_NON_BLOCKING);
    CUdeviceptr a = 0, c = 0;
    DRIVER(cuMemAllocAsync, &a, kN * sizeof(float), stream);
    launchAxpy(a, kN / 2, stream);
    DRIVER(cuMemFreeAsync, a, stream);
    DRIVER(cuMemAllocAsync, &b, kN * sizeof(float), stream);
    launchAxpy(b, kN / 2, stream);
    DRIVER(cuMemFreeAsync, b, stream);
    DRIVER(cuStreamSynchronize, stream);
    launchAxpy(y, kN, nullptr);
    DRIVER(cuMemAllocAsync, &c, kN * sizeof(float), stream);
    launchAxpy(c, kN / 2, stream);
    DRIVER(cuStreamSynchronize, stream);
    b = c;
  } else {
    DRIVER(cuMemAlloc, &b, kN * sizeof(float));
    launchAxpy(b, kN / 2, nullptr);
  }
  launchAxpy(y, kN, nullptr);
  DRIVER(cuCtxSynchronize);
  std::printf("result late_allocation %.1f %.1f\n", test::deviceSum(y, kN), test::deviceSum(b, kN));
  return 0;
}
