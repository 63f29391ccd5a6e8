#include "hook_table.h"

#include "hook_wrapper.h"
#include "real_driver.h"
#include "shim_log.h"

namespace kcap {

namespace detail {
std::atomic<void*> g_real_functions[kHookCount] = {};
}

namespace {

// Per-row "already reported" flags for missing_function().
std::atomic<bool> g_missing_reported[kHookCount] = {};

// The lookup rules, checked by the compiler.
static_assert(find_by_symbol("cuMemAlloc_v2") == HookId::cuMemAlloc_v2_hook);
static_assert(!find_by_symbol("cuMemAlloc"));  // the 32-bit CUDA 2.0 ABI: not hooked
static_assert(select_for_lookup("cuMemAlloc", 13000, 0) == HookId::cuMemAlloc_v2_hook);
static_assert(!select_for_lookup("cuMemAlloc", 3010, 0));
static_assert(select_for_lookup("cuLaunchKernel", 13000, CU_GET_PROC_ADDRESS_LEGACY_STREAM) ==
              HookId::cuLaunchKernel_hook);
static_assert(select_for_lookup("cuLaunchKernel", 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) ==
              HookId::cuLaunchKernel_ptsz_hook);
static_assert(!select_for_lookup("cuLaunchKernel", 6000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM));
static_assert(select_for_lookup("cuModuleLoadData", 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) ==
              HookId::cuModuleLoadData_hook);
static_assert(select_for_lookup("cuGetProcAddress", 11080, 0) == HookId::cuGetProcAddress_hook);
static_assert(select_for_lookup("cuGetProcAddress", 12000, 0) == HookId::cuGetProcAddress_v2_hook);
static_assert(!select_for_lookup("cuInit", 13000, 0));

}  // namespace

bool is_own_wrapper(const void* fn) noexcept {
  if (fn == nullptr) {
    return false;
  }
  for (std::size_t i = 0; i < kHookCount; ++i) {
    if (wrapper_address(static_cast<HookId>(i)) == fn) {
      return true;
    }
  }
  return false;
}

void* detail::resolve_real_function(HookId id) noexcept {
  // spec().symbol points into a string literal, so it is NUL-terminated.
  void* fn = real::driver_symbol(spec(id).symbol.data());
  if (fn == nullptr) {
    return nullptr;
  }
  if (is_own_wrapper(fn)) {
    // KCAP_REAL_LIBCUDA names the shim, or the "driver" re-exports it:
    // forwarding there would recurse forever.
    KCAP_LOG_ONCE("the driver's %s is the shim's own function; not forwarding", spec(id).symbol.data());
    return nullptr;
  }
  adopt_real_function(id, fn);
  return g_real_functions[slot_of(id)].load(std::memory_order_acquire);
}

bool adopt_real_function(HookId id, void* fn) noexcept {
  void* expected = nullptr;
  auto& slot = detail::g_real_functions[slot_of(id)];
  return slot.compare_exchange_strong(expected, fn, std::memory_order_acq_rel) || expected == fn;
}

CUresult missing_function(HookId id) noexcept {
  if (!g_missing_reported[slot_of(id)].exchange(true, std::memory_order_relaxed)) {
    log_message("the CUDA driver has no %s; returning CUDA_ERROR_NOT_FOUND", spec(id).symbol.data());
  }
  return CUDA_ERROR_NOT_FOUND;
}

}  // namespace kcap
