#include "function_registry.h"

#include "real_driver.h"
#include "stats.h"

#include <algorithm>
#include <mutex>
#include <new>

namespace kcap {
namespace {

constexpr std::string_view kUnknownName = "<unknown>";

}  // namespace

// cuFuncGetName rejects a CUkernel cast to CUfunction, cuKernelGetName takes it.
std::string FunctionRegistry::driver_name_of(CUfunction handle) {
  using FuncGetName = CUresult (*)(const char**, CUfunction);
  using KernelGetName = CUresult (*)(const char**, CUkernel);
  static const auto func_get_name = reinterpret_cast<FuncGetName>(real::driver_symbol("cuFuncGetName"));
  static const auto kernel_get_name = reinterpret_cast<KernelGetName>(real::driver_symbol("cuKernelGetName"));

  const char* name = nullptr;
  if (func_get_name != nullptr && func_get_name(&name, handle) == CUDA_SUCCESS && name != nullptr) {
    return name;
  }
  name = nullptr;
  if (kernel_get_name != nullptr && kernel_get_name(&name, reinterpret_cast<CUkernel>(handle)) == CUDA_SUCCESS &&
      name != nullptr) {
    return name;
  }
  return std::string(kUnknownName);
}

FunctionRegistry& FunctionRegistry::instance() {
  static FunctionRegistry* const registry = new FunctionRegistry;
  return *registry;
}

namespace {
std::atomic<std::uint64_t> g_codeGeneration{1};
}  // namespace

std::uint64_t codeGeneration() noexcept { return g_codeGeneration.load(std::memory_order_acquire); }

void codeChanged() noexcept { g_codeGeneration.fetch_add(1, std::memory_order_acq_rel); }

FunctionRegistry::KernelName* FunctionRegistry::intern(std::string_view name) {
  auto [it, inserted] = names_.try_emplace(std::string(name));
  if (inserted) {
    it->second = std::make_unique<KernelName>(it->first);
  }
  return it->second.get();
}

void FunctionRegistry::forget_owned_by(const void* owner) {
  // Handles the driver named for us have no known owner; any unload may
  // have invalidated them, and the driver may reuse their values.
  std::erase_if(handles_,
                [owner](const auto& entry) { return entry.second.owner == owner || entry.second.owner == nullptr; });
  codeChanged();
}

void FunctionRegistry::module_loaded(CUmodule module, HookId source) {
  std::unique_lock lock(mutex_);
  modules_[module] = Module{source, nullptr};
}

void FunctionRegistry::module_unloaded(CUmodule module) {
  std::unique_lock lock(mutex_);
  modules_.erase(module);
  forget_owned_by(module);
}

void FunctionRegistry::library_loaded(CUlibrary library, HookId source) {
  std::unique_lock lock(mutex_);
  libraries_[library] = source;
}

void FunctionRegistry::library_unloaded(CUlibrary library) {
  std::unique_lock lock(mutex_);
  libraries_.erase(library);
  for (auto it = modules_.begin(); it != modules_.end();) {
    if (it->second.library == library) {
      forget_owned_by(it->first);
      it = modules_.erase(it);
    } else {
      ++it;
    }
  }
  forget_owned_by(library);
}

void FunctionRegistry::library_module(CUmodule module, CUlibrary library) {
  std::unique_lock lock(mutex_);
  const auto it = libraries_.find(library);
  const HookId source = it != libraries_.end() ? it->second : HookId::cuLibraryGetModule_hook;
  modules_[module] = Module{source, library};
}

void FunctionRegistry::function_found(CUfunction function, CUmodule module, const char* name) {
  std::unique_lock lock(mutex_);
  bind(function, Handle{intern(name != nullptr ? name : kUnknownName), module});
}

void FunctionRegistry::kernel_found(CUkernel kernel, CUlibrary library, const char* name) {
  std::unique_lock lock(mutex_);
  bind(kernel, Handle{intern(name != nullptr ? name : kUnknownName), library});
}

void FunctionRegistry::kernel_function(CUfunction function, CUkernel kernel) {
  std::unique_lock lock(mutex_);
  const auto it = handles_.find(kernel);
  if (it != handles_.end()) {
    bind(function, it->second);
  }
}

void FunctionRegistry::bind(const void* handle, Handle named) {
  const auto [it, inserted] = handles_.try_emplace(handle, named);
  if (!inserted && (it->second.name != named.name || it->second.owner != named.owner)) {
    it->second = named;
    codeChanged();
  }
}

void FunctionRegistry::count_launch(KernelName& kernel) {
  if (counting()) {  // only for KCAP_STATS_FILE, see stats.h
    kernel.launches.fetch_add(1, std::memory_order_relaxed);
  }
}

std::string_view FunctionRegistry::launched(CUfunction handle) {
  // Most launches repeat a handle the thread launched before: a few
  // entries per thread, valid while the code generation stays the same.
  struct Cached {
    CUfunction handle;
    std::uint64_t generation;
    KernelName* name;
  };
  constexpr size_t kEntries = 16;
  thread_local Cached t_cache[kEntries] = {};  // trivially destructible: used until the thread is gone
  Cached& cached = t_cache[(reinterpret_cast<std::uintptr_t>(handle) >> 4) % kEntries];
  const std::uint64_t generation = codeGeneration();
  if (cached.handle == handle && cached.generation == generation && cached.name != nullptr) {
    count_launch(*cached.name);
    return cached.name->name;
  }
  KernelName* name = lookup(handle);
  cached = {handle, generation, name};
  count_launch(*name);
  return name->name;
}

std::string_view FunctionRegistry::name_of(CUfunction handle) { return lookup(handle)->name; }

FunctionRegistry::KernelName* FunctionRegistry::lookup(CUfunction handle) {
  {
    std::shared_lock lock(mutex_);
    const auto it = handles_.find(handle);
    if (it != handles_.end()) {
      return it->second.name;
    }
  }
  const std::string name = driver_name_of(handle);  // outside the lock: a driver call
  std::unique_lock lock(mutex_);
  return handles_.try_emplace(handle, Handle{intern(name), nullptr}).first->second.name;
}

std::vector<FunctionRegistry::LaunchCount> FunctionRegistry::launch_counts() const {
  std::vector<LaunchCount> counts;
  {
    std::shared_lock lock(mutex_);
    for (const auto& [name, kernel] : names_) {
      const std::uint64_t launches = kernel->launches.load(std::memory_order_relaxed);
      if (launches != 0) {
        counts.push_back({name, launches});
      }
    }
  }
  std::sort(counts.begin(), counts.end(), [](const LaunchCount& a, const LaunchCount& b) { return a.name < b.name; });
  return counts;
}

void FunctionRegistry::reset_locks_after_fork() noexcept { new (&mutex_) std::shared_mutex; }

}  // namespace kcap
