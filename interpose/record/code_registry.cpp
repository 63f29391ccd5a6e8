#include "record/code_registry.h"

#include "hooks/real_driver.h"
#include "hooks/stats.h"

#include <algorithm>
#include <mutex>
#include <new>

namespace kcap {
namespace {

constexpr std::string_view kUnknownName = "<unknown>";

}  // namespace

// cuFuncGetName rejects a CUkernel cast to CUfunction, cuKernelGetName takes it.
std::string CodeRegistry::driverNameOf(CUfunction handle) {
  using FuncGetName = CUresult (*)(const char**, CUfunction);
  using KernelGetName = CUresult (*)(const char**, CUkernel);
  static const auto funcGetName = reinterpret_cast<FuncGetName>(real::driverSymbol("cuFuncGetName"));
  static const auto kernelGetName = reinterpret_cast<KernelGetName>(real::driverSymbol("cuKernelGetName"));

  const char* name = nullptr;
  if (funcGetName != nullptr && funcGetName(&name, handle) == CUDA_SUCCESS && name != nullptr) {
    return name;
  }
  name = nullptr;
  if (kernelGetName != nullptr && kernelGetName(&name, reinterpret_cast<CUkernel>(handle)) == CUDA_SUCCESS &&
      name != nullptr) {
    return name;
  }
  return std::string(kUnknownName);
}

CodeRegistry& CodeRegistry::instance() {
  static CodeRegistry* const registry = new CodeRegistry;
  return *registry;
}

namespace {
std::atomic<std::uint64_t> g_codeGeneration{1};
}  // namespace

std::uint64_t codeGeneration() noexcept { return g_codeGeneration.load(std::memory_order_acquire); }

void codeChanged() noexcept { g_codeGeneration.fetch_add(1, std::memory_order_acq_rel); }

CodeRegistry::KernelName* CodeRegistry::intern(std::string_view name) {
  auto [it, inserted] = names_.try_emplace(std::string(name));
  if (inserted) {
    it->second = std::make_unique<KernelName>(it->first);
  }
  return it->second.get();
}

void CodeRegistry::forgetOwnedBy(const void* owner) {
  // Handles the driver named for us have no known owner; any unload may
  // have invalidated them, and the driver may reuse their values.
  std::erase_if(handles_,
                [owner](const auto& entry) { return entry.second.owner == owner || entry.second.owner == nullptr; });
  codeChanged();
}

void CodeRegistry::moduleLoaded(CUmodule module, HookId source) {
  std::unique_lock lock(mutex_);
  modules_[module] = Module{source, nullptr};
}

void CodeRegistry::moduleUnloaded(CUmodule module) {
  std::unique_lock lock(mutex_);
  modules_.erase(module);
  forgetOwnedBy(module);
}

void CodeRegistry::libraryLoaded(CUlibrary library, HookId source) {
  std::unique_lock lock(mutex_);
  libraries_[library] = source;
}

void CodeRegistry::libraryUnloaded(CUlibrary library) {
  std::unique_lock lock(mutex_);
  libraries_.erase(library);
  for (auto it = modules_.begin(); it != modules_.end();) {
    if (it->second.library == library) {
      forgetOwnedBy(it->first);
      it = modules_.erase(it);
    } else {
      ++it;
    }
  }
  forgetOwnedBy(library);
}

void CodeRegistry::libraryModule(CUmodule module, CUlibrary library) {
  std::unique_lock lock(mutex_);
  const auto it = libraries_.find(library);
  const HookId source = it != libraries_.end() ? it->second : HookId::cuLibraryGetModule_hook;
  modules_[module] = Module{source, library};
}

void CodeRegistry::functionFound(CUfunction function, CUmodule module, const char* name) {
  std::unique_lock lock(mutex_);
  bind(function, Handle{intern(name != nullptr ? name : kUnknownName), module});
}

void CodeRegistry::kernelFound(CUkernel kernel, CUlibrary library, const char* name) {
  std::unique_lock lock(mutex_);
  bind(kernel, Handle{intern(name != nullptr ? name : kUnknownName), library});
}

void CodeRegistry::kernelFunction(CUfunction function, CUkernel kernel) {
  std::unique_lock lock(mutex_);
  const auto it = handles_.find(kernel);
  if (it != handles_.end()) {
    bind(function, it->second);
  }
}

void CodeRegistry::bind(const void* handle, Handle named) {
  const auto [it, inserted] = handles_.try_emplace(handle, named);
  if (!inserted && (it->second.name != named.name || it->second.owner != named.owner)) {
    it->second = named;
    codeChanged();
  }
}

void CodeRegistry::countLaunch(KernelName& kernel) {
  if (counting()) {  // only for KCAP_STATS_FILE, see stats.h
    kernel.launches.fetch_add(1, std::memory_order_relaxed);
  }
}

std::string_view CodeRegistry::launched(CUfunction handle) {
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
    countLaunch(*cached.name);
    return cached.name->name;
  }
  KernelName* name = lookup(handle);
  cached = {handle, generation, name};
  countLaunch(*name);
  return name->name;
}

std::string_view CodeRegistry::nameOf(CUfunction handle) { return lookup(handle)->name; }

CodeRegistry::KernelName* CodeRegistry::lookup(CUfunction handle) {
  {
    std::shared_lock lock(mutex_);
    const auto it = handles_.find(handle);
    if (it != handles_.end()) {
      return it->second.name;
    }
  }
  const std::string name = driverNameOf(handle);  // outside the lock: a driver call
  std::unique_lock lock(mutex_);
  return handles_.try_emplace(handle, Handle{intern(name), nullptr}).first->second.name;
}

std::vector<CodeRegistry::LaunchCount> CodeRegistry::launchCounts() const {
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

// ---- the recording's view ---------------------------------------------------------

void CodeRegistry::recordingStarted() {
  std::unique_lock lock(mutex_);
  globals_.clear();
  libraryOfModule_.clear();
  functions_.clear();
  kernelNames_.clear();
}

void CodeRegistry::recordedLoad(uint64_t handle, std::vector<GlobalVariable> globals) {
  std::unique_lock lock(mutex_);
  globals_[handle] = std::move(globals);
}

void CodeRegistry::recordedUnload(uint64_t handle) {
  {
    std::unique_lock lock(mutex_);
    globals_.erase(handle);
    std::erase_if(libraryOfModule_, [&](const auto& entry) { return entry.first == handle || entry.second == handle; });
    std::erase_if(functions_, [&](const auto& entry) { return entry.second.owner == handle; });
    std::erase_if(kernelNames_, [&](const auto& entry) { return functions_.count(entry.first) == 0; });
  }
  codeChanged();
}

uint64_t CodeRegistry::recordedKernel(uint64_t kernel, std::string& name) const {
  std::shared_lock lock(mutex_);
  const auto it = functions_.find(kernel);
  if (const auto named = kernelNames_.find(kernel); named != kernelNames_.end() && name.empty()) {
    name = named->second;
  }
  return it != functions_.end() ? it->second.owner : 0;
}

void CodeRegistry::recordedLibraryModule(uint64_t module, uint64_t library) {
  std::unique_lock lock(mutex_);
  libraryOfModule_[module] = library;
}

void CodeRegistry::recordedBind(uint64_t handle, const FunctionInfo& info, const std::string* kernelName) {
  std::unique_lock lock(mutex_);
  if (kernelName != nullptr) {
    kernelNames_[handle] = *kernelName;
  }
  const auto [it, inserted] = functions_.try_emplace(handle, info);
  if (!inserted && (it->second.owner != info.owner || it->second.isKernel != info.isKernel ||
                    it->second.layout != info.layout || it->second.layoutAskedAtLaunch != info.layoutAskedAtLaunch)) {
    it->second = info;
    codeChanged();
  }
}

std::optional<FunctionInfo> CodeRegistry::recordedFunction(uint64_t handle) const {
  std::shared_lock lock(mutex_);
  const auto it = functions_.find(handle);
  if (it == functions_.end()) {
    return std::nullopt;
  }
  return it->second;
}

FunctionInfo CodeRegistry::rememberFunction(uint64_t handle, FunctionInfo info) {
  std::unique_lock lock(mutex_);
  return functions_.try_emplace(handle, std::move(info)).first->second;
}

std::vector<GlobalVariable> CodeRegistry::globalsOf(uint64_t owner) const {
  std::shared_lock lock(mutex_);
  if (const auto library = libraryOfModule_.find(owner); library != libraryOfModule_.end()) {
    owner = library->second;
  }
  const auto it = globals_.find(owner);
  return it != globals_.end() ? it->second : std::vector<GlobalVariable>{};
}

std::vector<GlobalVariable> CodeRegistry::allGlobals() const {
  std::shared_lock lock(mutex_);
  std::vector<GlobalVariable> all;
  for (const auto& [owner, globals] : globals_) {
    all.insert(all.end(), globals.begin(), globals.end());
  }
  return all;
}

void CodeRegistry::resetLocksAfterFork() noexcept { new (&mutex_) std::shared_mutex; }

}  // namespace kcap
