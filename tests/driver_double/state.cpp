#include "state.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace kcap_double {

void* Module::find(std::string_view name) const {
  const auto it = globals.find(name);
  return it != globals.end() ? it->second : nullptr;
}

State& state() {
  static State* const instance = new State;  // outlives exit handlers
  return *instance;
}

Context*& currentContext() {
  thread_local Context* current = nullptr;
  return current;
}

CUdeviceptr State::allocate(std::size_t bytes) {
  constexpr std::size_t kAlignment = 256;
  if (bytes > SIZE_MAX - kAlignment) {
    return 0;
  }
  const std::size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  if (!takeDeviceMemory(rounded)) {
    return 0;
  }
  void* memory = std::aligned_alloc(kAlignment, rounded);
  if (memory == nullptr) {
    giveDeviceMemory(rounded);
    return 0;
  }
  // A real driver hands memory out again without clearing it (what an
  // earlier allocation left); KCAP_DOUBLE_DIRTY_ALLOCATIONS models that
  // with bytes of 0x3f (floats of about 0.75).
  static const bool dirty = std::getenv("KCAP_DOUBLE_DIRTY_ALLOCATIONS") != nullptr;
  std::memset(memory, dirty ? 0x3f : 0, rounded);
  const auto base = reinterpret_cast<std::uintptr_t>(memory);
  allocations[base] = bytes;
  return base;
}

bool State::release(CUdeviceptr base) {
  const auto it = allocations.find(base);
  if (it == allocations.end() || ipcMappings.count(base) != 0) {  // a mapping is closed, not freed
    return false;
  }
  poolBlocks.erase(base);
  // An allocation node's address outlives the allocation (graph.h).
  if (graphReserved.count(it->first) == 0) {
    std::free(reinterpret_cast<void*>(it->first));
  }
  giveDeviceMemory((it->second + 255) / 256 * 256);
  allocations.erase(it);
  return true;
}

CUdeviceptr State::allocateFromPool(std::size_t bytes) {
  const std::size_t rounded = (bytes + 255) / 256 * 256;
  if (rounded < bytes) return 0;
  const auto it = poolFree.find(rounded);
  if (it == poolFree.end()) {
    const CUdeviceptr base = allocate(bytes);
    if (base != 0) poolBlocks.insert(base);
    return base;
  }
  const std::uintptr_t base = it->second;
  poolFree.erase(it);
  if (!takeDeviceMemory(rounded)) {
    poolFree.emplace(rounded, base);
    return 0;
  }
  allocations[base] = bytes;
  return base;
}

bool State::releaseToPool(CUdeviceptr base) {
  const auto it = allocations.find(base);
  if (it == allocations.end() || poolBlocks.count(base) == 0 || graphReserved.count(base) != 0) {
    return release(base);
  }
  const std::size_t rounded = (it->second + 255) / 256 * 256;
  giveDeviceMemory(rounded);
  allocations.erase(it);
  poolFree.emplace(rounded, base);
  return true;
}

int deviceCount() {
  static const int count = [] {
    const char* value = std::getenv("KCAP_DOUBLE_DEVICES");
    const long n = value != nullptr ? std::strtol(value, nullptr, 10) : 1;
    return n >= 1 && n <= 8 ? static_cast<int>(n) : 1;
  }();
  return count;
}

bool knownDevice(int device) { return device >= 0 && device < deviceCount(); }

bool State::takeDeviceMemory(std::size_t bytes) {
  static const std::size_t capacity = [] {
    const char* value = std::getenv("KCAP_DOUBLE_DEVICE_MEMORY");
    return value != nullptr ? static_cast<std::size_t>(std::strtoull(value, nullptr, 10)) : SIZE_MAX;
  }();
  if (bytes > capacity - deviceMemoryInUse) {
    return false;
  }
  deviceMemoryInUse += bytes;
  return true;
}

void State::giveDeviceMemory(std::size_t bytes) { deviceMemoryInUse -= bytes; }

bool State::rangeOf(CUdeviceptr address, CUdeviceptr& base, std::size_t& size) const {
  auto it = allocations.upper_bound(address);
  if (it == allocations.begin()) {
    return false;
  }
  --it;
  if (address >= it->first + it->second) {
    return false;
  }
  base = it->first;
  size = it->second;
  return true;
}

bool State::contains(CUdeviceptr address, std::size_t bytes) const {
  // Allocations that adjoin without a gap (VMM mappings side by side in a
  // reservation) hold a range together.
  for (CUdeviceptr at = address; at < address + bytes;) {
    CUdeviceptr base = 0;
    std::size_t size = 0;
    if (!rangeOf(at, base, size)) {
      return false;
    }
    at = base + size;
  }
  return true;
}

CUresult State::loadModule(const void* image, Module*& module) {
  auto loaded = std::make_unique<Module>();
  if (!inspectImage(image, loaded->contents)) {
    return CUDA_ERROR_INVALID_IMAGE;
  }
  for (const GlobalDef* global : loaded->contents.globals) {
    const CUdeviceptr address = allocate(global->size);
    if (address == 0) {
      for (const auto& [name, allocated] : loaded->globals) {
        release(reinterpret_cast<CUdeviceptr>(allocated));
      }
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    loaded->globals.emplace(std::string(global->name), reinterpret_cast<void*>(address));
  }
  module = loaded.release();
  modules.insert(module);
  return CUDA_SUCCESS;
}

Launchable* State::functionFor(Module* module, const KernelDef* def) {
  Launchable*& function = module->functions[def];
  if (function == nullptr) {
    static const bool lazy = std::getenv("KCAP_DOUBLE_LAZY_LOADING") != nullptr;
    function = new Launchable{Launchable::Kind::kFunction, def, module, !lazy};
    launchables.insert(function);
  }
  return function;
}

void State::unloadModule(Module* module) {
  for (const auto& [name, address] : module->globals) {
    release(reinterpret_cast<CUdeviceptr>(address));
  }
  for (const auto& [def, function] : module->functions) {
    launchables.erase(function);
    delete function;
  }
  modules.erase(module);
  delete module;
}

CUresult legacyStreamMayRun(State& s, CUstream stream) {
  if (stream != nullptr && stream != CU_STREAM_LEGACY) {
    return CUDA_SUCCESS;
  }
  bool joined = false;
  for (const Stream* other : s.streams) {
    if ((other->flags & CU_STREAM_NON_BLOCKING) == 0 && other->capture == Stream::Capture::kActive) {
      const_cast<Stream*>(other)->capture = Stream::Capture::kInvalidated;
      joined = true;
    }
  }
  return joined ? CUDA_ERROR_STREAM_CAPTURE_IMPLICIT : CUDA_SUCCESS;
}

bool streamOfCurrentContext(const State& s, CUstream stream) {
  const auto* made = reinterpret_cast<const Stream*>(stream);
  return s.streams.count(made) == 0 || made->context == nullptr || made->context == currentContext();
}

}  // namespace kcap_double
