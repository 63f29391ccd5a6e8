// A stand-in for libnccl.so.2 (tests only) with two ranks, of which this
// process is rank 0 and the other exists only here: what "rank 1" sends is
// peerValue(i). Each call writes its receive buffer directly, as NCCL's
// kernels write it with data from other GPUs: no CUDA call of this process
// makes those bytes, so only a log of what the call wrote can rebuild them.
// The driver double's device memory is host memory, and it runs a stream's
// work when it is queued, so writing at the call is in stream order. Calls
// between ncclGroupStart and ncclGroupEnd run at the outermost
// ncclGroupEnd, as NCCL queues a group's work there.
//
// Like NCCL it keeps device memory of its own, which every call rewrites
// (a sequence number, as NCCL's FIFOs change with each collective): one
// buffer made by ncclCommInitRank, one by a thread it starts (NCCL's proxy
// thread makes the buffers its peers write). ncclMemAlloc's memory is the
// caller's.
//
// As NCCL does, it defines each call's profiling name (pncclAllReduce, ...)
// as an alias of it, for a profiling layer that wraps the plain name.
//
// On a stream capturing into a CUDA graph, ncclAllReduce writes nothing: as
// NCCL's do, it captures a kernel named as NCCL names its device kernels,
// which adds what "rank 1" sent, read from the communicator's memory (where
// NCCL's kernels find their peers' data), each time the graph runs.
#include <cuda.h>

#include <cstddef>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#define FAKE_NCCL_API extern "C" __attribute__((visibility("default")))

namespace {

constexpr int kRanks = 2;
constexpr int kFloat32 = 7;
constexpr int kInvalidArgument = 4;

float peerValue(std::size_t i) { return static_cast<float>((i * 5) % 11); }

int g_groupDepth = 0;
std::vector<std::function<void()>> g_queued;

// The communicator: the memory it keeps for itself.
struct Comm {
  CUdeviceptr own = 0;
  CUdeviceptr proxys = 0;
  CUdeviceptr peers = 0;  // peerValue(i), for the captured kernel
  unsigned sequence = 0;
};
constexpr std::size_t kOwnBytes = 4096;
constexpr std::size_t kPeerCount = 1u << 16;

void advance(void* comm) {
  auto* c = static_cast<Comm*>(comm);
  ++c->sequence;
  for (const CUdeviceptr buffer : {c->own, c->proxys}) {
    if (buffer == 0) continue;
    auto* words = reinterpret_cast<unsigned*>(buffer);
    for (std::size_t i = 0; i < kOwnBytes / sizeof(unsigned); ++i)
      words[i] = c->sequence * 7 + static_cast<unsigned>(i);
  }
}

int run(void* comm, std::function<void()> work) {
  if (g_groupDepth > 0) {
    g_queued.push_back([comm, work = std::move(work)] {
      work();
      advance(comm);
    });
  } else {
    work();
    advance(comm);
  }
  return 0;
}

float* floats(void* device) { return static_cast<float*>(device); }
const float* floats(const void* device) { return static_cast<const float*>(device); }

// The captured all-reduce's kernel: driver-double material (the double runs
// its host version, tests/driver_double/host_kernels.cpp).
constexpr char kStandInPtx[] =
    ".version 8.0\n.target sm_90\n.address_size 64\n"
    ".visible .entry ncclDevKernel_StandInSum(.param .u64 p0, .param .u64 p1, .param .u64 p2, .param .u64 p3)\n"
    "{\n\tret;\n}\n";

bool capturing(void* stream) {
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  return cuStreamIsCapturing(static_cast<CUstream>(stream), &status) == CUDA_SUCCESS &&
         status != CU_STREAM_CAPTURE_STATUS_NONE;
}

// recv = send + the peer's share, as a kernel captured on `stream`.
int captureSum(void* comm, const void* send, void* recv, std::size_t count, void* stream) {
  static CUfunction sum = nullptr;
  if (sum == nullptr) {
    CUmodule module = nullptr;
    if (cuModuleLoadData(&module, kStandInPtx) != CUDA_SUCCESS ||
        cuModuleGetFunction(&sum, module, "ncclDevKernel_StandInSum") != CUDA_SUCCESS) {
      return 1;
    }
  }
  if (count > kPeerCount) return kInvalidArgument;
  auto* c = static_cast<Comm*>(comm);
  if (c->peers == 0) {
    if (cuMemAlloc(&c->peers, kPeerCount * sizeof(float)) != CUDA_SUCCESS) return 1;
    for (std::size_t i = 0; i < kPeerCount; ++i) reinterpret_cast<float*>(c->peers)[i] = peerValue(i);
  }
  unsigned long long n = count;
  void* params[] = {&recv, &send, &c->peers, &n};
  if (cuLaunchKernel(sum, 1, 1, 1, 1, 1, 1, 0, static_cast<CUstream>(stream), params, nullptr) != CUDA_SUCCESS) {
    return 1;
  }
  advance(comm);
  return 0;
}

}  // namespace

FAKE_NCCL_API int ncclGetVersion(int* version) {
  *version = 22809;
  return 0;
}
struct FakeUniqueId {
  char internal[128];
};

FAKE_NCCL_API int ncclCommInitRank(void** comm, int, FakeUniqueId, int) {
  auto* c = new Comm;
  if (cuMemAlloc(&c->own, kOwnBytes) != CUDA_SUCCESS) return 1;  // ncclUnhandledCudaError
  CUcontext context = nullptr;
  cuCtxGetCurrent(&context);
  CUresult made = CUDA_ERROR_UNKNOWN;
  std::thread proxy([&] {
    cuCtxSetCurrent(context);
    made = cuMemAlloc(&c->proxys, kOwnBytes);
  });
  proxy.join();
  if (made != CUDA_SUCCESS) return 1;
  *comm = c;
  return 0;
}

FAKE_NCCL_API int ncclCommDestroy(void* comm) {
  auto* c = static_cast<Comm*>(comm);
  const bool freed = cuMemFree(c->own) == CUDA_SUCCESS && cuMemFree(c->proxys) == CUDA_SUCCESS &&
                     (c->peers == 0 || cuMemFree(c->peers) == CUDA_SUCCESS);
  delete c;
  return freed ? 0 : 1;
}

FAKE_NCCL_API int ncclMemAlloc(void** pointer, std::size_t size) {
  CUdeviceptr device = 0;
  if (cuMemAlloc(&device, size) != CUDA_SUCCESS) return 1;
  *pointer = reinterpret_cast<void*>(device);
  return 0;
}

FAKE_NCCL_API int ncclCommCount(const void*, int* count) {
  *count = kRanks;
  return 0;
}
FAKE_NCCL_API int ncclCommUserRank(const void*, int* rank) {
  *rank = 0;
  return 0;
}

// Sum over both ranks.
FAKE_NCCL_API int ncclAllReduce(const void* send, void* recv, std::size_t count, int type, int, void* comm,
                                void* stream) {
  if (type != kFloat32) return kInvalidArgument;
  if (capturing(stream)) return captureSum(comm, send, recv, count, stream);
  return run(comm, [=] {
    for (std::size_t i = 0; i < count; ++i) floats(recv)[i] = floats(send)[i] + peerValue(i);
  });
}

// Rank 0's count elements, then rank 1's.
FAKE_NCCL_API int ncclAllGather(const void* send, void* recv, std::size_t count, int type, void* comm, void*) {
  if (type != kFloat32) return kInvalidArgument;
  return run(comm, [=] {
    std::memmove(recv, send, count * sizeof(float));
    for (std::size_t i = 0; i < count; ++i) floats(recv)[count + i] = peerValue(i);
  });
}

FAKE_NCCL_API int ncclRecv(void* recv, std::size_t count, int type, int, void* comm, void*) {
  if (type != kFloat32) return kInvalidArgument;
  return run(comm, [=] {
    for (std::size_t i = 0; i < count; ++i) floats(recv)[i] = 2 * peerValue(i);
  });
}

FAKE_NCCL_API int ncclSend(const void*, std::size_t, int type, int, void*, void*) {
  return type == kFloat32 ? 0 : kInvalidArgument;
}

FAKE_NCCL_API int ncclGroupStart() {
  ++g_groupDepth;
  return 0;
}

FAKE_NCCL_API int ncclGroupEnd() {
  if (g_groupDepth == 0) return 5;  // ncclInvalidUsage
  if (--g_groupDepth == 0) {
    for (const auto& work : g_queued) work();
    g_queued.clear();
  }
  return 0;
}

#define FAKE_NCCL_PROFILING_NAME(name) FAKE_NCCL_API decltype(name) p##name __attribute__((alias(#name)));
FAKE_NCCL_PROFILING_NAME(ncclCommInitRank)
FAKE_NCCL_PROFILING_NAME(ncclCommDestroy)
FAKE_NCCL_PROFILING_NAME(ncclMemAlloc)
FAKE_NCCL_PROFILING_NAME(ncclAllReduce)
FAKE_NCCL_PROFILING_NAME(ncclAllGather)
FAKE_NCCL_PROFILING_NAME(ncclRecv)
FAKE_NCCL_PROFILING_NAME(ncclSend)
FAKE_NCCL_PROFILING_NAME(ncclGroupStart)
FAKE_NCCL_PROFILING_NAME(ncclGroupEnd)
