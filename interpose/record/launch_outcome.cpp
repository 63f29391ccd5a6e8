// LaunchOutcome's waiting side (launch_outcome.h).
#include "record/launch_outcome.h"

#include <time.h>

#include <limits>
#include <thread>

namespace kcap {
namespace {

constexpr int64_t kNoHurry = std::numeric_limits<int64_t>::max();

// CLOCK_MONOTONIC nanoseconds by which every wait gives up (hurry()).
std::atomic<int64_t> g_giveUpBy{kNoHurry};

int64_t monotonicNow() noexcept {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);  // async-signal-safe, unlike std::chrono's clocks
  return static_cast<int64_t>(now.tv_sec) * 1'000'000'000 + now.tv_nsec;
}

void cpuRelax() noexcept {
#if defined(__x86_64__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace

LaunchOutcome::State LaunchOutcome::await() const noexcept {
  auto known = static_cast<State>(state.load(std::memory_order_acquire));
  if (known != kPending) [[likely]] {
    return known;
  }
  // Most calls end within microseconds: spin a little, then sleep in
  // growing steps (a call blocked on a full device queue takes as long as
  // the device needs to drain it).
  const int64_t deadline = monotonicNow() + std::chrono::nanoseconds(kWait).count();
  auto nap = std::chrono::microseconds(20);
  for (unsigned round = 0;; ++round) {
    known = static_cast<State>(state.load(std::memory_order_acquire));
    if (known != kPending) {
      return known;
    }
    if (round < 256) {
      cpuRelax();
      continue;
    }
    const int64_t now = monotonicNow();
    if (now >= deadline || now >= g_giveUpBy.load(std::memory_order_relaxed)) {
      return kPending;
    }
    std::this_thread::sleep_for(nap);
    nap = std::min(nap * 2, std::chrono::microseconds(5000));
  }
}

void LaunchOutcome::hurry(std::chrono::milliseconds within) noexcept {
  const int64_t by = monotonicNow() + std::chrono::nanoseconds(within).count();
  int64_t current = g_giveUpBy.load(std::memory_order_relaxed);
  while (by < current && !g_giveUpBy.compare_exchange_weak(current, by, std::memory_order_relaxed)) {}
}

void LaunchOutcome::relax() noexcept { g_giveUpBy.store(kNoHurry, std::memory_order_relaxed); }

}  // namespace kcap
