// TraceClock: stamps converted to nanoseconds since the start agree with
// CLOCK_MONOTONIC read beside them, across new anchors, for stamps converted
// late (as the writer's threads do), and on the plain-clock fallback.
#include "trace_clock.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

namespace kcap {
namespace {

// |a - b| in ns, for unsigned values.
uint64_t distance(uint64_t a, uint64_t b) { return a > b ? a - b : b - a; }

// A stamp and the CLOCK_MONOTONIC ns since the clock's start read beside it.
struct Sample {
  uint64_t stamp;
  uint64_t sinceStart;
};

// Retried while the thread was descheduled between its reads (a loaded VM):
// the stamps before and after the clock read must be within 5 us.
Sample sample(TraceClock& clock) {
  Sample taken{};
  for (int attempt = 0; attempt < 1000; ++attempt) {
    const uint64_t stamp = clock.stamp();
    const uint64_t ns = TraceClock::monotonicNs();
    const uint64_t after = clock.stamp();
    taken = {stamp, ns - clock.startMonotonicNs()};
    if (clock.toNs(after) - clock.toNs(stamp) < 5000) {
      break;
    }
  }
  return taken;
}

// Within 20 us: the anchors' own jitter on a VM, and 5 us within a sample.
constexpr uint64_t kToleranceNs = 20000;

void expectAgreement(TraceClock& clock) {
  std::vector<Sample> samples;
  for (int i = 0; i < 8; ++i) {
    samples.push_back(sample(clock));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // 160 ms: at least two new anchors
    // Converted right away, as an event built on its own thread is.
    const Sample now = sample(clock);
    EXPECT_LE(distance(clock.toNs(now.stamp), now.sinceStart), kToleranceNs) << "sample " << i;
  }
  // Converted late, from a newer anchor, as a deferred event is.
  uint64_t previous = 0;
  for (const Sample& s : samples) {
    const uint64_t ns = clock.toNs(s.stamp);
    EXPECT_LE(distance(ns, s.sinceStart), kToleranceNs);
    EXPECT_GT(ns, previous);  // 20 ms apart: strictly in order
    previous = ns;
  }
}

TEST(TraceClock, StampsAgreeWithTheMonotonicClock) {
  TraceClock clock;
  expectAgreement(clock);
}

// The counter path wherever the CPU has a counter, whatever clock source
// the kernel chose (a development VM's kvm-clock, the H200 host's tsc).
TEST(TraceClock, CounterStampsAgreeWithTheMonotonicClock) {
  TraceClock clock(TraceClock::Source::kCounter);
#if defined(__x86_64__) || defined(__aarch64__)
  EXPECT_TRUE(clock.counting());
#endif
  expectAgreement(clock);
}

TEST(TraceClock, PlainClockFallbackIsExact) {
  TraceClock clock(TraceClock::Source::kMonotonic);
  EXPECT_FALSE(clock.counting());
  const Sample s = sample(clock);
  EXPECT_EQ(clock.toNs(s.stamp), s.stamp - clock.startMonotonicNs());
  EXPECT_EQ(clock.toNs(clock.startMonotonicNs() - 1), 0u);  // before the start
  expectAgreement(clock);
}

// A deadline made with stampsIn is reached by the stamp that many ns
// later: what the recorder compares each launch's stamp with to decide a
// checkpoint is due.
TEST(TraceClock, StampsInSpansThatManyNanoseconds) {
  for (const auto source : {TraceClock::Source::kCounter, TraceClock::Source::kMonotonic}) {
    TraceClock clock(source);
    EXPECT_EQ(clock.stampsIn(0), 0u);
    EXPECT_GE(clock.stampsIn(1), 1u);
    EXPECT_GE(clock.stampsIn(UINT64_MAX), clock.stampsIn(uint64_t{1} << 62));  // saturates, never wraps
    const uint64_t start = clock.stamp();
    const uint64_t span = clock.stampsIn(2'000'000);  // 2 ms
    const uint64_t deadline = start + span;
    // The conversion of the deadline is 2 ms after the start's, within
    // the clock's rounding.
    EXPECT_LE(distance(clock.toNs(deadline) - clock.toNs(start), 2'000'000), 2000u);
    EXPECT_LT(clock.stamp(), deadline);
    std::this_thread::sleep_for(std::chrono::milliseconds(3));
    EXPECT_GE(clock.stamp(), deadline);
  }
}

TEST(TraceClock, StampBeforeTheStartIsZero) {
  const TraceClock clock0(TraceClock::Source::kCounter);
  const uint64_t early = clock0.stamp();
  std::this_thread::sleep_for(std::chrono::milliseconds(1));
  TraceClock clock(TraceClock::Source::kCounter);
  EXPECT_EQ(clock.toNs(early), 0u);
  EXPECT_LT(clock.toNs(clock.stamp()), 1000000000u);
}

TEST(TraceClock, ConvertsFromManyThreadsAtOnce) {
  TraceClock clock(TraceClock::Source::kCounter);
  std::vector<std::thread> threads;
  std::atomic<int> far{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 200; ++i) {
        const Sample s = sample(clock);
        if (distance(clock.toNs(s.stamp), s.sinceStart) > kToleranceNs) {
          far.fetch_add(1);
        }
        if (i % 50 == 0) {
          std::this_thread::sleep_for(std::chrono::milliseconds(30));  // new anchors meanwhile
        }
      }
    });
  }
  for (std::thread& thread : threads) {
    thread.join();
  }
  // A thread descheduled between the two reads of a sample is far: allow
  // a few of 800.
  EXPECT_LE(far.load(), 8);
}

}  // namespace
}  // namespace kcap
