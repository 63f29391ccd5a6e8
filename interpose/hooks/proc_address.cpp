// cuGetProcAddress and cuGetProcAddress_v2: how cudart (static and shared,
// and every library that embeds it) reaches the driver. cudart dlsyms only
// "cuGetProcAddress_v2", then asks that function for "cuGetProcAddress" and
// resolves ~480 entry points through what it got back, each as
// (name, ABI version, flags). So the shim answers every lookup of a hooked
// (name, version, flags), including that of cuGetProcAddress itself, with
// its own wrapper, and remembers the driver's pointer as the wrapper's target.
#include "hooks/hook_wrapper.h"
#include "hooks/real_driver.h"
#include "hooks/shim_log.h"

#include <optional>
#include <string_view>

namespace kcap {
namespace {

// Asks the real driver, through whichever form of the lookup it has.
void* realLookup(const char* symbol, int version, cuuint64_t flags) noexcept {
  void* fn = nullptr;
  if (const auto v2 = reinterpret_cast<PFN_cuGetProcAddress_v12000>(realFunction(HookId::cuGetProcAddress_v2_hook))) {
    CUdriverProcAddressQueryResult status{};
    return v2(symbol, &fn, version, flags, &status) == CUDA_SUCCESS ? fn : nullptr;
  }
  if (const auto v1 = reinterpret_cast<PFN_cuGetProcAddress_v11030>(realFunction(HookId::cuGetProcAddress_hook))) {
    return v1(symbol, &fn, version, flags) == CUDA_SUCCESS ? fn : nullptr;
  }
  return nullptr;
}

// Names a later CUDA version gave to an ABI the shim hooks under another
// name: cuda.h defines cuGraphInstantiate as cuGraphInstantiateWithFlags
// since CUDA 12.0, and cudart asks for "cuGraphInstantiate" at its own
// version. Such a lookup is answered with the hooked row only when the
// driver returns the very function it returns for the row's own name and
// version (the same ABI).
struct RenamedAbi {
  std::string_view name;
  int since;
  std::string_view hookedAs;
};
constexpr RenamedAbi kRenamed[] = {{"cuGraphInstantiate", 12000, "cuGraphInstantiateWithFlags"}};

// The hooked row a lookup of `symbol` at `version` may be answered with,
// and the name it is looked up under (`symbol`, or the name it was renamed to).
std::optional<HookId> rowFor(const char*& symbol, int version, cuuint64_t flags) noexcept {
  if (const auto id = selectForLookup(symbol, version, flags)) {
    return id;
  }
  for (const RenamedAbi& renamed : kRenamed) {
    if (renamed.name == symbol && version >= renamed.since) {
      symbol = renamed.hookedAs.data();
      return selectForLookup(renamed.hookedAs, version, flags);
    }
  }
  return std::nullopt;
}

// What the program gets for a successful lookup that returned `real`.
void* answer(const char* asked, int version, cuuint64_t flags, void* real) noexcept {
  const char* symbol = asked;
  const auto id = rowFor(symbol, version, flags);
  if (!id) {
    return real;  // not hooked
  }
  if (symbol != asked && realLookup(symbol, spec(*id).version, flags) != real) {
    return real;  // renamed, but not to the ABI the row has: not hooked
  }
  if (isOwnWrapper(real)) {
    // The driver took the address of its own export through the global
    // scope and found ours: already the right answer.
    KCAP_DEBUG_ONCE(
        "cuGetProcAddress(%s) returned the shim's export: the driver binds its "
        "own symbols through the global scope",
        symbol);
    return real;
  }
  // Our row's ABI is the one the driver picked only if it returns the same
  // function when asked for exactly the row's version. A driver newer than
  // this shim may know a later ABI of the same name; wrapping that with our
  // signature would corrupt the call, so it passes through unobserved.
  const HookSpec& row = spec(*id);
  if (version != row.version && realLookup(symbol, row.version, flags) != real) {
    KCAP_LOG_ONCE("the driver has a newer ABI of %s than %s (asked for %d); not hooking it", symbol, row.pfn.data(),
                  version);
    return real;
  }
  if (!real::isDriverFunction(real)) {
    // Not the driver's code (a program's PLT stub that leads back into
    // the shim, see real_driver.h): the wrapper must not forward there,
    // and takes its target from the driver's symbol table instead.
    KCAP_DEBUG_ONCE(
        "cuGetProcAddress(%s) returned a function outside the driver; "
        "forwarding to the driver's %s",
        symbol, row.symbol.data());
    return wrapperAddress(*id);
  }
  if (!adoptRealFunction(*id, real)) {
    // The exported symbol and the lookup gave different functions for
    // one ABI. Both are the driver's implementation of it; the wrapper
    // keeps calling the first one it saw.
    KCAP_DEBUG_ONCE(
        "cuGetProcAddress(%s, %d) returned another function than the one %s "
        "forwards to; keeping the first",
        symbol, version, row.symbol.data());
  }
  return wrapperAddress(*id);
}

}  // namespace

CUresult Wrapper<HookId::cuGetProcAddress_hook>::call(const char* symbol, void** pfn, int version,
                                                      cuuint64_t flags) noexcept {
  constexpr HookId id = HookId::cuGetProcAddress_hook;
  countCall(id);
  const auto real = reinterpret_cast<PFN_cuGetProcAddress_v11030>(realFunction(id));
  if (real == nullptr) {
    return missingFunction(id);
  }
  const CUresult result = real(symbol, pfn, version, flags);
  if (result == CUDA_SUCCESS && symbol != nullptr && pfn != nullptr && *pfn != nullptr) {
    *pfn = answer(symbol, version, flags, *pfn);
  }
  return result;
}

CUresult Wrapper<HookId::cuGetProcAddress_v2_hook>::call(const char* symbol, void** pfn, int version, cuuint64_t flags,
                                                         CUdriverProcAddressQueryResult* status) noexcept {
  constexpr HookId id = HookId::cuGetProcAddress_v2_hook;
  countCall(id);
  const auto real = reinterpret_cast<PFN_cuGetProcAddress_v12000>(realFunction(id));
  if (real == nullptr) {
    return missingFunction(id);
  }
  const CUresult result = real(symbol, pfn, version, flags, status);
  if (result == CUDA_SUCCESS && symbol != nullptr && pfn != nullptr && *pfn != nullptr) {
    *pfn = answer(symbol, version, flags, *pfn);
  }
  return result;
}

}  // namespace kcap
