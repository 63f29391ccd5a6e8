#include "hooks/real_driver.h"

#include "hooks/shim_log.h"

#include <dlfcn.h>
#include <link.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace kcap::real {
namespace {

std::atomic<void*> g_driverHandle{nullptr};
std::atomic<const char*> g_driverPath{nullptr};

constexpr char kDriverSoname[] = "libcuda.so.1";

// The path the program asked us to use (KCAP_REAL_LIBCUDA) or the driver's
// soname. Copied once: the program may change its environment later.
const char* driverPath() noexcept {
  if (const char* path = g_driverPath.load(std::memory_order_acquire)) {
    return path;
  }
  const char* requested = std::getenv("KCAP_REAL_LIBCUDA");
  const char* path = requested != nullptr && requested[0] != '\0' ? strdup(requested) : nullptr;
  if (path == nullptr) {
    path = kDriverSoname;
  }
  const char* expected = nullptr;
  if (g_driverPath.compare_exchange_strong(expected, path, std::memory_order_acq_rel)) {
    return path;
  }
  if (path != kDriverSoname) {
    std::free(const_cast<char*>(path));  // another thread got there first
  }
  return expected;
}

void* openDriver(int extraFlags) noexcept { return dlopen(driverPath(), RTLD_NOW | RTLD_LOCAL | extraFlags); }

// Several threads may open the driver at once; they all get the same handle
// (the loader counts references), so whoever publishes first is as good as
// any other.
void* publish(void* handle) noexcept {
  void* expected = nullptr;
  g_driverHandle.compare_exchange_strong(expected, handle, std::memory_order_acq_rel);
  return g_driverHandle.load(std::memory_order_acquire);
}

void* loadedDriver() noexcept {
  if (void* handle = g_driverHandle.load(std::memory_order_acquire)) {
    return handle;
  }
  void* handle = openDriver(RTLD_NOLOAD);
  return handle != nullptr ? publish(handle) : nullptr;
}

// With KCAP_REAL_LIBCUDA set, load that driver before the program runs, so
// that the program's own dlopen("libcuda.so.1") finds it (the loader matches
// an already loaded object by soname) even where no libcuda.so.1 is on the
// search path.
[[gnu::constructor]] void loadRequestedDriver() noexcept {
  const char* requested = std::getenv("KCAP_REAL_LIBCUDA");
  if (requested != nullptr && requested[0] != '\0') {
    driverHandle();
  }
}

}  // namespace

void* driverHandle() noexcept {
  if (void* handle = loadedDriver()) {
    return handle;
  }
  if (void* handle = openDriver(0)) {
    return publish(handle);
  }
  const char* error = dlerror();
  KCAP_LOG_ONCE("cannot load the CUDA driver %s: %s", driverPath(), error ? error : "?");
  return nullptr;
}

bool isDriverHandle(void* handle) noexcept { return handle != nullptr && handle == loadedDriver(); }

void* driverSymbol(const char* name) noexcept {
  void* handle = driverHandle();
  DlsymFunction lookup = libcDlsym();
  return handle != nullptr && lookup != nullptr ? lookup(handle, name) : nullptr;
}

bool isDriverFunction(const void* fn) noexcept {
  void* handle = loadedDriver();
  link_map* driver = nullptr;
  if (handle == nullptr || dlinfo(handle, RTLD_DI_LINKMAP, &driver) != 0) {
    return false;
  }
  Dl_info info{};
  link_map* owner = nullptr;
  return dladdr1(fn, &info, reinterpret_cast<void**>(&owner), RTLD_DL_LINKMAP) != 0 && owner == driver;
}

}  // namespace kcap::real
