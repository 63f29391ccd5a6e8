// TraceClock: event timestamps, cheap enough for every launch.
//
// Event.timeNs is CLOCK_MONOTONIC nanoseconds since the trace began. Reading
// CLOCK_MONOTONIC is costly on the launch path: the vDSO orders its counter
// read after every earlier instruction, which there means after the
// driver's work, twice a launch. The launch path takes a stamp instead, the
// CPU's own counter read without ordering, and the stamp becomes
// nanoseconds later, when the writer's thread builds the event (toNs).
//
// The counter is the time-stamp counter on x86-64 when the kernel itself
// keeps time with it (clocksource "tsc": it found the counter invariant and
// synchronized across CPUs), the generic timer's virtual count on arm64;
// anywhere else a stamp is CLOCK_MONOTONIC itself. Counter ticks become
// nanoseconds through an anchor (a tick count and CLOCK_MONOTONIC read
// together) and a rate: the rate comes from the longest span measured so
// far (the first anchor to the newest), a new anchor is taken every ~50 ms
// (sooner in the first moments, while the span is short), and a stamp is
// converted from the newest anchor. A stamp then lands within a few
// microseconds of what CLOCK_MONOTONIC said at the time, also while NTP
// slews the clock; a launch's two stamps may be converted from two anchors,
// so its end can read up to that much off its start.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>

namespace kcap {

class TraceClock {
 public:
  enum class Source {
    kAuto,       // the counter where it is usable (above), else CLOCK_MONOTONIC
    kCounter,    // the counter wherever the CPU has one (tests)
    kMonotonic,  // CLOCK_MONOTONIC (tests)
  };
  // Reads the first anchor; with the counter, also spends about 200 us
  // measuring a first rate.
  explicit TraceClock(Source source = Source::kAuto);

  // CLOCK_MONOTONIC when the clock was made: timeNs 0.
  uint64_t startMonotonicNs() const { return startNs_; }
  // True when stamps are counter ticks (false: CLOCK_MONOTONIC ns).
  bool counting() const { return counter_; }

  // Now, as an opaque stamp (any thread, no lock, no ordering).
  uint64_t stamp() const noexcept { return counter_ ? readCounter() : monotonicNs(); }
  // A stamp as nanoseconds since startMonotonicNs() (0 for one before it).
  uint64_t toNs(uint64_t stamp) noexcept;
  uint64_t nowNs() noexcept { return toNs(stamp()); }
  // How many stamp units `ns` nanoseconds span at the current rate (at
  // least 1 for a nonzero span; saturates): a deadline in stamps, for
  // comparing stamps with it on a hot path instead of converting each.
  uint64_t stampsIn(uint64_t ns) const noexcept;

  static uint64_t monotonicNs() noexcept;
  static uint64_t readCounter() noexcept;

 private:
  struct Anchor {
    uint64_t ticks = 0;
    uint64_t ns = 0;
  };
  static Anchor readAnchor() noexcept;
  void reanchor(uint64_t ticks) noexcept;

  bool counter_ = false;
  uint64_t startNs_ = 0;
  Anchor first_;
  uint64_t reanchorTicks_ = 0;  // ~50 ms of ticks

  // The newest anchor and rate, read by any thread under a sequence lock
  // (odd while being written); written under reanchorMutex_.
  std::atomic<uint32_t> sequence_{0};
  std::atomic<uint64_t> anchorTicks_{0};
  std::atomic<uint64_t> anchorNs_{0};
  std::atomic<double> nsPerTick_{1.0};
  std::mutex reanchorMutex_;
};

}  // namespace kcap
