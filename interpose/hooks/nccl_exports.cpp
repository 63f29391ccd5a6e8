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

template <class Fn>
Fn nccl(std::atomic<Fn>& slot, const char* name) noexcept {
  Fn fn = slot.load(std::memory_order_acquire);
  if (fn == nullptr) {
    fn = reinterpret_cast<Fn>(nextDefinition(name, dlsym(RTLD_DEFAULT, name)));
    slot.store(fn, std::memory_order_release);
  }
  return fn;
}

// This process's rank in `comm` and the number of ranks, asked of NCCL.
void describeComm(CollectiveCall& call) {
  using Ask = Result (*)(const void*, int*);
  static std::atomic<Ask> count{nullptr}, userRank{nullptr};
  const auto comm = reinterpret_cast<const void*>(call.comm);
  if (Ask fn = nccl(count, "ncclCommCount"); fn != nullptr && fn(comm, &call.ranks) != 0) call.ranks = -1;
  if (Ask fn = nccl(userRank, "ncclCommUserRank"); fn != nullptr && fn(comm, &call.rank) != 0) call.rank = -1;
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

using kcap::schema::CollectiveOp;

#define KCAP_NCCL_EXPORT extern "C" [[gnu::visibility("default")]]

// The reductions and the collectives with a root.
#define KCAP_NCCL_CALL(Name, Fn, ...)             \
  static std::atomic<Fn> real_{nullptr};          \
  const Fn fn = kcap::nccl(real_, Name);          \
  if (fn == nullptr) return kcap::kInternalError; \
  const kcap::HeldGate gate;                      \
  kcap::Result result = 0;                        \
  {                                               \
    const kcap::InsideCall inside;                \
    result = fn(__VA_ARGS__);                     \
  }

KCAP_NCCL_EXPORT int ncclAllReduce(const void* send, void* recv, size_t count, int type, int op, void* comm,
                                   CUstream stream) {
  using Fn = int (*)(const void*, void*, size_t, int, int, void*, CUstream);
  KCAP_NCCL_CALL("ncclAllReduce", Fn, send, recv, count, type, op, comm, stream)
  return kcap::called(kcap::makeCall(CollectiveOp::ALL_REDUCE, send, recv, count, type, op, -1, comm, stream), result);
}

KCAP_NCCL_EXPORT int ncclReduce(const void* send, void* recv, size_t count, int type, int op, int root, void* comm,
                                CUstream stream) {
  using Fn = int (*)(const void*, void*, size_t, int, int, int, void*, CUstream);
  KCAP_NCCL_CALL("ncclReduce", Fn, send, recv, count, type, op, root, comm, stream)
  return kcap::called(kcap::makeCall(CollectiveOp::REDUCE, send, recv, count, type, op, root, comm, stream), result);
}

KCAP_NCCL_EXPORT int ncclReduceScatter(const void* send, void* recv, size_t count, int type, int op, void* comm,
                                       CUstream stream) {
  using Fn = int (*)(const void*, void*, size_t, int, int, void*, CUstream);
  KCAP_NCCL_CALL("ncclReduceScatter", Fn, send, recv, count, type, op, comm, stream)
  return kcap::called(kcap::makeCall(CollectiveOp::REDUCE_SCATTER, send, recv, count, type, op, -1, comm, stream),
                      result);
}

KCAP_NCCL_EXPORT int ncclBroadcast(const void* send, void* recv, size_t count, int type, int root, void* comm,
                                   CUstream stream) {
  using Fn = int (*)(const void*, void*, size_t, int, int, void*, CUstream);
  KCAP_NCCL_CALL("ncclBroadcast", Fn, send, recv, count, type, root, comm, stream)
  return kcap::called(kcap::makeCall(CollectiveOp::BROADCAST, send, recv, count, type, -1, root, comm, stream), result);
}

KCAP_NCCL_EXPORT int ncclBcast(void* buffer, size_t count, int type, int root, void* comm, CUstream stream) {
  using Fn = int (*)(void*, size_t, int, int, void*, CUstream);
  KCAP_NCCL_CALL("ncclBcast", Fn, buffer, count, type, root, comm, stream)
  return kcap::called(kcap::makeCall(CollectiveOp::BROADCAST, buffer, buffer, count, type, -1, root, comm, stream),
                      result);
}

KCAP_NCCL_EXPORT int ncclGather(const void* send, void* recv, size_t count, int type, int root, void* comm,
                                CUstream stream) {
  using Fn = int (*)(const void*, void*, size_t, int, int, void*, CUstream);
  KCAP_NCCL_CALL("ncclGather", Fn, send, recv, count, type, root, comm, stream)
  return kcap::called(kcap::makeCall(CollectiveOp::GATHER, send, recv, count, type, -1, root, comm, stream), result);
}

KCAP_NCCL_EXPORT int ncclScatter(const void* send, void* recv, size_t count, int type, int root, void* comm,
                                 CUstream stream) {
  using Fn = int (*)(const void*, void*, size_t, int, int, void*, CUstream);
  KCAP_NCCL_CALL("ncclScatter", Fn, send, recv, count, type, root, comm, stream)
  return kcap::called(kcap::makeCall(CollectiveOp::SCATTER, send, recv, count, type, -1, root, comm, stream), result);
}

KCAP_NCCL_EXPORT int ncclAllGather(const void* send, void* recv, size_t count, int type, void* comm, CUstream stream) {
  using Fn = int (*)(const void*, void*, size_t, int, void*, CUstream);
  KCAP_NCCL_CALL("ncclAllGather", Fn, send, recv, count, type, comm, stream)
  return kcap::called(kcap::makeCall(CollectiveOp::ALL_GATHER, send, recv, count, type, -1, -1, comm, stream), result);
}

KCAP_NCCL_EXPORT int ncclAlltoAll(const void* send, void* recv, size_t count, int type, void* comm, CUstream stream) {
  using Fn = int (*)(const void*, void*, size_t, int, void*, CUstream);
  KCAP_NCCL_CALL("ncclAlltoAll", Fn, send, recv, count, type, comm, stream)
  return kcap::called(kcap::makeCall(CollectiveOp::ALL_TO_ALL, send, recv, count, type, -1, -1, comm, stream), result);
}

KCAP_NCCL_EXPORT int ncclSend(const void* send, size_t count, int type, int peer, void* comm, CUstream stream) {
  using Fn = int (*)(const void*, size_t, int, int, void*, CUstream);
  KCAP_NCCL_CALL("ncclSend", Fn, send, count, type, peer, comm, stream)
  return kcap::called(kcap::makeCall(CollectiveOp::SEND, send, nullptr, count, type, -1, peer, comm, stream), result);
}

KCAP_NCCL_EXPORT int ncclRecv(void* recv, size_t count, int type, int peer, void* comm, CUstream stream) {
  using Fn = int (*)(void*, size_t, int, int, void*, CUstream);
  KCAP_NCCL_CALL("ncclRecv", Fn, recv, count, type, peer, comm, stream)
  return kcap::called(kcap::makeCall(CollectiveOp::RECV, nullptr, recv, count, type, -1, peer, comm, stream), result);
}

// The memory it makes is the program's, though NCCL calls the driver.
KCAP_NCCL_EXPORT int ncclMemAlloc(void** pointer, size_t size) {
  using Fn = int (*)(void**, size_t);
  static std::atomic<Fn> real{nullptr};
  const Fn fn = kcap::nccl(real, "ncclMemAlloc");
  if (fn == nullptr) return kcap::kInternalError;
  ++kcap::t_calls.memAllocDepth;
  const int result = fn(pointer, size);
  --kcap::t_calls.memAllocDepth;
  return result;
}

KCAP_NCCL_EXPORT int ncclGroupStart() {
  using Fn = int (*)();
  KCAP_NCCL_CALL("ncclGroupStart", Fn)
  if (result == 0) ++kcap::t_calls.groupDepth;
  return result;
}

// The group's work is queued here, by the outermost ncclGroupEnd: its
// calls are recorded now, each with this call's result when its own was
// success.
KCAP_NCCL_EXPORT int ncclGroupEnd() {
  using Fn = int (*)();
  KCAP_NCCL_CALL("ncclGroupEnd", Fn)
  kcap::ThreadCalls& calls = kcap::t_calls;
  if (calls.groupDepth > 0) --calls.groupDepth;
  if (calls.groupDepth == 0 && !calls.grouped.empty()) {
    std::vector<kcap::CollectiveCall> grouped;
    grouped.swap(calls.grouped);
    for (kcap::CollectiveCall& call : grouped) {
      if (call.result == 0) call.result = result;
    }
    kcap::record(grouped);
  }
  return result;
}

namespace kcap {

void* ncclEntryFor(void* handle, const char* name) noexcept {
  struct Entry {
    std::string_view name;
    void* address;
  };
  static const Entry kEntries[] = {
      {"ncclAllReduce", reinterpret_cast<void*>(&ncclAllReduce)},
      {"ncclReduce", reinterpret_cast<void*>(&ncclReduce)},
      {"ncclReduceScatter", reinterpret_cast<void*>(&ncclReduceScatter)},
      {"ncclBroadcast", reinterpret_cast<void*>(&ncclBroadcast)},
      {"ncclBcast", reinterpret_cast<void*>(&ncclBcast)},
      {"ncclGather", reinterpret_cast<void*>(&ncclGather)},
      {"ncclScatter", reinterpret_cast<void*>(&ncclScatter)},
      {"ncclAllGather", reinterpret_cast<void*>(&ncclAllGather)},
      {"ncclAlltoAll", reinterpret_cast<void*>(&ncclAlltoAll)},
      {"ncclSend", reinterpret_cast<void*>(&ncclSend)},
      {"ncclRecv", reinterpret_cast<void*>(&ncclRecv)},
      {"ncclMemAlloc", reinterpret_cast<void*>(&ncclMemAlloc)},
      {"ncclGroupStart", reinterpret_cast<void*>(&ncclGroupStart)},
      {"ncclGroupEnd", reinterpret_cast<void*>(&ncclGroupEnd)},
  };
  const auto entry =
      std::find_if(std::begin(kEntries), std::end(kEntries), [&](const Entry& e) { return e.name == name; });
  if (entry == std::end(kEntries)) return nullptr;
  const real::DlsymFunction lookup = real::libcDlsym();
  void* theirs = lookup != nullptr ? lookup(handle, name) : nullptr;
  if (theirs == nullptr || theirs == entry->address) return theirs;
  return nextDefinition(name, entry->address) == theirs ? entry->address : theirs;
}

}  // namespace kcap
