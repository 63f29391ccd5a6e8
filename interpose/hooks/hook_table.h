// The hooked driver entry points as data, generated from driver_hooks.def:
// an id per row, each row's names and ABI version, its PFN type, the lookups
// the dlsym and cuGetProcAddress overrides need, and the slot holding the real
// driver function each wrapper forwards to.
//
// Everything here is constant-initialized or computed at compile time: the
// shim can be entered (through dlsym, or a driver call from another library's
// constructor) before any of its own constructors have run.
#pragma once

#include <cudaTypedefs.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace kcap {

enum class HookId : std::uint16_t {
#define KCAP_HOOK(api, symbol, version, per_thread, pfn) symbol##_hook,
#include "driver_hooks.def"
#undef KCAP_HOOK
};

struct HookSpec {
  std::string_view api;     // name asked of cuGetProcAddress
  std::string_view symbol;  // exported name, in libcuda and in the shim
  std::string_view pfn;     // cudaTypedefs.h type name
  int version;              // CUDA version of this ABI
  bool perThread;           // _ptsz / _ptds variant
};

inline constexpr HookSpec kHooks[] = {
#define KCAP_HOOK(api, symbol, version, per_thread, pfn) {#api, #symbol, #pfn, version, per_thread != 0},
#include "driver_hooks.def"
#undef KCAP_HOOK
};

inline constexpr std::size_t kHookCount = std::size(kHooks);

// Position of a row in kHooks and in every per-row array.
constexpr std::size_t slotOf(HookId id) { return static_cast<std::size_t>(id); }
constexpr const HookSpec& spec(HookId id) { return kHooks[slotOf(id)]; }

// The function pointer type of each row.
template <HookId Id>
struct HookPfn;
#define KCAP_HOOK(api, symbol, version, per_thread, pfn) \
  template <>                                            \
  struct HookPfn<HookId::symbol##_hook> {                \
    using type = pfn;                                    \
  };
#include "driver_hooks.def"
#undef KCAP_HOOK

// Rows of one API (cuLaunchKernel and cuLaunchKernel_ptsz) share an observer;
// the family is named by its first row.
constexpr HookId familyOf(HookId id) {
  for (std::size_t i = 0; i < kHookCount; ++i) {
    if (kHooks[i].api == spec(id).api) {
      return static_cast<HookId>(i);
    }
  }
  return id;
}

// Calls that change device memory (launches, graph launches, copies into
// device memory, memsets) or take it away (frees, unmaps, module unloads:
// a checkpoint's kernel must not read memory that goes meanwhile), and
// stream-ordered allocations (whether one logs its first content depends on
// what was freed since the last checkpoint: freed_pool_memory.h). While
// checkpoint mode records they pass through the checkpoint gate
// (core/checkpoint_gate.h).
constexpr bool changesDeviceMemory(HookId id) {
  const std::string_view api = spec(id).api;
  if (api.starts_with("cuMemcpyDtoH")) {
    return false;
  }
  return api.starts_with("cuLaunch") || api.starts_with("cuGraphLaunch") || api.starts_with("cuMemcpy") ||
         api.starts_with("cuMemset") || api == "cuMemFree" || api == "cuMemFreeAsync" || api == "cuMemAllocAsync" ||
         api == "cuMemAllocFromPoolAsync" || api == "cuMemUnmap" || api == "cuMemRelease" ||
         api == "cuMemAddressFree" || api == "cuModuleUnload" || api == "cuLibraryUnload";
}

// Calls that make memory the recorder tracks (an Alloc event): their
// wrappers note who called (hookCaller), so that the recorder can tell
// memory NCCL made for itself (Alloc.byNccl).
constexpr bool makesMemory(HookId id) {
  const std::string_view api = spec(id).api;
  return api.starts_with("cuMemAlloc") || api == "cuMemAddressReserve" || api == "cuMemCreate" || api == "cuMemMap" ||
         api == "cuIpcOpenMemHandle" || api == "cuMemImportFromShareableHandle" || api == "cuMemHostAlloc" ||
         api == "cuMemHostRegister";
}

// The return address of the hooked call this thread is in, where
// makesMemory(id): an address in the code that called the driver.
const void*& hookCaller() noexcept;

// ---- compile-time checks of driver_hooks.def -----------------------------------

namespace detail {
// A row's PFN type must be the one for its own api, version and variant: a
// copy-paste slip would give a wrapper the wrong signature, which no compiler
// catches once the pointer has gone through void*.
constexpr bool pfnMatchesRow(const HookSpec& row) {
  std::string_view pfn = row.pfn;
  if (!pfn.starts_with("PFN_")) {
    return false;
  }
  pfn.remove_prefix(4);
  if (!pfn.starts_with(row.api)) {
    return false;
  }
  pfn.remove_prefix(row.api.size());
  if (!pfn.starts_with("_v")) {
    return false;
  }
  pfn.remove_prefix(2);
  int version = 0;
  std::size_t digits = 0;
  while (digits < pfn.size() && pfn[digits] >= '0' && pfn[digits] <= '9') {
    version = version * 10 + (pfn[digits] - '0');
    ++digits;
  }
  if (digits == 0 || version != row.version) {
    return false;
  }
  pfn.remove_prefix(digits);
  const bool perThreadSuffix = pfn == "_ptsz" || pfn == "_ptds";
  return row.perThread ? perThreadSuffix : pfn.empty();
}

constexpr bool symbolMatchesRow(const HookSpec& row) {
  const bool perThreadSymbol = row.symbol.ends_with("_ptsz") || row.symbol.ends_with("_ptds");
  return row.symbol.starts_with(row.api) && perThreadSymbol == row.perThread;
}

constexpr bool rowsConsistent() {
  for (const HookSpec& row : kHooks) {
    if (!pfnMatchesRow(row) || !symbolMatchesRow(row)) {
      return false;
    }
  }
  for (std::size_t i = 0; i < kHookCount; ++i) {
    for (std::size_t j = i + 1; j < kHookCount; ++j) {
      const bool sameSymbol = kHooks[i].symbol == kHooks[j].symbol;
      const bool sameLookup = kHooks[i].api == kHooks[j].api && kHooks[i].version == kHooks[j].version &&
                              kHooks[i].perThread == kHooks[j].perThread;
      if (sameSymbol || sameLookup) {
        return false;
      }
    }
  }
  return true;
}
}  // namespace detail

static_assert(detail::rowsConsistent(),
              "driver_hooks.def: a row's PFN type or symbol does not match its api/version/"
              "per_thread, or two rows share a symbol or a (api, version, per_thread) key");

// ---- lookups -------------------------------------------------------------------
//
// Computed by the compiler (sorted indices, binary search): nothing to
// initialize at run time, so lookups work before any constructor has run, and
// hook_table.cpp checks the rules with static_asserts.

namespace detail {
using HookIndex = std::array<HookId, kHookCount>;

template <class Less>
constexpr HookIndex sortedIds(Less less) {
  HookIndex ids{};
  for (std::size_t i = 0; i < kHookCount; ++i) {
    ids[i] = static_cast<HookId>(i);
  }
  std::sort(ids.begin(), ids.end(), less);
  return ids;
}

inline constexpr HookIndex kBySymbol = sortedIds([](HookId a, HookId b) { return spec(a).symbol < spec(b).symbol; });
inline constexpr HookIndex kByApi = sortedIds([](HookId a, HookId b) { return spec(a).api < spec(b).api; });

struct ApiLess {
  constexpr bool operator()(HookId a, std::string_view b) const { return spec(a).api < b; }
  constexpr bool operator()(std::string_view a, HookId b) const { return a < spec(b).api; }
};
}  // namespace detail

// The row whose exported symbol is `symbol` ("cuMemAlloc_v2"), for dlsym.
constexpr std::optional<HookId> findBySymbol(std::string_view symbol) noexcept {
  const auto& ids = detail::kBySymbol;
  const auto it = std::lower_bound(ids.begin(), ids.end(), symbol,
                                   [](HookId id, std::string_view s) { return spec(id).symbol < s; });
  if (it != ids.end() && spec(*it).symbol == symbol) {
    return *it;
  }
  return std::nullopt;
}

// The row cuGetProcAddress(api, version, flags) resolves to, choosing as the
// driver does: the per-thread rows if `flags` asks for them and the API has
// any (an API without such variants, cuModuleLoad, answers the flag with its
// ordinary function), then the highest version <= `version`. nullopt: not
// hooked, the lookup passes through.
constexpr std::optional<HookId> selectForLookup(std::string_view api, int version, std::uint64_t flags) noexcept {
  const auto [first, last] = std::equal_range(detail::kByApi.begin(), detail::kByApi.end(), api, detail::ApiLess{});
  const bool wantsPerThread = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
  const bool hasPerThread = std::any_of(first, last, [](HookId id) { return spec(id).perThread; });
  const bool perThread = wantsPerThread && hasPerThread;

  std::optional<HookId> best;
  for (auto it = first; it != last; ++it) {
    const HookSpec& row = spec(*it);
    if (row.perThread == perThread && row.version <= version && (!best || row.version > spec(*best).version)) {
      best = *it;
    }
  }
  return best;
}

// ---- the shim's functions ------------------------------------------------------

// The shim's own function for a row: the address of its exported symbol,
// which leads to Wrapper<Id>::call (hook_exports.cpp).
void* wrapperAddress(HookId id) noexcept;

// True if `fn` is one of the shim's wrappers. A driver that takes the address
// of its own exports through the global scope (built without -Bsymbolic) hands
// back the shim's functions; those must never become a "real" pointer.
bool isOwnWrapper(const void* fn) noexcept;

// ---- the real function behind each row -----------------------------------------

namespace detail {
extern std::atomic<void*> g_realFunctions[kHookCount];
void* resolveRealFunction(HookId id) noexcept;
}  // namespace detail

// The driver's function for a row: adopted from a dlsym / cuGetProcAddress
// answer the shim intercepted, or looked up by symbol in the real libcuda on
// first use. nullptr if the driver does not have it.
inline void* realFunction(HookId id) noexcept {
  void* fn = detail::g_realFunctions[slotOf(id)].load(std::memory_order_acquire);
  return fn != nullptr ? fn : detail::resolveRealFunction(id);
}

// Records `fn`, a driver function the program was about to receive for this
// row. The first pointer recorded wins; returns false if `fn` differs from it.
bool adoptRealFunction(HookId id, void* fn) noexcept;

}  // namespace kcap
