// The double's driver state: one device, contexts, modules, libraries,
// launch handles, streams and allocations, all on host memory.
//
// Handles given to the program are pointers to these objects; every handle
// the program passes back is checked against the live set first, so a test
// that uses a stale or wrong handle gets the driver's error code instead of
// a crash. One mutex guards the whole state; kernels run outside it.
#pragma once

#include "host_kernels.h"
#include "images.h"

#include <cuda.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_set>
#include <vector>

namespace kcap_double {

struct Context {
  CUdevice device = 0;
};

struct Library;
struct Launchable;

struct Module final : ModuleGlobals {
  ImageContents contents;
  std::map<std::string, void*, std::less<>> globals;  // name -> device (host) address
  std::map<const KernelDef*, Launchable*> functions;
  Library* library = nullptr;  // the library's module

  void* find(std::string_view name) const override;
};

// A CUfunction or a CUkernel. Either one launches (a CUkernel cast to
// CUfunction is a valid launch handle); the name and parameter queries take
// only their own kind, as the real driver's do.
struct Launchable {
  enum class Kind { kFunction, kErnel };
  Kind kind;
  const KernelDef* def;
  Module* module;
  // KCAP_DOUBLE_LAZY_LOADING=1: a CUfunction's code is loaded by its first
  // launch, attribute change or cuFuncLoad, as under the real driver's lazy
  // loading; until then cuFuncGetParamInfo answers INVALID_VALUE.
  bool loaded = true;
};

struct Library {
  Module* module = nullptr;
  std::map<const KernelDef*, Launchable*> kernels;
};

// A kernel launch as a kernel graph node keeps it (captured or added), and as
// a direct launch runs it: the parameter values are copied (the program's may
// change).
struct CapturedLaunch {
  const KernelDef* def = nullptr;
  const Module* module = nullptr;
  LaunchShape shape{};
  std::vector<unsigned char> bytes;  // every parameter's value at its ParamSlot offset
};

struct Graph;
struct GraphNode;
struct GraphExec;

// A capturing stream appends nodes to the capture's graph, each after the
// stream's last captured work (`tails`); a stream that waited on an event
// recorded in a capture joins that capture (`origin`: the stream that began it).
struct Stream {
  enum class Capture { kNone, kActive, kInvalidated };
  unsigned flags = 0;
  const Context* context = nullptr;  // current when it was made (cuStreamGetCtx)
  Capture capture = Capture::kNone;
  Graph* captureGraph = nullptr;
  Stream* origin = nullptr;
  std::vector<GraphNode*> tails;
  std::uint64_t captureId = 0;             // unique per capture (cuStreamGetCaptureInfo)
  std::vector<CUgraphNode> tailHandles;    // what cuStreamGetCaptureInfo hands out
  std::vector<CUgraphEdgeData> tailEdges;  // all default edges
};

struct Event {
  unsigned flags = 0;
  // When cuEventRecord last recorded it (work is synchronous, so "the work
  // before it completed" is now): cuEventElapsedTime's clock.
  bool recorded = false;
  std::chrono::steady_clock::time_point when{};
  // Recorded in a capturing stream: the capture's work it stands for.
  Graph* captureGraph = nullptr;
  std::vector<GraphNode*> captureTails;
};

class State {
 public:
  std::mutex mutex;
  std::atomic<bool> initialized{false};

  Context primaryContext;
  int primaryRetains = 0;

  std::unordered_set<const Context*> contexts{&primaryContext};
  std::unordered_set<const Module*> modules;
  std::unordered_set<const Launchable*> launchables;
  std::unordered_set<const Library*> libraries;
  std::unordered_set<const Stream*> streams;
  std::unordered_set<const Event*> events;
  std::unordered_set<const Graph*> graphs;                  // graph.h
  std::unordered_set<const GraphNode*> graphNodes;          // nodes of those graphs
  std::unordered_set<const GraphExec*> graphExecs;          // cuGraphInstantiate
  std::map<std::uintptr_t, std::size_t> graphReserved;      // allocation nodes' addresses: base -> size
  std::map<std::uintptr_t, std::size_t> allocations;        // base -> size
  std::map<std::uintptr_t, std::size_t> hostAllocations;    // page-locked host memory: base -> size
  std::map<std::uintptr_t, std::size_t> hostRegistrations;  // cuMemHostRegister: base -> size
  std::map<std::uintptr_t, std::size_t> ipcMappings;        // cuIpcOpenMemHandle (also in allocations): base -> size

  // A kernel "faulted" (a poison parameter, see api_launch.cpp): like the
  // driver's sticky error, every later call that needs the context fails.
  std::atomic<CUresult> sticky{CUDA_SUCCESS};

  // Device memory: host memory aligned as cudaMalloc's (256). Needs the lock.
  CUdeviceptr allocate(std::size_t bytes);
  bool release(CUdeviceptr base);
  // Stream-ordered allocations come from a pool, as the driver's do: a
  // block freed by cuMemFreeAsync keeps its bytes and goes to the next
  // stream-ordered allocation of the same (rounded) size. Needs the lock.
  CUdeviceptr allocateFromPool(std::size_t bytes);
  bool releaseToPool(CUdeviceptr base);
  std::set<std::uintptr_t> poolBlocks;                  // bases of the pool's blocks, allocated or free
  std::multimap<std::size_t, std::uintptr_t> poolFree;  // free blocks: rounded size -> base
  // The device's memory, as a GPU's is finite: KCAP_DOUBLE_DEVICE_MEMORY
  // bytes (default: unbounded) shared by cuMemAlloc* and cuMemCreate, so
  // that a trace claiming more than a device holds meets the driver's
  // out-of-memory error as it would on a GPU. Needs the lock.
  bool takeDeviceMemory(std::size_t bytes);
  void giveDeviceMemory(std::size_t bytes);
  std::size_t deviceMemoryInUse = 0;
  // Whether [address, address + bytes) is device memory (one allocation, or
  // adjoining ones). Needs the lock.
  bool contains(CUdeviceptr address, std::size_t bytes) const;
  bool rangeOf(CUdeviceptr address, CUdeviceptr& base, std::size_t& size) const;

  // Loads an image into a new module. Needs the lock.
  CUresult loadModule(const void* image, Module*& module);
  void unloadModule(Module* module);

  // The module's CUfunction for a kernel, made on first request (the
  // driver hands out the same handle every time). Needs the lock.
  Launchable* functionFor(Module* module, const KernelDef* def);
};

State& state();

// The calling thread's current context (the driver's context stack, one deep).
Context*& currentContext();

// ---- checks the entry points share --------------------------------------------

using Lock = std::lock_guard<std::mutex>;

constexpr int kMultiprocessors = 132;  // an H200's

inline CUresult needInit() { return state().initialized.load() ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED; }

// KCAP_DOUBLE_DEFER_COPIES=1: cuMemcpyHtoDAsync on a created stream reads
// its source only at the next call that needs the context, as a GPU's copy
// engine reads it some time after the call returned: a caller that rewrites
// the source before waiting for the stream sees the copy take the new bytes.
// (Everything else still runs within its call, so the order of work on a
// stream is kept: the pending copies run before whatever comes next.)
bool deferCopies();
// KCAP_DOUBLE_DEVICES=N (1 to 8, default 1): the devices the double says it
// has, alike but for their ordinal and PCI bus id (kcap bisect --devices).
int deviceCount();
bool knownDevice(int device);
void runDeferredCopies();
extern std::atomic<bool> g_deferredCopies;  // some copy is pending

inline CUresult needContext() {
  if (const CUresult r = needInit(); r != CUDA_SUCCESS) {
    return r;
  }
  if (g_deferredCopies.load(std::memory_order_acquire)) {
    runDeferredCopies();
  }
  if (const CUresult sticky = state().sticky.load(); sticky != CUDA_SUCCESS) {
    return sticky;
  }
  return currentContext() != nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

// Parameter values that make a launch misbehave, for tests of what a
// recorder leaves behind when a kernel faults:
//   kPoisonFault  the launch returns success but "faults" (sticky
//                 CUDA_ERROR_ILLEGAL_ADDRESS from every later call),
//                 as an illegal address on a GPU does
//   kPoisonKill   the process is killed (SIGKILL) inside the launch
//   kPoisonHang   the launch never returns (it sleeps until the process is
//                 killed), as a kernel stuck in a loop
//   kPoisonSlow   the launch call takes 300 ms (as one blocked on a full
//                 queue) and returns success without running the kernel
//   kPoisonAbort  the process aborts (SIGABRT) inside the launch call
// Tensor maps (api_memory.cpp): whether a CUtensorMap's 128 bytes carry this
// driver's tag (KCAP_DOUBLE_TENSOR_MAP_SALT); launches refuse maps that do not.
std::uint64_t tensorMapTag();
bool tensorMapIsOurs(const void* map);
bool tensorMapsRefused();  // KCAP_DOUBLE_TENSOR_MAP_REFUSE=1: every encode fails

inline constexpr std::uint64_t kPoisonFault = 0xDEAD0000DEAD0000ull;
inline constexpr std::uint64_t kPoisonKill = 0xDEAD0000DEADDEADull;
inline constexpr std::uint64_t kPoisonHang = 0xDEAD0000DEAD4A46ull;
inline constexpr std::uint64_t kPoisonSlow = 0xDEAD0000DEAD5105ull;
inline constexpr std::uint64_t kPoisonAbort = 0xDEAD0000DEADAB07ull;

// The stream a handle names, or nullptr for the legacy / per-thread default
// streams (which never capture). Needs the lock.
inline Stream* findStream(State& s, CUstream stream) {
  auto* found = reinterpret_cast<Stream*>(stream);
  return s.streams.count(found) != 0 ? found : nullptr;
}

// Runs a kernel's host implementation with its parameter values.
void runLaunch(const CapturedLaunch& launch);

// A launch's parameter bytes, from kernelParams or an `extra` buffer laid out
// as cuFuncGetParamInfo describes (api_launch.cpp).
CUresult packParams(const KernelDef& def, void** params, void** extra, std::vector<unsigned char>& bytes);

// cuCtxSynchronize: invalidates every capture in progress (api_graph.cpp).
CUresult synchronizeContext();

// The legacy and per-thread default streams are always valid. Needs the lock.
inline bool validStream(const State& s, CUstream stream) {
  return stream == nullptr || stream == CU_STREAM_LEGACY || stream == CU_STREAM_PER_THREAD ||
         s.streams.count(reinterpret_cast<const Stream*>(stream)) != 0;
}

// Work on the legacy default stream waits for every blocking stream: while
// one of those captures into a graph, the driver refuses such work and
// invalidates the capture (CUDA_ERROR_STREAM_CAPTURE_IMPLICIT), which is what
// a synchronous copy made while a program captures would do to it. Returns
// CUDA_SUCCESS when `stream` may run work now. Needs the lock.
CUresult legacyStreamMayRun(State& s, CUstream stream);

// Whether a copy may be queued on `stream` from this thread: a stream the
// program made belongs to the context current when it was made, and the
// driver checks a copy's pointers against the current context, so a copy
// on another context's stream fails (CUDA_ERROR_INVALID_VALUE).
bool streamOfCurrentContext(const State& s, CUstream stream);

// A live CUfunction or CUkernel of the given kind, or nullptr. Needs the lock.
inline const Launchable* findLaunchable(const State& s, const void* handle, Launchable::Kind kind) {
  const auto* launchable = static_cast<const Launchable*>(handle);
  return s.launchables.count(launchable) != 0 && launchable->kind == kind ? launchable : nullptr;
}

}  // namespace kcap_double
