// prefetchForWrite: asks for the cache lines of a range in a state this
// core may write, without waiting for them.
//
// Why not __builtin_prefetch(p, 1, 3) alone: GCC and Clang turn it into
// PREFETCHW only when the target has PRFCHW (-march=broadwell and later).
// kcap builds for baseline x86-64, where it becomes PREFETCHT0, a read:
// the line arrives shared, and the store that follows still waits for the
// other cores' copies to be invalidated (and a locked instruction after it,
// such as the driver's own lock, waits for that store). The instruction is
// therefore written out here, behind a CPUID test made once per process:
// a CPU without PRFCHW is not asked to run it.
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace kcap {

namespace detail {
#if defined(__x86_64__)
inline bool cpuHasPrefetchW() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  // CPUID 0x80000001, ECX bit 8: PREFETCHW (named 3DNowPrefetch by AMD).
  return __get_cpuid(0x80000001u, &eax, &ebx, &ecx, &edx) != 0 && (ecx & (1u << 8)) != 0;
}
inline const bool kHasPrefetchW = cpuHasPrefetchW();
#endif
}  // namespace detail

inline void prefetchLineForWrite(const void* address) {
#if defined(__x86_64__)
  if (detail::kHasPrefetchW) [[likely]] {
    asm volatile("prefetchw %0" : : "m"(*static_cast<const char*>(address)));
  } else {
    __builtin_prefetch(address, 0, 3);
  }
#else
  __builtin_prefetch(address, 1, 3);  // AArch64: PRFM PSTL1KEEP
#endif
}

inline void prefetchForWrite(const void* data, size_t bytes) {
  constexpr uintptr_t kLine = 64;
  const uintptr_t begin = reinterpret_cast<uintptr_t>(data) & ~(kLine - 1);
  const uintptr_t end = reinterpret_cast<uintptr_t>(data) + bytes;
  for (uintptr_t line = begin; line < end; line += kLine) {
    prefetchLineForWrite(reinterpret_cast<const void*>(line));
  }
}

}  // namespace kcap
