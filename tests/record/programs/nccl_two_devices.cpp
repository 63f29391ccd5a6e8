// NCCL calls on two devices in one group, made from one thread, as a
// single-process program drives one communicator per GPU: against the
// driver double with two devices (KCAP_DOUBLE_DEVICES=2) and the stand-in
// for NCCL (fake_nccl.cpp), linked as libnccl.so.2. Each device has its own
// context, stream, communicator and y = 1; one group all-reduces device 0's
// y on its stream and device 1's y on its own, and ends with device 0's
// context current, so that the calls are recorded there. The last line
// prints both sums.
//
// `nccl_collectives_two_devices graphs`: instead, each device captures its
// all-reduce into a graph on its own stream (its context current), and each
// graph is launched once.
#include "driver_program.h"

#include <cstddef>
#include <cstring>
#include <vector>

struct UniqueId {  // ncclUniqueId
  char internal[128];
};

extern "C" {
int ncclCommInitRank(void**, int, UniqueId, int);
int ncclCommDestroy(void*);
int ncclAllReduce(const void*, void*, std::size_t, int, int, void*, CUstream);
int ncclGroupStart();
int ncclGroupEnd();
}

namespace {

constexpr int kN = 1024;
constexpr int kFloat32 = 7;
constexpr int kSum = 0;

#define NCCL(call) CHECK((call) == 0)

// One device's share: its context, stream, communicator and y.
struct Device {
  CUcontext context = nullptr;
  CUstream stream = nullptr;
  void* comm = nullptr;
  CUdeviceptr y = 0;
};

Device open(int ordinal) {
  Device d;
  CUdevice device = 0;
  DRIVER(cuDeviceGet, &device, ordinal);
  DRIVER(cuCtxCreate, &d.context, nullptr, 0, device);
  DRIVER(cuStreamCreate, &d.stream, CU_STREAM_NON_BLOCKING);
  NCCL(ncclCommInitRank(&d.comm, 2, UniqueId{}, 0));
  const std::vector<float> ones(kN, 1.0f);
  DRIVER(cuMemAlloc, &d.y, kN * sizeof(float));
  DRIVER(cuMemcpyHtoD, d.y, ones.data(), kN * sizeof(float));
  return d;
}

double sum(const Device& d) {
  DRIVER(cuCtxSetCurrent, d.context);
  DRIVER(cuStreamSynchronize, d.stream);
  return test::deviceSum(d.y, kN);
}

}  // namespace

int main(int argc, char** argv) {
  DRIVER(cuInit, 0);
  const Device devices[] = {open(0), open(1)};
  if (argc > 1 && std::strcmp(argv[1], "graphs") == 0) {
    for (const Device& d : devices) {
      DRIVER(cuCtxSetCurrent, d.context);
      CUgraph graph = nullptr;
      CUgraphExec exec = nullptr;
      auto* y = reinterpret_cast<void*>(d.y);
      DRIVER(cuStreamBeginCapture, d.stream, CU_STREAM_CAPTURE_MODE_GLOBAL);
      NCCL(ncclAllReduce(y, y, kN, kFloat32, kSum, d.comm, d.stream));
      DRIVER(cuStreamEndCapture, d.stream, &graph);
      DRIVER(cuGraphInstantiate, &exec, graph, 0);
      DRIVER(cuGraphLaunch, exec, d.stream);
    }
    std::printf("result nccl_two_devices %.1f %.1f\n", sum(devices[0]), sum(devices[1]));
    for (const Device& d : devices) NCCL(ncclCommDestroy(d.comm));
    return 0;
  }
  DRIVER(cuCtxSetCurrent, devices[0].context);
  NCCL(ncclGroupStart());
  for (const Device& d : devices) {
    auto* y = reinterpret_cast<void*>(d.y);
    NCCL(ncclAllReduce(y, y, kN, kFloat32, kSum, d.comm, d.stream));
  }
  NCCL(ncclGroupEnd());
  std::printf("result nccl_two_devices %.1f %.1f\n", sum(devices[0]), sum(devices[1]));
  for (const Device& d : devices) NCCL(ncclCommDestroy(d.comm));
  return 0;
}
