// The shim's dlsym: programs and libraries that look driver functions up by
// name (Triton, cuBLASLt, cudart's one lookup of "cuGetProcAddress_v2") get
// the shim's wrapper for every hooked symbol, and those that look NCCL's
// calls up in a handle of NCCL's get the shim's NCCL entry points.
//
// dlsym runs everywhere, often, and early, so for anything but a hooked name
// this does one prefix test and forwards. It takes no lock, allocates nothing
// and makes no CUDA call. A sanitizer runtime resolves its interceptors
// through it while starting, before its shadow memory exists, where
// instrumented code would crash: this file (dlsym and the C library's dlsym
// lookup, all that runs on that path) is compiled without sanitizers.
//
// Forwarding must keep the caller: glibc resolves dlsym(RTLD_NEXT, name)
// relative to the object its *return address* is in. A normal call from here
// would make every RTLD_NEXT lookup relative to the shim. So the forward is a
// sibling call (a jump: the C library's dlsym returns straight to our caller
// and sees its return address); CMakeLists.txt compiles this file with
// optimization so that the compiler emits it even in Debug builds, and the
// test Interpose.DlsymKeepsTheCallerOfRtldNext checks it.
#include "hooks/hook_table.h"
#include "hooks/nccl_calls.h"
#include "hooks/real_driver.h"
#include "hooks/shim_log.h"

#include <dlfcn.h>

#include <atomic>

namespace kcap {

namespace real {
namespace {
std::atomic<DlsymFunction> g_libcDlsym{nullptr};
}

DlsymFunction libcDlsym() noexcept {
  if (DlsymFunction fn = g_libcDlsym.load(std::memory_order_acquire)) {
    return fn;
  }
  // RTLD_NEXT from here: the first dlsym after the shim, i.e. the C
  // library's (or that of another interposer preloaded after us).
  for (const char* version : {"GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17"}) {
    if (void* fn = dlvsym(RTLD_NEXT, "dlsym", version)) {
      const auto dlsymFunction = reinterpret_cast<DlsymFunction>(fn);
      g_libcDlsym.store(dlsymFunction, std::memory_order_release);
      return dlsymFunction;
    }
  }
  KCAP_LOG_ONCE("cannot find the C library's dlsym; dlsym() will return NULL");
  return nullptr;
}
}  // namespace real

namespace {

// The shim's answer for a hooked symbol, or nullptr to let the C library
// answer. Kept out of line so that dlsym itself stays a test and a jump.
[[gnu::noinline]] void* hookedAnswer(void* handle, const char* name) noexcept {
  const auto id = findBySymbol(name);
  if (!id) {
    return nullptr;
  }
  // The global scope (RTLD_DEFAULT) finds the shim's export anyway: it was
  // preloaded. A caller's RTLD_NEXT would find either the shim's export
  // (caller loaded before it) or the driver's (caller loaded after it); in
  // both cases the wrapper, which forwards to the driver, is the answer.
  if (handle == RTLD_DEFAULT || handle == RTLD_NEXT) {
    return wrapperAddress(*id);
  }
  // A handle: answer with the wrapper only where the driver's own function
  // would have been found. Another library that happens to define a cu*
  // name keeps its own. (Checked before the lookup whose outcome the caller
  // may read from dlerror.)
  const bool isDriver = real::isDriverHandle(handle);
  const real::DlsymFunction lookup = real::libcDlsym();
  void* fn = lookup != nullptr ? lookup(handle, name) : nullptr;
  if (fn == nullptr || !isDriver || isOwnWrapper(fn)) {
    return fn;
  }
  adoptRealFunction(*id, fn);
  return wrapperAddress(*id);
}

bool mayBeHooked(const char* name) noexcept { return name != nullptr && name[0] == 'c' && name[1] == 'u'; }

// NCCL's names, looked up in a handle of NCCL's (nccl_calls.h).
bool mayBeNccl(void* handle, const char* name) noexcept {
  if (name == nullptr || handle == RTLD_DEFAULT || handle == RTLD_NEXT) return false;
  if (name[0] == 'p') ++name;  // the profiling names: pncclAllReduce
  return name[0] == 'n' && name[1] == 'c' && name[2] == 'c' && name[3] == 'l';
}

}  // namespace
}  // namespace kcap

extern "C" [[gnu::visibility("default")]] void* dlsym(void* handle, const char* name) noexcept {
  if (kcap::mayBeHooked(name)) {
    if (void* fn = kcap::hookedAnswer(handle, name)) {
      return fn;
    }
  } else if (kcap::mayBeNccl(handle, name)) {
    if (void* fn = kcap::ncclEntryFor(handle, name)) {
      return fn;
    }
  }
  const kcap::real::DlsymFunction libcDlsym = kcap::real::libcDlsym();
  if (libcDlsym == nullptr) {
    return nullptr;
  }
  return libcDlsym(handle, name);  // sibling call: see the top of this file
}
