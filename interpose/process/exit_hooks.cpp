// exit, _exit and _Exit, interposed for the flight recorder's exit trigger
// (record/flight_recorder.cpp): a non-zero status fires it before the
// process goes, then the C library's function runs. Python's sys.exit(3)
// and os._exit(3) come through here. A C or C++ main returning non-zero
// does not: the C library calls its own exit directly, past any
// interposer; such a program fires the trigger by calling exit itself.
#include "hooks/real_driver.h"
#include "hooks/shim_log.h"
#include "record/recorder.h"

#include <dlfcn.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>

namespace kcap {
namespace {

using ExitFunction = void (*)(int);

ExitFunction next(const char* name) noexcept {
  const real::DlsymFunction lookup = real::libcDlsym();
  return lookup != nullptr ? reinterpret_cast<ExitFunction>(lookup(RTLD_NEXT, name)) : nullptr;
}

[[noreturn]] void leave(const char* name, int status) noexcept {
  if (status != 0) {
    Recorder::triggerExitCurrent(status, name);
  }
  if (ExitFunction fn = next(name)) {
    fn(status);
  }
  // No C library function found: the process ends all the same.
  ::syscall(SYS_exit_group, status);
  __builtin_unreachable();
}

}  // namespace
}  // namespace kcap

// As the C library declares them (noreturn there): exit and _Exit noexcept,
// _exit not.
extern "C" [[gnu::visibility("default")]] void exit(int status) noexcept { kcap::leave("exit", status); }
// NOLINTNEXTLINE(readability-identifier-naming): the C library's name
extern "C" [[gnu::visibility("default")]] void _exit(int status) { kcap::leave("_exit", status); }
// NOLINTNEXTLINE(readability-identifier-naming): the C library's name
extern "C" [[gnu::visibility("default")]] void _Exit(int status) noexcept { kcap::leave("_Exit", status); }
