#include "real_driver.h"

#include "shim_log.h"

#include <dlfcn.h>
#include <link.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace kcap::real {
namespace {

std::atomic<void*> g_driver{nullptr};
std::atomic<const char*> g_driver_path{nullptr};

constexpr char kDriverSoname[] = "libcuda.so.1";

// The path the program asked us to use (KCAP_REAL_LIBCUDA) or the driver's
// soname. Copied once: the program may change its environment later.
const char* driver_path() noexcept {
  if (const char* path = g_driver_path.load(std::memory_order_acquire)) {
    return path;
  }
  const char* requested = std::getenv("KCAP_REAL_LIBCUDA");
  const char* path = requested != nullptr && requested[0] != '\0' ? strdup(requested) : nullptr;
  if (path == nullptr) {
    path = kDriverSoname;
  }
  const char* expected = nullptr;
  if (g_driver_path.compare_exchange_strong(expected, path, std::memory_order_acq_rel)) {
    return path;
  }
  if (path != kDriverSoname) {
    std::free(const_cast<char*>(path));  // another thread got there first
  }
  return expected;
}

void* open_driver(int extra_flags) noexcept { return dlopen(driver_path(), RTLD_NOW | RTLD_LOCAL | extra_flags); }

// Several threads may open the driver at once; they all get the same handle
// (the loader counts references), so whoever publishes first is as good as
// any other.
void* publish(void* handle) noexcept {
  void* expected = nullptr;
  g_driver.compare_exchange_strong(expected, handle, std::memory_order_acq_rel);
  return g_driver.load(std::memory_order_acquire);
}

void* loaded_driver() noexcept {
  if (void* handle = g_driver.load(std::memory_order_acquire)) {
    return handle;
  }
  void* handle = open_driver(RTLD_NOLOAD);
  return handle != nullptr ? publish(handle) : nullptr;
}

// With KCAP_REAL_LIBCUDA set, load that driver before the program runs, so
// that the program's own dlopen("libcuda.so.1") finds it (the loader matches
// an already loaded object by soname) even where no libcuda.so.1 is on the
// search path.
[[gnu::constructor]] void load_requested_driver() noexcept {
  const char* requested = std::getenv("KCAP_REAL_LIBCUDA");
  if (requested != nullptr && requested[0] != '\0') {
    driver_handle();
  }
}

}  // namespace

void* driver_handle() noexcept {
  if (void* handle = loaded_driver()) {
    return handle;
  }
  if (void* handle = open_driver(0)) {
    return publish(handle);
  }
  const char* error = dlerror();
  KCAP_LOG_ONCE("cannot load the CUDA driver %s: %s", driver_path(), error ? error : "?");
  return nullptr;
}

bool is_driver_handle(void* handle) noexcept { return handle != nullptr && handle == loaded_driver(); }

void* driver_symbol(const char* name) noexcept {
  void* handle = driver_handle();
  DlsymFunction lookup = libc_dlsym();
  return handle != nullptr && lookup != nullptr ? lookup(handle, name) : nullptr;
}

bool is_driver_function(const void* fn) noexcept {
  void* handle = loaded_driver();
  link_map* driver = nullptr;
  if (handle == nullptr || dlinfo(handle, RTLD_DI_LINKMAP, &driver) != 0) {
    return false;
  }
  Dl_info info{};
  link_map* owner = nullptr;
  return dladdr1(fn, &info, reinterpret_cast<void**>(&owner), RTLD_DL_LINKMAP) != 0 && owner == driver;
}

}  // namespace kcap::real
