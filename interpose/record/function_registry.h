// What the shim knows about the program's code: the modules and libraries it
// loaded and, for every launch handle, the kernel's name.
//
// Launch handles are CUfunctions, or CUkernels cast to CUfunction (cudart's
// lazy loading launches those), so both live in one map keyed by the handle's
// value. Names come from the lookup that produced the handle
// (cuModuleGetFunction, cuLibraryGetKernel, cuKernelGetFunction); a handle the
// shim never saw being made (cuLibraryEnumerateKernels, cuModuleEnumerate-
// Functions, ...) is named by asking the driver (cuFuncGetName, then
// cuKernelGetName) at its first launch.
//
// Thread-safe. A launch of a handle the thread launched before takes no lock
// (a per-thread cache, checked against codeGeneration()), another a shared
// lock; loads, lookups and unloads take it exclusively. The driver is never called with the lock held.
#pragma once

#include "hooks/hook_table.h"

#include <cuda.h>

#include <atomic>
#include <cstdint>
#include <memory>
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

class FunctionRegistry {
 public:
  // The process-wide registry. Never destroyed: other threads may still
  // launch while the process runs its exit handlers.
  static FunctionRegistry& instance();

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

  FunctionRegistry() = default;

  KernelName* intern(std::string_view name);  // needs the exclusive lock
  static void countLaunch(KernelName& kernel);
  void forgetOwnedBy(const void* owner);  // needs the exclusive lock

  mutable std::shared_mutex mutex_;
  std::unordered_map<std::string, std::unique_ptr<KernelName>> names_;
  std::unordered_map<const void*, Handle> handles_;
  std::unordered_map<const void*, Module> modules_;
  std::unordered_map<const void*, HookId> libraries_;
};

}  // namespace kcap
