#include <dlfcn.h>

extern "C" __attribute__((visibility("default"))) int kcap_probe_value() { return 1; }

extern "C" __attribute__((visibility("default"))) int kcap_probe_next_value() {
  const auto next = reinterpret_cast<int (*)()>(dlsym(RTLD_NEXT, "kcap_probe_value"));
  return next != nullptr ? next() : -1;
}
