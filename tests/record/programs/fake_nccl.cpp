// A stand-in for libnccl.so.2 (tests only) with two ranks, of which this
// process is rank 0 and the other exists only here: what "rank 1" sends is
// peerValue(i). Each call writes its receive buffer directly, as NCCL's
// kernels write it with data from other GPUs: no CUDA call of this process
// makes those bytes, so only a log of what the call wrote can rebuild them.
// The driver double's device memory is host memory, and it runs a stream's
// work when it is queued, so writing at the call is in stream order. Calls
// between ncclGroupStart and ncclGroupEnd run at the outermost
// ncclGroupEnd, as NCCL queues a group's work there.
#include <cstddef>
#include <cstring>
#include <functional>
#include <vector>

#define FAKE_NCCL_API extern "C" __attribute__((visibility("default")))

namespace {

constexpr int kRanks = 2;
constexpr int kFloat32 = 7;
constexpr int kInvalidArgument = 4;

float peerValue(std::size_t i) { return static_cast<float>((i * 5) % 11); }

int groupDepth = 0;
std::vector<std::function<void()>> queued;

int run(std::function<void()> work) {
  if (groupDepth > 0) {
    queued.push_back(std::move(work));
  } else {
    work();
  }
  return 0;
}

float* floats(void* device) { return static_cast<float*>(device); }
const float* floats(const void* device) { return static_cast<const float*>(device); }

}  // namespace

FAKE_NCCL_API int ncclGetVersion(int* version) {
  *version = 22809;
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
FAKE_NCCL_API int ncclAllReduce(const void* send, void* recv, std::size_t count, int type, int, void*, void*) {
  if (type != kFloat32) return kInvalidArgument;
  return run([=] {
    for (std::size_t i = 0; i < count; ++i) floats(recv)[i] = floats(send)[i] + peerValue(i);
  });
}

// Rank 0's count elements, then rank 1's.
FAKE_NCCL_API int ncclAllGather(const void* send, void* recv, std::size_t count, int type, void*, void*) {
  if (type != kFloat32) return kInvalidArgument;
  return run([=] {
    std::memmove(recv, send, count * sizeof(float));
    for (std::size_t i = 0; i < count; ++i) floats(recv)[count + i] = peerValue(i);
  });
}

FAKE_NCCL_API int ncclRecv(void* recv, std::size_t count, int type, int, void*, void*) {
  if (type != kFloat32) return kInvalidArgument;
  return run([=] {
    for (std::size_t i = 0; i < count; ++i) floats(recv)[i] = 2 * peerValue(i);
  });
}

FAKE_NCCL_API int ncclSend(const void*, std::size_t, int type, int, void*, void*) {
  return type == kFloat32 ? 0 : kInvalidArgument;
}

FAKE_NCCL_API int ncclGroupStart() {
  ++groupDepth;
  return 0;
}

FAKE_NCCL_API int ncclGroupEnd() {
  if (groupDepth == 0) return 5;  // ncclInvalidUsage
  if (--groupDepth == 0) {
    for (const auto& work : queued) work();
    queued.clear();
  }
  return 0;
}
