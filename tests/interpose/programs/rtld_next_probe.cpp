// Checks that the shim's dlsym keeps the caller's meaning of RTLD_NEXT.
// libkcap_probe_first asks dlsym(RTLD_NEXT, "kcap_probe_value") from its own
// code; the next definition after it is libkcap_probe_second's (2). Had the
// shim forwarded the lookup as its own, "next" would count from the shim,
// which is loaded before both, and find the first library's (1).
//
// No CUDA at all: also shows that the shim leaves such a program alone.
#include <cstdio>

extern "C" int kcap_probe_value();
extern "C" int kcap_probe_next_value();

int main() {
  std::printf("result own %d\n", kcap_probe_value());
  std::printf("result next %d\n", kcap_probe_next_value());
  return kcap_probe_next_value() == 2 ? 0 : 1;
}
