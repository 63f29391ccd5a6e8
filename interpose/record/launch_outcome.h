// LaunchOutcome: how a launch event handed to the writer before its call
// learns how the call went.
//
// In metadata and checkpoint modes a launch is one event that carries its
// outcome (Launch.ended, result, callNs). The launching thread hands the
// event to the writer before the driver call, so that a launch during which
// the process dies is in the trace, and after the call only stores the
// outcome into the event: plain stores to a line of its own, the state last
// with release order (no locked instruction, no line another thread
// writes). Measured against handing it over after the call, it costs the
// same (docs/benchmarks.md, sixteen launching threads).
//
// The writer's side waits for the outcome where it builds the event, on a
// thread of its own, never on the launching thread's append. The wait is
// bounded: a call that never returns (the process is dying in it, the
// driver hangs) must not keep the trace from being written. Past the bound
// the event is built without its outcome (`ended` false: the call had not
// returned), and the object is never reused, since the launching thread may
// still write into it.
#pragma once

#include "core/trace_clock.h"

#include <cuda.h>

#include <atomic>
#include <chrono>
#include <cstdint>

namespace kcap {

struct LaunchOutcome {
  enum State : uint8_t {
    kPending,        // the call is in progress
    kReturned,       // endStamp and result hold
    kNeverReturned,  // the thread making the call died in it (a fatal signal)
  };

  // How long the writer waits for a call to return. A launch call that
  // blocks because the device's queue is full returns when the device
  // drains it; one blocked longer than this is taken as one that will
  // not return.
  static constexpr std::chrono::seconds kWait{10};

  // A line of its own: the writer's merger writes the event's other lines
  // (its launch number) while the call runs.
  alignas(64) std::atomic<uint8_t> state{kPending};
  const TraceClock* clock = nullptr;
  uint64_t endStamp = 0;
  CUresult result = CUDA_SUCCESS;

  // The launching thread, before the hand-over.
  void reset(const TraceClock* eventClock) noexcept {
    state.store(kPending, std::memory_order_relaxed);
    clock = eventClock;
    endStamp = 0;
    result = CUDA_SUCCESS;
  }
  // The launching thread, right after the call: no locked instruction.
  void returned(CUresult callResult) noexcept {
    endStamp = clock->stamp();
    result = callResult;
    state.store(kReturned, std::memory_order_release);
  }
  // The launching thread, in a fatal signal's handler (async-signal-safe).
  void neverReturned() noexcept { state.store(kNeverReturned, std::memory_order_release); }

  // The writer's side: the state once it is known, or kPending when the
  // wait ran out (kWait, or sooner after hurry()).
  State await() const noexcept;

  // From now on every wait gives up at most `within` from now: the
  // recording is ending, and a call still in progress may never return (a
  // fatal signal; a thread that holds the driver's lock died). Async-
  // signal-safe. relax() undoes it for a new recording.
  static void hurry(std::chrono::milliseconds within) noexcept;
  static void relax() noexcept;
};

}  // namespace kcap
