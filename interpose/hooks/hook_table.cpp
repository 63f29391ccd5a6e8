#include "hooks/hook_table.h"

#include "hooks/hook_wrapper.h"
#include "hooks/real_driver.h"
#include "hooks/shim_log.h"

namespace kcap {

namespace detail {
std::atomic<void*> g_realFunctions[kHookCount] = {};
}

namespace {

// Per-row "already reported" flags for missingFunction().
std::atomic<bool> g_missingReported[kHookCount] = {};

// The lookup rules, checked by the compiler.
static_assert(findBySymbol("cuMemAlloc_v2") == HookId::cuMemAlloc_v2_hook);
static_assert(!findBySymbol("cuMemAlloc"));  // the 32-bit CUDA 2.0 ABI: not hooked
static_assert(selectForLookup("cuMemAlloc", 13000, 0) == HookId::cuMemAlloc_v2_hook);
static_assert(!selectForLookup("cuMemAlloc", 3010, 0));
static_assert(selectForLookup("cuLaunchKernel", 13000, CU_GET_PROC_ADDRESS_LEGACY_STREAM) ==
              HookId::cuLaunchKernel_hook);
static_assert(selectForLookup("cuLaunchKernel", 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) ==
              HookId::cuLaunchKernel_ptsz_hook);
static_assert(!selectForLookup("cuLaunchKernel", 6000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM));
static_assert(selectForLookup("cuModuleLoadData", 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) ==
              HookId::cuModuleLoadData_hook);
static_assert(selectForLookup("cuGetProcAddress", 11080, 0) == HookId::cuGetProcAddress_hook);
static_assert(selectForLookup("cuGetProcAddress", 12000, 0) == HookId::cuGetProcAddress_v2_hook);
static_assert(!selectForLookup("cuInit", 13000, 0));

}  // namespace

const void*& hookCaller() noexcept {
  thread_local const void* caller = nullptr;
  return caller;
}

bool isOwnWrapper(const void* fn) noexcept {
  if (fn == nullptr) {
    return false;
  }
  for (std::size_t i = 0; i < kHookCount; ++i) {
    if (wrapperAddress(static_cast<HookId>(i)) == fn) {
      return true;
    }
  }
  return false;
}

void* detail::resolveRealFunction(HookId id) noexcept {
  // spec().symbol points into a string literal, so it is NUL-terminated.
  void* fn = real::driverSymbol(spec(id).symbol.data());
  if (fn == nullptr) {
    return nullptr;
  }
  if (isOwnWrapper(fn)) {
    // KCAP_REAL_LIBCUDA names the shim, or the "driver" re-exports it:
    // forwarding there would recurse forever.
    KCAP_LOG_ONCE("the driver's %s is the shim's own function; not forwarding", spec(id).symbol.data());
    return nullptr;
  }
  adoptRealFunction(id, fn);
  return g_realFunctions[slotOf(id)].load(std::memory_order_acquire);
}

bool adoptRealFunction(HookId id, void* fn) noexcept {
  void* expected = nullptr;
  auto& slot = detail::g_realFunctions[slotOf(id)];
  return slot.compare_exchange_strong(expected, fn, std::memory_order_acq_rel) || expected == fn;
}

CUresult missingFunction(HookId id) noexcept {
  if (!g_missingReported[slotOf(id)].exchange(true, std::memory_order_relaxed)) {
    logMessage("the CUDA driver has no %s; returning CUDA_ERROR_NOT_FOUND", spec(id).symbol.data());
  }
  return CUDA_ERROR_NOT_FOUND;
}

}  // namespace kcap
