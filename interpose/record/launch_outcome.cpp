// LaunchOutcome's waiting side (launch_outcome.h).
#include "record/launch_outcome.h"

#include <algorithm>
#include <limits>
#include <thread>

namespace kcap {
namespace {

constexpr uint64_t kNoHurry = std::numeric_limits<uint64_t>::max();

// CLOCK_MONOTONIC nanoseconds by which every wait gives up (hurry()).
// TraceClock::monotonicNs reads clock_gettime, which is async-signal-safe.
std::atomic<uint64_t> g_giveUpBy{kNoHurry};

}  // namespace

LaunchOutcome::State LaunchOutcome::await() const noexcept {
  auto known = static_cast<State>(state.load(std::memory_order_acquire));
  if (known != kPending) [[likely]] {
    return known;
  }
  // Most calls end within microseconds: yield a little, then sleep in
  // growing steps (a call blocked on a full device queue takes as long as
  // the device needs to drain it).
  const uint64_t deadline = TraceClock::monotonicNs() + static_cast<uint64_t>(std::chrono::nanoseconds(kWait).count());
  auto nap = std::chrono::microseconds(20);
  for (unsigned round = 0;; ++round) {
    known = static_cast<State>(state.load(std::memory_order_acquire));
    if (known != kPending) {
      return known;
    }
    if (round < 64) {
      std::this_thread::yield();
      continue;
    }
    const uint64_t now = TraceClock::monotonicNs();
    if (now >= deadline || now >= g_giveUpBy.load(std::memory_order_relaxed)) {
      return kPending;
    }
    std::this_thread::sleep_for(nap);
    nap = std::min(nap * 2, std::chrono::microseconds(5000));
  }
}

void LaunchOutcome::hurry(std::chrono::milliseconds within) noexcept {
  const uint64_t by = TraceClock::monotonicNs() + static_cast<uint64_t>(std::chrono::nanoseconds(within).count());
  uint64_t current = g_giveUpBy.load(std::memory_order_relaxed);
  while (by < current && !g_giveUpBy.compare_exchange_weak(current, by, std::memory_order_relaxed)) {}
}

void LaunchOutcome::relax() noexcept { g_giveUpBy.store(kNoHurry, std::memory_order_relaxed); }

}  // namespace kcap
