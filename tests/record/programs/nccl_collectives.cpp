// Runs nccl_user.cpp's program. Built three times: linked with it (NCCL in
// the global scope); as nccl_collectives_dlopen, which loads it with
// dlopen(RTLD_LOCAL) as Python loads an extension module (KCAP_NCCL_USER_LIBRARY
// names it): NCCL is then in that library's scope alone, where the shim's
// lookup of the next definition does not look; and as nccl_collectives_dlsym,
// linked with the build of it that looks NCCL's functions up itself.
#ifdef KCAP_NCCL_USER_LIBRARY
#include <dlfcn.h>

#include <cstdio>

int main() {
  void* library = dlopen(KCAP_NCCL_USER_LIBRARY, RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    std::fprintf(stderr, "FAILED: %s\n", dlerror());
    return 1;
  }
  const auto run = reinterpret_cast<int (*)()>(dlsym(library, "runNcclCollectives"));
  return run != nullptr ? run() : 1;
}
#else
extern "C" int runNcclCollectives();

int main() { return runNcclCollectives(); }
#endif
