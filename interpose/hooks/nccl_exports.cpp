// The shim's NCCL entry points (nccl_calls.h). NCCL's C ABI, declared here
// as the plain integers and pointers it is made of: ncclResult_t,
// ncclDataType_t and ncclRedOp_t are ints, ncclComm_t a pointer,
// cudaStream_t a CUstream.
#include "hooks/nccl_calls.h"

#include "core/checkpoint_gate.h"
#include "core/collective_call.h"
#include "core/thread_work.h"
#include "hooks/hook_table.h"
#include "hooks/real_driver.h"
#include "hooks/shim_log.h"
#include "observe/observer.h"
#include "record/recorder.h"

#include <cuda.h>
#include <dlfcn.h>
#include <link.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace kcap {
namespace {

using Result = int;
constexpr Result kInternalError = 3;  // ncclInternalError

// What this thread is in: NCCL calls (their kernels are theirs) and groups
// (their calls are queued at the outermost ncclGroupEnd).
struct ThreadCalls {
  int callDepth = 0;
  int groupDepth = 0;
  int memAllocDepth = 0;  // inside ncclMemAlloc: the memory is the program's
  std::vector<CollectiveCall> grouped;
  const void* lastCaller = nullptr;  // madeByNccl's last answer, for this caller
  bool lastCallerIsNccl = false;
};
thread_local ThreadCalls t_calls;

// Every loaded object's path but the program's.
int listObject(dl_phdr_info* info, size_t, void* data) {
  auto* paths = static_cast<std::vector<std::string>*>(data);
  if (info->dlpi_name == nullptr || info->dlpi_name[0] == '\0') return 0;
  paths->emplace_back(info->dlpi_name);
  return 0;
}

bool isNcclFile(std::string_view path) {
  const size_t slash = path.rfind('/');
  return path.substr(slash == std::string_view::npos ? 0 : slash + 1).starts_with("libnccl.so");
}

// `name` in a loaded object other than the shim: NCCL loaded where RTLD_NEXT
// does not look, as a dependency of a library the program dlopened without
// RTLD_GLOBAL (Python's extension modules: PyTorch's libtorch_cuda.so),
// whose references still bind to the shim, which the loader searches first.
void* definitionInLoadedObjects(real::DlsymFunction lookup, const char* name, void* own) {
  std::vector<std::string> paths;
  dl_iterate_phdr(listObject, &paths);  // paths only: nothing is called under the loader's lock
  std::stable_partition(paths.begin(), paths.end(), [](const std::string& path) { return isNcclFile(path); });
  Dl_info shim{};
  const std::string_view shimPath = dladdr(own, &shim) != 0 && shim.dli_fname != nullptr ? shim.dli_fname : "";
  for (const std::string& path : paths) {
    if (path == shimPath) continue;
    void* handle = dlopen(path.c_str(), RTLD_LAZY | RTLD_NOLOAD);
    if (handle == nullptr) continue;
    void* fn = lookup(handle, name);
    dlclose(handle);
    if (fn != nullptr && fn != own) return fn;
  }
  return nullptr;
}

// NCCL's own definition of `name` (`own`: the shim's): the next one after
// the shim, else the one a loaded object defines.
void* nextDefinition(const char* name, void* own) noexcept {
  const real::DlsymFunction lookup = real::libcDlsym();
  if (lookup == nullptr) return nullptr;
  void* fn = lookup(RTLD_NEXT, name);
  if (fn == nullptr) {
    try {
      fn = definitionInLoadedObjects(lookup, name, own);
    } catch (...) {  // out of memory: reported below
    }
  }
  if (fn == nullptr) KCAP_LOG_ONCE("NCCL's %s was called but no loaded library defines it", name);
  return fn;
}

// One exported name and NCCL's definition of it, found at its first call.
struct NcclName {
  const char* name;
  std::atomic<void*> definition{nullptr};

  template <class Fn>
  Fn real() noexcept {
    void* fn = definition.load(std::memory_order_acquire);
    if (fn == nullptr) {
      fn = nextDefinition(name, dlsym(RTLD_DEFAULT, name));
      definition.store(fn, std::memory_order_release);
    }
    return reinterpret_cast<Fn>(fn);
  }
};

// This process's rank in `comm` and the number of ranks, asked of NCCL.
void describeComm(CollectiveCall& call) {
  using Ask = Result (*)(const void*, int*);
  static NcclName count{"ncclCommCount"}, userRank{"ncclCommUserRank"};
  const auto comm = reinterpret_cast<const void*>(call.comm);
  if (Ask fn = count.real<Ask>(); fn != nullptr && fn(comm, &call.ranks) != 0) call.ranks = -1;
  if (Ask fn = userRank.real<Ask>(); fn != nullptr && fn(comm, &call.rank) != 0) call.rank = -1;
}

void record(std::vector<CollectiveCall>& calls) {
  observe([&] {
    if (Recorder* recorder = Recorder::active()) recorder->collectives(calls);
  });
}

// After the real call of a collective or point-to-point operation returned.
// Nothing thrown here may reach NCCL's C caller: observe() catches it.
Result called(CollectiveCall call, Result result) {
  if (Recorder::active() == nullptr) return result;  // not recording: nothing kept
  call.result = result;
  observe([&] {
    describeComm(call);
    if (t_calls.groupDepth > 0) {
      call.grouped = true;
      t_calls.grouped.push_back(call);
      return;
    }
    std::vector<CollectiveCall> one{call};
    if (Recorder* recorder = Recorder::active()) recorder->collectives(one);
  });
  return result;
}

struct InsideCall {
  InsideCall() noexcept { ++t_calls.callDepth; }
  ~InsideCall() { --t_calls.callDepth; }
  InsideCall(const InsideCall&) = delete;
  InsideCall& operator=(const InsideCall&) = delete;
};

// A whole NCCL call, from before NCCL launches its kernels to after its
// Collective events are handed over, inside the checkpoint gate: no
// checkpoint falls between a kernel and the event that says what it wrote.
struct HeldGate {
  HeldGate() noexcept {
    if (CheckpointGate::armed()) {
      slot = ThreadWork::mine();
      if (slot != nullptr) CheckpointGate::enter(*slot);
    }
  }
  ~HeldGate() {
    if (slot != nullptr) CheckpointGate::leave(*slot);
  }
  HeldGate(const HeldGate&) = delete;
  HeldGate& operator=(const HeldGate&) = delete;
  ThreadWork::Slot* slot = nullptr;
};

uint64_t word(const void* pointer) { return reinterpret_cast<uint64_t>(pointer); }
uint64_t word(CUstream stream) { return reinterpret_cast<uint64_t>(stream); }

CollectiveCall makeCall(schema::CollectiveOp op, const void* send, const void* recv, size_t count, int dataType,
                        int reduceOp, int root, void* comm, CUstream stream) {
  CollectiveCall call;
  call.op = op;
  call.sendBuffer = word(send);
  call.recvBuffer = word(recv);
  call.count = count;
  call.dataType = dataType;
  call.reduceOp = reduceOp;
  call.root = root;
  call.comm = word(comm);
  call.stream = word(stream);
  return call;
}

}  // namespace

bool insideCollectiveCall() noexcept { return t_calls.callDepth > 0; }

bool madeByNccl() noexcept {
  ThreadCalls& calls = t_calls;
  const void* caller = hookCaller();
  if (calls.memAllocDepth > 0 || caller == nullptr) return false;
  if (caller != calls.lastCaller) {
    Dl_info info{};
    calls.lastCaller = caller;
    calls.lastCallerIsNccl = dladdr(caller, &info) != 0 && info.dli_fname != nullptr && isNcclFile(info.dli_fname);
  }
  return calls.lastCallerIsNccl;
}

}  // namespace kcap

namespace kcap {
namespace {

using schema::CollectiveOp;

// Calls NCCL's definition of `name` with `args`. A call made inside another
// one (a profiling layer's call of pncclX from inside the ncclX the shim
// forwarded to) is the same call: passed on untouched, `record` not called.
// Else the call runs inside the checkpoint gate and, unless it failed to
// be found, `record(result)` follows it.
template <class Fn, class Record, class... Args>
Result forward(NcclName& name, Record record, Args... args) {
  const Fn fn = name.real<Fn>();
  if (fn == nullptr) return kInternalError;
  if (insideCollectiveCall()) return fn(args...);
  const HeldGate gate;
  Result result = 0;
  {
    const InsideCall inside;
    result = fn(args...);
  }
  return record(result);
}

// The collectives and point-to-point calls: recorded with what they were
// given once NCCL returned.
template <class Fn, class... Args>
Result collective(NcclName& name, const CollectiveCall& call, Args... args) {
  return forward<Fn>(
      name, [&](Result result) { return called(call, result); }, args...);
}

using ReduceFn = Result (*)(const void*, void*, size_t, int, int, void*, CUstream);
using RootedReduceFn = Result (*)(const void*, void*, size_t, int, int, int, void*, CUstream);
using RootedFn = Result (*)(const void*, void*, size_t, int, int, void*, CUstream);
using BcastFn = Result (*)(void*, size_t, int, int, void*, CUstream);
using GatherFn = Result (*)(const void*, void*, size_t, int, void*, CUstream);
using SendFn = Result (*)(const void*, size_t, int, int, void*, CUstream);
using RecvFn = Result (*)(void*, size_t, int, int, void*, CUstream);
using MemAllocFn = Result (*)(void**, size_t);
using GroupFn = Result (*)();

Result allReduce(NcclName& n, const void* send, void* recv, size_t count, int type, int op, void* comm,
                 CUstream stream) {
  return collective<ReduceFn>(n, makeCall(CollectiveOp::ALL_REDUCE, send, recv, count, type, op, -1, comm, stream),
                              send, recv, count, type, op, comm, stream);
}
Result reduce(NcclName& n, const void* send, void* recv, size_t count, int type, int op, int root, void* comm,
              CUstream stream) {
  return collective<RootedReduceFn>(n, makeCall(CollectiveOp::REDUCE, send, recv, count, type, op, root, comm, stream),
                                    send, recv, count, type, op, root, comm, stream);
}
Result reduceScatter(NcclName& n, const void* send, void* recv, size_t count, int type, int op, void* comm,
                     CUstream stream) {
  return collective<ReduceFn>(n, makeCall(CollectiveOp::REDUCE_SCATTER, send, recv, count, type, op, -1, comm, stream),
                              send, recv, count, type, op, comm, stream);
}
Result broadcast(NcclName& n, const void* send, void* recv, size_t count, int type, int root, void* comm,
                 CUstream stream) {
  return collective<RootedFn>(n, makeCall(CollectiveOp::BROADCAST, send, recv, count, type, -1, root, comm, stream),
                              send, recv, count, type, root, comm, stream);
}
Result bcast(NcclName& n, void* buffer, size_t count, int type, int root, void* comm, CUstream stream) {
  return collective<BcastFn>(n, makeCall(CollectiveOp::BROADCAST, buffer, buffer, count, type, -1, root, comm, stream),
                             buffer, count, type, root, comm, stream);
}
Result gather(NcclName& n, const void* send, void* recv, size_t count, int type, int root, void* comm,
              CUstream stream) {
  return collective<RootedFn>(n, makeCall(CollectiveOp::GATHER, send, recv, count, type, -1, root, comm, stream), send,
                              recv, count, type, root, comm, stream);
}
Result scatter(NcclName& n, const void* send, void* recv, size_t count, int type, int root, void* comm,
               CUstream stream) {
  return collective<RootedFn>(n, makeCall(CollectiveOp::SCATTER, send, recv, count, type, -1, root, comm, stream), send,
                              recv, count, type, root, comm, stream);
}
Result allGather(NcclName& n, const void* send, void* recv, size_t count, int type, void* comm, CUstream stream) {
  return collective<GatherFn>(n, makeCall(CollectiveOp::ALL_GATHER, send, recv, count, type, -1, -1, comm, stream),
                              send, recv, count, type, comm, stream);
}
Result alltoAll(NcclName& n, const void* send, void* recv, size_t count, int type, void* comm, CUstream stream) {
  return collective<GatherFn>(n, makeCall(CollectiveOp::ALL_TO_ALL, send, recv, count, type, -1, -1, comm, stream),
                              send, recv, count, type, comm, stream);
}
Result send(NcclName& n, const void* buffer, size_t count, int type, int peer, void* comm, CUstream stream) {
  return collective<SendFn>(n, makeCall(CollectiveOp::SEND, buffer, nullptr, count, type, -1, peer, comm, stream),
                            buffer, count, type, peer, comm, stream);
}
Result recv(NcclName& n, void* buffer, size_t count, int type, int peer, void* comm, CUstream stream) {
  return collective<RecvFn>(n, makeCall(CollectiveOp::RECV, nullptr, buffer, count, type, -1, peer, comm, stream),
                            buffer, count, type, peer, comm, stream);
}

// The memory it makes is the program's, though NCCL calls the driver.
Result memAlloc(NcclName& n, void** pointer, size_t size) {
  const MemAllocFn fn = n.real<MemAllocFn>();
  if (fn == nullptr) return kInternalError;
  ++t_calls.memAllocDepth;
  const Result result = fn(pointer, size);
  --t_calls.memAllocDepth;
  return result;
}

Result groupStart(NcclName& n) {
  return forward<GroupFn>(n, [](Result result) {
    if (result == 0) ++t_calls.groupDepth;
    return result;
  });
}

// The group's work is queued here, by the outermost ncclGroupEnd: its
// calls are recorded now, each with this call's result when its own was
// success.
Result groupEnd(NcclName& n) {
  return forward<GroupFn>(n, [](Result result) {
    ThreadCalls& calls = t_calls;
    if (calls.groupDepth > 0) --calls.groupDepth;
    if (calls.groupDepth == 0 && !calls.grouped.empty()) {
      std::vector<CollectiveCall> grouped;
      grouped.swap(calls.grouped);
      for (CollectiveCall& call : grouped) {
        if (call.result == 0) call.result = result;
      }
      kcap::record(grouped);
    }
    return result;
  });
}

}  // namespace
}  // namespace kcap

// Each call is exported under its name and under its profiling name
// (pnccl...), which NCCL defines as an alias of it for a profiling layer
// that wraps the plain name; each name forwards to its own next definition.
#define KCAP_NCCL_ARGS(...) __VA_ARGS__
#define KCAP_NCCL_EXPORTS(Base, Impl, Params, Args)                  \
  extern "C" [[gnu::visibility("default")]] int nccl##Base Params {  \
    static kcap::NcclName name{"nccl" #Base};                        \
    return kcap::Impl(name KCAP_NCCL_ARGS Args);                     \
  }                                                                  \
  extern "C" [[gnu::visibility("default")]] int pnccl##Base Params { \
    static kcap::NcclName name{"pnccl" #Base};                       \
    return kcap::Impl(name KCAP_NCCL_ARGS Args);                     \
  }

KCAP_NCCL_EXPORTS(AllReduce, allReduce,
                  (const void* s, void* r, size_t n, int type, int op, void* comm, CUstream stream),
                  (, s, r, n, type, op, comm, stream))
KCAP_NCCL_EXPORTS(Reduce, reduce,
                  (const void* s, void* r, size_t n, int type, int op, int root, void* comm, CUstream stream),
                  (, s, r, n, type, op, root, comm, stream))
KCAP_NCCL_EXPORTS(ReduceScatter, reduceScatter,
                  (const void* s, void* r, size_t n, int type, int op, void* comm, CUstream stream),
                  (, s, r, n, type, op, comm, stream))
KCAP_NCCL_EXPORTS(Broadcast, broadcast,
                  (const void* s, void* r, size_t n, int type, int root, void* comm, CUstream stream),
                  (, s, r, n, type, root, comm, stream))
KCAP_NCCL_EXPORTS(Bcast, bcast, (void* b, size_t n, int type, int root, void* comm, CUstream stream),
                  (, b, n, type, root, comm, stream))
KCAP_NCCL_EXPORTS(Gather, gather, (const void* s, void* r, size_t n, int type, int root, void* comm, CUstream stream),
                  (, s, r, n, type, root, comm, stream))
KCAP_NCCL_EXPORTS(Scatter, scatter, (const void* s, void* r, size_t n, int type, int root, void* comm, CUstream stream),
                  (, s, r, n, type, root, comm, stream))
KCAP_NCCL_EXPORTS(AllGather, allGather, (const void* s, void* r, size_t n, int type, void* comm, CUstream stream),
                  (, s, r, n, type, comm, stream))
KCAP_NCCL_EXPORTS(AlltoAll, alltoAll, (const void* s, void* r, size_t n, int type, void* comm, CUstream stream),
                  (, s, r, n, type, comm, stream))
KCAP_NCCL_EXPORTS(Send, send, (const void* s, size_t n, int type, int peer, void* comm, CUstream stream),
                  (, s, n, type, peer, comm, stream))
KCAP_NCCL_EXPORTS(Recv, recv, (void* r, size_t n, int type, int peer, void* comm, CUstream stream),
                  (, r, n, type, peer, comm, stream))
KCAP_NCCL_EXPORTS(MemAlloc, memAlloc, (void** pointer, size_t size), (, pointer, size))
KCAP_NCCL_EXPORTS(GroupStart, groupStart, (), ())
KCAP_NCCL_EXPORTS(GroupEnd, groupEnd, (), ())

namespace kcap {

void* ncclEntryFor(void* handle, const char* name) noexcept {
  struct Entry {
    std::string_view name;
    void* address;
  };
#define KCAP_NCCL_ENTRIES(Base) \
  {"nccl" #Base, reinterpret_cast<void*>(&nccl##Base)}, { "pnccl" #Base, reinterpret_cast<void*>(&pnccl##Base) }
  static const Entry kEntries[] = {
      KCAP_NCCL_ENTRIES(AllReduce),  KCAP_NCCL_ENTRIES(Reduce),    KCAP_NCCL_ENTRIES(ReduceScatter),
      KCAP_NCCL_ENTRIES(Broadcast),  KCAP_NCCL_ENTRIES(Bcast),     KCAP_NCCL_ENTRIES(Gather),
      KCAP_NCCL_ENTRIES(Scatter),    KCAP_NCCL_ENTRIES(AllGather), KCAP_NCCL_ENTRIES(AlltoAll),
      KCAP_NCCL_ENTRIES(Send),       KCAP_NCCL_ENTRIES(Recv),      KCAP_NCCL_ENTRIES(MemAlloc),
      KCAP_NCCL_ENTRIES(GroupStart), KCAP_NCCL_ENTRIES(GroupEnd),
  };
#undef KCAP_NCCL_ENTRIES
  const auto entry =
      std::find_if(std::begin(kEntries), std::end(kEntries), [&](const Entry& e) { return e.name == name; });
  if (entry == std::end(kEntries)) return nullptr;
  const real::DlsymFunction lookup = real::libcDlsym();
  void* theirs = lookup != nullptr ? lookup(handle, name) : nullptr;
  if (theirs == nullptr || theirs == entry->address) return theirs;
  return nextDefinition(name, entry->address) == theirs ? entry->address : theirs;
}

}  // namespace kcap
