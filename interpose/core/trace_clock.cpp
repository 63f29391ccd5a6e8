#include "trace_clock.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <ctime>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace kcap {
namespace {

// Whether the kernel keeps time with the time-stamp counter: it checked
// that the counter runs at a constant rate through sleep states and agrees
// across CPUs (and demotes it when it stops agreeing).
bool kernelTrustsTsc() {
  const int fd = ::open("/sys/devices/system/clocksource/clocksource0/current_clocksource", O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return false;
  }
  char name[16] = {};
  const ssize_t got = ::read(fd, name, sizeof name - 1);
  ::close(fd);
  return got >= 3 && std::strncmp(name, "tsc", 3) == 0 && (got == 3 || name[3] == '\n');
}

bool useCounter(TraceClock::Source source) {
#if defined(__x86_64__) || defined(__aarch64__)
  switch (source) {
    case TraceClock::Source::kCounter:
      return true;
    case TraceClock::Source::kMonotonic:
      return false;
    case TraceClock::Source::kAuto:
      break;
  }
#if defined(__x86_64__)
  return kernelTrustsTsc();
#else
  return true;  // Linux lets user space read the virtual count, at a constant rate
#endif
#else
  (void)source;
  return false;
#endif
}

}  // namespace

uint64_t TraceClock::monotonicNs() noexcept {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<uint64_t>(now.tv_sec) * 1000000000ull + static_cast<uint64_t>(now.tv_nsec);
}

uint64_t TraceClock::readCounter() noexcept {
#if defined(__x86_64__)
  return __rdtsc();
#elif defined(__aarch64__)
  uint64_t ticks = 0;
  asm volatile("mrs %0, cntvct_el0" : "=r"(ticks));
  return ticks;
#else
  return monotonicNs();
#endif
}

// A tick count and CLOCK_MONOTONIC read as close together as three tries
// allow (the tick count halfway through the clock read).
TraceClock::Anchor TraceClock::readAnchor() noexcept {
  Anchor best;
  uint64_t bestSpread = UINT64_MAX;
  for (int i = 0; i < 3; ++i) {
    const uint64_t before = readCounter();
    const uint64_t ns = monotonicNs();
    const uint64_t after = readCounter();
    if (after - before < bestSpread) {
      bestSpread = after - before;
      best = {before + (after - before) / 2, ns};
    }
  }
  return best;
}

TraceClock::TraceClock(Source source) : counter_(useCounter(source)) {
  if (!counter_) {
    startNs_ = monotonicNs();
    return;
  }
  first_ = readAnchor();
  startNs_ = first_.ns;
  // A first rate, over about 200 us; every new anchor lengthens the span.
  Anchor later = readAnchor();
  while (later.ns - first_.ns < 200000 || later.ticks <= first_.ticks) {
    later = readAnchor();
  }
  const double nsPerTick = static_cast<double>(later.ns - first_.ns) / static_cast<double>(later.ticks - first_.ticks);
  reanchorTicks_ = static_cast<uint64_t>(50e6 / nsPerTick);
  anchorTicks_.store(later.ticks, std::memory_order_relaxed);
  anchorNs_.store(later.ns, std::memory_order_relaxed);
  nsPerTick_.store(nsPerTick, std::memory_order_relaxed);
}

void TraceClock::reanchor(uint64_t ticks) noexcept {
  std::unique_lock lock(reanchorMutex_, std::try_to_lock);
  const uint64_t anchor = anchorTicks_.load(std::memory_order_relaxed);
  if (!lock.owns_lock() || ticks <= anchor || ticks - anchor <= std::min(reanchorTicks_, (anchor - first_.ticks) / 4)) {
    return;  // another thread is at it, or did it
  }
  const Anchor now = readAnchor();
  if (now.ticks <= first_.ticks || now.ns <= first_.ns) {
    return;
  }
  const double nsPerTick = static_cast<double>(now.ns - first_.ns) / static_cast<double>(now.ticks - first_.ticks);
  const uint32_t sequence = sequence_.load(std::memory_order_relaxed);
  sequence_.store(sequence + 1, std::memory_order_relaxed);  // odd: being written
  std::atomic_thread_fence(std::memory_order_release);
  anchorTicks_.store(now.ticks, std::memory_order_relaxed);
  anchorNs_.store(now.ns, std::memory_order_relaxed);
  nsPerTick_.store(nsPerTick, std::memory_order_relaxed);
  sequence_.store(sequence + 2, std::memory_order_release);
}

uint64_t TraceClock::stampsIn(uint64_t ns) const noexcept {
  if (!counter_ || ns == 0) {
    return ns;
  }
  // The rate alone (a relaxed read, no sequence): it moves by parts per
  // million between anchors, far below what a deadline needs.
  const double nsPerTick = nsPerTick_.load(std::memory_order_relaxed);
  const double ticks = nsPerTick > 0 ? std::ceil(static_cast<double>(ns) / nsPerTick) : static_cast<double>(ns);
  if (ticks >= 18446744073709549568.0) {  // the largest double below 2^64
    return UINT64_MAX;
  }
  return std::max<uint64_t>(1, static_cast<uint64_t>(ticks));
}

uint64_t TraceClock::toNs(uint64_t stamp) noexcept {
  if (!counter_) {
    return stamp > startNs_ ? stamp - startNs_ : 0;
  }
  uint64_t ticks = 0;
  uint64_t ns = 0;
  double nsPerTick = 0;
  for (bool reanchored = false;;) {
    const uint32_t sequence = sequence_.load(std::memory_order_acquire);
    ticks = anchorTicks_.load(std::memory_order_relaxed);
    ns = anchorNs_.load(std::memory_order_relaxed);
    nsPerTick = nsPerTick_.load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if ((sequence & 1) != 0 || sequence_.load(std::memory_order_relaxed) != sequence) {
      continue;  // read while being written
    }
    // A stamp well past the newest anchor: a new one first (a stamp
    // before it, an event built late, is converted backwards from it).
    // "Well past": 50 ms, or a quarter of the span the rate was
    // measured over while that is shorter, so that the rate's error
    // (the anchors' jitter over the span) never grows a conversion's
    // error past a fraction of that jitter.
    if (reanchored || stamp <= ticks || stamp - ticks <= std::min(reanchorTicks_, (ticks - first_.ticks) / 4)) {
      break;
    }
    reanchor(stamp);
    reanchored = true;
  }
  const double delta = stamp >= ticks ? static_cast<double>(stamp - ticks) : -static_cast<double>(ticks - stamp);
  // Anchors are never before the start: ns - startNs_ is small enough for
  // a double to hold to the nanosecond.
  const double sinceStart = static_cast<double>(ns - startNs_) + delta * nsPerTick;
  return sinceStart > 0 ? static_cast<uint64_t>(sinceStart) : 0;
}

}  // namespace kcap
