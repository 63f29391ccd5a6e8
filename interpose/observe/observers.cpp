// The observers of code and launches: they keep the code registry
// current, so that every launch can be named, and hand each call to the
// Recorder when the shim records (KCAP_OUTPUT).
#include "observe/observer.h"

#include "hooks/shim_log.h"
#include "hooks/stats.h"
#include "record/code_registry.h"
#include "record/recorder.h"
#include "timing/cupti_timing.h"

#include <atomic>
#include <memory>
#include <vector>

namespace kcap {
namespace {

std::atomic<bool> g_observing{true};

CodeRegistry& registry() { return CodeRegistry::instance(); }

uint64_t handle(const void* pointer) { return reinterpret_cast<uint64_t>(pointer); }

template <class T>
uint64_t made(CUresult result, T* out) {
  return result == CUDA_SUCCESS && out != nullptr ? handle(*out) : 0;
}

void recordLoad(ModuleLoadCall call) {
  if (Recorder* recorder = Recorder::active()) {
    recorder->moduleLoaded(call);
  }
}

void recordBind(schema::BindApi api, CUresult result, uint64_t made, bool isKernel, uint64_t owner, const char* name) {
  if (Recorder* recorder = Recorder::active()) {
    recorder->functionBound(api, result, made, isKernel, owner, name);
  }
}

void recordAttribute(schema::AttributeApi api, CUresult result, uint64_t function, int32_t attribute, int64_t value,
                     int32_t device) {
  if (Recorder* recorder = Recorder::active()) {
    recorder->functionAttribute(api, result, function, attribute, value, device);
  }
}

// Launches between before() and after(), innermost last (a thread has one,
// unless a driver calls back into a launch).
// Launches in progress on this thread are t_launches[0, t_depth); the
// entries past it are spare, kept with their buffers for the next launches
// (no allocation per launch).
thread_local std::vector<PendingLaunch> t_launches;
thread_local size_t t_depth = 0;

PendingLaunch& nextLaunchSlot() {
  if (t_depth == t_launches.size()) {
    t_launches.emplace_back();
  }
  PendingLaunch& slot = t_launches[t_depth];
  slot.reset();
  return slot;
}

void launchBefore(const LaunchCall& call) {
  PendingLaunch& pending = nextLaunchSlot();
  if (counting()) {
    registry().launched(call.function);  // the per-kernel count (KCAP_STATS_FILE)
  }
  // The recorder names the kernel itself (Recorder::launchTarget): a
  // pass-through shim does not, it is on every launch's path.
  Recorder* recorder = Recorder::active();
  if (recorder != nullptr && !recorder->launchStarting(call, pending)) {
    pending.recorder = nullptr;
  }
  ++t_depth;  // last but one: launchAfter runs only when this returned
  // Last before the real call (nothing after it may fail): the CUPTI
  // correlation id that ties the kernel's duration to this launch.
  if (pending.recorder != nullptr && pending.executes) {
    pending.timed = timing::enterLaunch(pending.launchIndex);
  }
}

void launchAfter(CUresult result) {
  if (t_depth == 0) {
    return;
  }
  PendingLaunch& pending = t_launches[--t_depth];
  if (pending.recorder != nullptr && pending.timed) {
    timing::leaveLaunch(result);  // first: whatever happens to the recording
  }
  if (pending.recorder != nullptr && pending.recorder == Recorder::current()) {
    pending.recorder->launchFinished(pending, result);
  }
}

}  // namespace

void launchReturned(CUresult result) noexcept {
  // The innermost launch in progress is the one that returned. Whatever
  // happens to the recording: the writer holds the event and waits.
  if (t_depth != 0 && t_launches[t_depth - 1].outcome != nullptr) {
    t_launches[t_depth - 1].outcome->returned(result);
    t_launches[t_depth - 1].outcome = nullptr;
  }
}

void abandonLaunchesInProgress() noexcept {
  for (size_t i = 0; i < t_depth && i < t_launches.size(); ++i) {
    if (t_launches[i].outcome != nullptr) {
      t_launches[i].outcome->neverReturned();
    }
  }
}

bool observing() noexcept { return g_observing.load(std::memory_order_relaxed); }

void stopObserving(const char* why) noexcept {
  if (g_observing.exchange(false, std::memory_order_relaxed)) {
    // Work that was in flight while the recording ended (at exit) fails
    // on the closed writer: nothing to report then.
    if (!Recorder::endedCurrent()) {
      logMessage("internal error (%s); recording stops, calls pass through unchanged", why != nullptr ? why : "?");
    }
    Recorder::failCurrent(why);
  }
}

// ---- code loading ---------------------------------------------------------------

void Observer<HookId::cuModuleLoad_hook>::after(HookId id, CUresult result, CUmodule* module, const char* path) {
  if (result == CUDA_SUCCESS && module != nullptr) {
    registry().moduleLoaded(*module, id);
  }
  recordLoad({.api = schema::LoadApi::MODULE_LOAD, .result = result, .handle = made(result, module), .path = path});
}

void Observer<HookId::cuModuleLoadData_hook>::after(HookId id, CUresult result, CUmodule* module, const void* image) {
  if (result == CUDA_SUCCESS && module != nullptr) {
    registry().moduleLoaded(*module, id);
  }
  recordLoad(
      {.api = schema::LoadApi::MODULE_LOAD_DATA, .result = result, .handle = made(result, module), .image = image});
}

void Observer<HookId::cuModuleLoadDataEx_hook>::after(HookId id, CUresult result, CUmodule* module, const void* image,
                                                      unsigned count, CUjit_option* options, void** values) {
  if (result == CUDA_SUCCESS && module != nullptr) {
    registry().moduleLoaded(*module, id);
  }
  recordLoad({.api = schema::LoadApi::MODULE_LOAD_DATA_EX,
              .result = result,
              .handle = made(result, module),
              .image = image,
              .jitOptionCount = count,
              .jitOptions = options,
              .jitValues = values});
}

void Observer<HookId::cuModuleLoadFatBinary_hook>::after(HookId id, CUresult result, CUmodule* module,
                                                         const void* fatbin) {
  if (result == CUDA_SUCCESS && module != nullptr) {
    registry().moduleLoaded(*module, id);
  }
  recordLoad({.api = schema::LoadApi::MODULE_LOAD_FAT_BINARY,
              .result = result,
              .handle = made(result, module),
              .image = fatbin});
}

void Observer<HookId::cuModuleUnload_hook>::after(HookId, CUresult result, CUmodule module) {
  if (result == CUDA_SUCCESS) {
    registry().moduleUnloaded(module);
  }
  if (Recorder* recorder = Recorder::active()) {
    recorder->moduleUnloaded(handle(module), false, result);
  }
}

void Observer<HookId::cuModuleGetFunction_hook>::after(HookId, CUresult result, CUfunction* function, CUmodule module,
                                                       const char* name) {
  if (result == CUDA_SUCCESS && function != nullptr) {
    registry().functionFound(*function, module, name);
  }
  recordBind(schema::BindApi::MODULE_GET_FUNCTION, result, made(result, function), false, handle(module), name);
}

// Enumerated handles come without names: each is named by the driver, and
// bound like one found by name.
void Observer<HookId::cuModuleEnumerateFunctions_hook>::after(HookId, CUresult result, CUfunction* functions,
                                                              unsigned count, CUmodule module) {
  if (result != CUDA_SUCCESS || functions == nullptr) {
    return;
  }
  for (unsigned i = 0; i < count; ++i) {
    const std::string name = CodeRegistry::driverNameOf(functions[i]);
    registry().functionFound(functions[i], module, name.c_str());
    recordBind(schema::BindApi::MODULE_ENUMERATE_FUNCTIONS, result, handle(functions[i]), false, handle(module),
               name.c_str());
  }
}

void Observer<HookId::cuLibraryEnumerateKernels_hook>::after(HookId, CUresult result, CUkernel* kernels, unsigned count,
                                                             CUlibrary library) {
  if (result != CUDA_SUCCESS || kernels == nullptr) {
    return;
  }
  for (unsigned i = 0; i < count; ++i) {
    const std::string name = CodeRegistry::driverNameOf(reinterpret_cast<CUfunction>(kernels[i]));
    registry().kernelFound(kernels[i], library, name.c_str());
    recordBind(schema::BindApi::LIBRARY_ENUMERATE_KERNELS, result, handle(kernels[i]), true, handle(library),
               name.c_str());
  }
}

void Observer<HookId::cuLibraryLoadData_hook>::after(HookId id, CUresult result, CUlibrary* library, const void* code,
                                                     CUjit_option* jitOptions, void** jitValues, unsigned jitCount,
                                                     CUlibraryOption*, void**, unsigned) {
  if (result == CUDA_SUCCESS && library != nullptr) {
    registry().libraryLoaded(*library, id);
  }
  recordLoad({.api = schema::LoadApi::LIBRARY_LOAD_DATA,
              .result = result,
              .handle = made(result, library),
              .isLibrary = true,
              .image = code,
              .jitOptionCount = jitCount,
              .jitOptions = jitOptions,
              .jitValues = jitValues});
}

void Observer<HookId::cuLibraryLoadFromFile_hook>::after(HookId id, CUresult result, CUlibrary* library,
                                                         const char* path, CUjit_option* jitOptions, void** jitValues,
                                                         unsigned jitCount, CUlibraryOption*, void**, unsigned) {
  if (result == CUDA_SUCCESS && library != nullptr) {
    registry().libraryLoaded(*library, id);
  }
  recordLoad({.api = schema::LoadApi::LIBRARY_LOAD_FROM_FILE,
              .result = result,
              .handle = made(result, library),
              .isLibrary = true,
              .path = path,
              .jitOptionCount = jitCount,
              .jitOptions = jitOptions,
              .jitValues = jitValues});
}

void Observer<HookId::cuLibraryUnload_hook>::after(HookId, CUresult result, CUlibrary library) {
  if (result == CUDA_SUCCESS) {
    registry().libraryUnloaded(library);
  }
  if (Recorder* recorder = Recorder::active()) {
    recorder->moduleUnloaded(handle(library), true, result);
  }
}

void Observer<HookId::cuLibraryGetKernel_hook>::after(HookId, CUresult result, CUkernel* kernel, CUlibrary library,
                                                      const char* name) {
  if (result == CUDA_SUCCESS && kernel != nullptr) {
    registry().kernelFound(*kernel, library, name);
  }
  recordBind(schema::BindApi::LIBRARY_GET_KERNEL, result, made(result, kernel), true, handle(library), name);
}

void Observer<HookId::cuLibraryGetModule_hook>::after(HookId, CUresult result, CUmodule* module, CUlibrary library) {
  if (result == CUDA_SUCCESS && module != nullptr) {
    registry().libraryModule(*module, library);
  }
  recordBind(schema::BindApi::LIBRARY_GET_MODULE, result, made(result, module), false, handle(library), nullptr);
}

void Observer<HookId::cuKernelGetFunction_hook>::after(HookId, CUresult result, CUfunction* function, CUkernel kernel) {
  if (result == CUDA_SUCCESS && function != nullptr) {
    registry().kernelFunction(*function, kernel);
  }
  recordBind(schema::BindApi::KERNEL_GET_FUNCTION, result, made(result, function), false, handle(kernel), nullptr);
}

void Observer<HookId::cuFuncSetAttribute_hook>::after(HookId, CUresult result, CUfunction function,
                                                      CUfunction_attribute attribute, int value) {
  recordAttribute(schema::AttributeApi::FUNC_SET_ATTRIBUTE, result, handle(function), attribute, value, -1);
}

void Observer<HookId::cuKernelSetAttribute_hook>::after(HookId, CUresult result, CUfunction_attribute attribute,
                                                        int value, CUkernel kernel, CUdevice device) {
  recordAttribute(schema::AttributeApi::KERNEL_SET_ATTRIBUTE, result, handle(kernel), attribute, value, device);
}

void Observer<HookId::cuFuncSetCacheConfig_hook>::after(HookId, CUresult result, CUfunction function,
                                                        CUfunc_cache config) {
  recordAttribute(schema::AttributeApi::FUNC_SET_CACHE_CONFIG, result, handle(function), config, config, -1);
}

// ---- launches -------------------------------------------------------------------

void Observer<HookId::cuLaunchKernel_hook>::before(HookId id, CUfunction f, unsigned gridX, unsigned gridY,
                                                   unsigned gridZ, unsigned blockX, unsigned blockY, unsigned blockZ,
                                                   unsigned sharedBytes, CUstream stream, void** params, void** extra) {
  launchBefore({.api = schema::LaunchApi::LAUNCH_KERNEL,
                .perThreadStream = spec(id).perThread,
                .function = f,
                .grid = {gridX, gridY, gridZ},
                .block = {blockX, blockY, blockZ},
                .sharedMemBytes = sharedBytes,
                .stream = stream,
                .kernelParams = params,
                .extra = extra});
}

void Observer<HookId::cuLaunchKernel_hook>::after(HookId, CUresult result, CUfunction, unsigned, unsigned, unsigned,
                                                  unsigned, unsigned, unsigned, unsigned, CUstream, void**, void**) {
  launchAfter(result);
}

void Observer<HookId::cuLaunchKernelEx_hook>::before(HookId id, const CUlaunchConfig* config, CUfunction f,
                                                     void** params, void** extra) {
  if (config == nullptr) {
    if (counting()) {
      registry().launched(f);  // counted as a launch of f, as the stats have always done
    }
    nextLaunchSlot();  // the driver refuses it; nothing to record
    ++t_depth;
    return;
  }
  launchBefore({.api = schema::LaunchApi::LAUNCH_KERNEL_EX,
                .perThreadStream = spec(id).perThread,
                .function = f,
                .grid = {config->gridDimX, config->gridDimY, config->gridDimZ},
                .block = {config->blockDimX, config->blockDimY, config->blockDimZ},
                .sharedMemBytes = config->sharedMemBytes,
                .stream = config->hStream,
                .kernelParams = params,
                .extra = extra,
                .attributes = config->attrs,
                .attributeCount = config->numAttrs});
}

void Observer<HookId::cuLaunchKernelEx_hook>::after(HookId, CUresult result, const CUlaunchConfig*, CUfunction, void**,
                                                    void**) {
  launchAfter(result);
}

void Observer<HookId::cuLaunchCooperativeKernel_hook>::before(HookId id, CUfunction f, unsigned gridX, unsigned gridY,
                                                              unsigned gridZ, unsigned blockX, unsigned blockY,
                                                              unsigned blockZ, unsigned sharedBytes, CUstream stream,
                                                              void** params) {
  launchBefore({.api = schema::LaunchApi::LAUNCH_COOPERATIVE_KERNEL,
                .perThreadStream = spec(id).perThread,
                .function = f,
                .grid = {gridX, gridY, gridZ},
                .block = {blockX, blockY, blockZ},
                .sharedMemBytes = sharedBytes,
                .stream = stream,
                .kernelParams = params});
}

void Observer<HookId::cuLaunchCooperativeKernel_hook>::after(HookId, CUresult result, CUfunction, unsigned, unsigned,
                                                             unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                                                             void**) {
  launchAfter(result);
}

namespace {
thread_local PendingGraphLaunch t_graphLaunch;
}  // namespace

void Observer<HookId::cuGraphLaunch_hook>::before(HookId id, CUgraphExec graph, CUstream stream) {
  PendingGraphLaunch& pending = t_graphLaunch;
  pending = PendingGraphLaunch{};
  if (Recorder* recorder = Recorder::active()) {
    if (!recorder->graphLaunchStarting({.exec = graph, .stream = stream, .perThreadStream = spec(id).perThread},
                                       pending)) {
      pending.recorder = nullptr;
    }
  }
}

void Observer<HookId::cuGraphLaunch_hook>::after(HookId, CUresult result, CUgraphExec, CUstream) {
  PendingGraphLaunch& pending = t_graphLaunch;
  if (pending.recorder != nullptr && pending.recorder == Recorder::current()) {
    pending.recorder->graphLaunchFinished(pending, result);
  }
  pending = PendingGraphLaunch{};
}

}  // namespace kcap
