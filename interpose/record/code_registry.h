// The one registry of code handles: what the shim knows about the program's
// modules, libraries and launch handles, for the observers (names, on every
// launch, recording or not) and for the recorder (globals, parameter
// layouts, owners, for the trace). Process-wide, one lock.
//
// Two views of the same handles, kept apart because they answer different
// questions:
//   - the program's (observers, always): the modules and libraries it loaded
//     and, for every launch handle, the kernel's name. Launch handles are
//     CUfunctions, or CUkernels cast to CUfunction (cudart's lazy loading
//     launches those), so both live in one map keyed by the handle's value.
//     Names come from the lookup that produced the handle (cuModuleGetFunction,
//     cuLibraryGetKernel, cuKernelGetFunction); a handle the shim never saw
//     being made (cuLibraryEnumerateKernels, cuModuleEnumerateFunctions, ...)
//     is named by asking the driver (cuFuncGetName, then cuKernelGetName) at
//     its first launch.
//   - the recording's (the recorder, while it records): what the trace
//     said of each load and bind (globals of a module or library, the
//     library of a module, each handle's owner, kind and parameter layout,
//     the names of kernels). It holds only what the recording saw, and a
//     new recording (a fork child's) starts it afresh.
//
// Thread-safe. A launch of a handle the thread launched before takes no lock
// (a per-thread cache, checked against codeGeneration()), another a shared
// lock; loads, lookups and unloads take it exclusively. The driver is never
// called with the lock held: callers ask the driver first and hand the
// answer in.
#pragma once

#include "core/pointer_scanner.h"
#include "hooks/hook_table.h"

#include <cuda.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace kcap {

// Bumped whenever what a launch handle stands for may have changed (its
// module unloaded, the handle bound again to something else). Per-thread
// caches of launch handles, on every launch's path, compare it instead of
// taking a lock.
std::uint64_t codeGeneration() noexcept;
void codeChanged() noexcept;

struct GlobalVariable {
  std::string name;
  uint64_t address = 0;
  uint64_t size = 0;
};

// What the recording knows about a launch handle.
struct FunctionInfo {
  uint64_t owner = 0;  // module or library it came from; 0: unknown
  bool isKernel = false;
  // nullptr: the driver could not say. Layouts are interned and never
  // freed (a few per kernel signature), so the pointer may be cached.
  const std::vector<ParamSlot>* layout = nullptr;
  // A function without a layout is loaded and asked again at its first
  // launch (Recorder::layoutAtLaunch), once: later launches take the answer.
  bool layoutAskedAtLaunch = false;
};

class CodeRegistry {
 public:
  // The process-wide registry. Never destroyed: other threads may still
  // launch while the process runs its exit handlers.
  static CodeRegistry& instance();

  // ---- the program's view (observers)

  // `source` is the API that loaded the code (cuModuleLoadData, ...).
  void moduleLoaded(CUmodule module, HookId source);
  void moduleUnloaded(CUmodule module);
  void libraryLoaded(CUlibrary library, HookId source);
  void libraryUnloaded(CUlibrary library);
  void libraryModule(CUmodule module, CUlibrary library);  // cuLibraryGetModule

  // Asks the driver for the name of a handle the shim did not see being
  // named (enumerated kernels, handles made before the shim was loaded).
  static std::string driverNameOf(CUfunction handle);

  void functionFound(CUfunction function, CUmodule module, const char* name);
  void kernelFound(CUkernel kernel, CUlibrary library, const char* name);
  void kernelFunction(CUfunction function, CUkernel kernel);  // cuKernelGetFunction

  // The name of the kernel a launch handle refers to; counts the launch
  // (with KCAP_STATS_FILE). The view stays valid for the life of the process.
  std::string_view launched(CUfunction handle);
  // The same name, uncached and not counted (the recorder caches it).
  std::string_view nameOf(CUfunction handle);

  struct LaunchCount {
    std::string name;
    std::uint64_t launches;
  };
  // Kernels launched at least once, by name.
  std::vector<LaunchCount> launchCounts() const;

  // ---- the recording's view (the recorder)

  // A recording starts: it knows nothing yet.
  void recordingStarted();
  // A load the recording saw succeed, with the globals the driver resolved.
  void recordedLoad(uint64_t handle, std::vector<GlobalVariable> globals);
  // An unload the recording saw succeed: forgets what came from `handle`.
  void recordedUnload(uint64_t handle);
  // cuKernelGetFunction: the recorded owner of `kernel` (0: unknown) and,
  // when `name` is empty, its recorded name.
  uint64_t recordedKernel(uint64_t kernel, std::string& name) const;
  // cuLibraryGetModule: `module` belongs to `library`.
  void recordedLibraryModule(uint64_t module, uint64_t library);
  // A launch handle bound; `kernelName` is kept for library kernels
  // (nullptr: not one).
  void recordedBind(uint64_t handle, const FunctionInfo& info, const std::string* kernelName);
  // What the recording knows of `handle`, if anything.
  std::optional<FunctionInfo> recordedFunction(uint64_t handle) const;
  // Keeps `info` for `handle` unless something is known already; returns
  // what is kept.
  FunctionInfo rememberFunction(uint64_t handle, FunctionInfo info);
  // The globals of the module or library `owner` (a library's module: the
  // library's).
  std::vector<GlobalVariable> globalsOf(uint64_t owner) const;
  // The globals of every module and library the recording saw loaded and
  // not unloaded (what a checkpoint holds besides allocations).
  std::vector<GlobalVariable> allGlobals() const;

  // In the child of fork(): the lock may have been held by a thread that
  // does not exist there; make it usable again (only this thread runs).
  void resetLocksAfterFork() noexcept;

 private:
  // One per distinct kernel name, never freed: launches hand out views of
  // `name`, and counts survive the unloading of the module.
  struct KernelName {
    explicit KernelName(std::string n) : name(std::move(n)) {}
    const std::string name;
    std::atomic<std::uint64_t> launches{0};
  };
  struct Handle {
    KernelName* name;
    const void* owner;  // module or library; nullptr: named by the driver
  };
  KernelName* lookup(CUfunction handle);
  void bind(const void* handle, Handle named);  // caller holds mutex_ exclusively
  struct Module {
    HookId source;
    const void* library;  // set for a library's module
  };

  CodeRegistry() = default;

  KernelName* intern(std::string_view name);  // needs the exclusive lock
  static void countLaunch(KernelName& kernel);
  void forgetOwnedBy(const void* owner);  // needs the exclusive lock

  mutable std::shared_mutex mutex_;
  std::unordered_map<std::string, std::unique_ptr<KernelName>> names_;
  std::unordered_map<const void*, Handle> handles_;
  std::unordered_map<const void*, Module> modules_;
  std::unordered_map<const void*, HookId> libraries_;

  // The recording's view.
  std::unordered_map<uint64_t, std::vector<GlobalVariable>> globals_;  // module or library -> globals
  std::unordered_map<uint64_t, uint64_t> libraryOfModule_;             // cuLibraryGetModule
  std::unordered_map<uint64_t, FunctionInfo> functions_;
  std::unordered_map<uint64_t, std::string> kernelNames_;  // CUkernel -> name (cuKernelGetFunction)
};

}  // namespace kcap
