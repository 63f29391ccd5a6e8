// The flight recorder's hang trigger (--trigger hang=SECONDS): a thread
// that, once a second, records an event (through the real driver, never
// the shim's hooks) on each stream launches were recorded on since it last
// looked, and fires when one recorded SECONDS ago or more has still not
// completed (cuEventQuery): the stream's work, up to the last launch
// recorded on it then, has not finished.
//
// It never waits on the program's streams: cuEventRecord and cuEventQuery
// only. It records nothing while any stream is capturing into a graph (an
// event recorded there would join the capture), and skips launches that
// were captured or went to the per-thread default stream (the watchdog's
// own thread would name another stream). One event at a time per stream:
// a stream whose last event is pending gets no new one. An event on the
// legacy default stream (0) is ordered, as all work there is, after the
// prior work of the blocking streams: a barrier once a second at most.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <unordered_map>

namespace kcap {

class HangWatchdog {
 public:
  struct Hang {
    uint64_t stream = 0;
    uint64_t launchIndex = 0;  // the last launch recorded on it when its event was recorded
    uint32_t seconds = 0;
  };
  // `capturing`: true while a stream capture is in progress. `fire`: called
  // on the watchdog's thread once, when a hang is found; the watchdog then
  // stops.
  HangWatchdog(uint32_t seconds, std::function<bool()> capturing, std::function<void(const Hang&)> fire);
  HangWatchdog(const HangWatchdog&) = delete;
  HangWatchdog& operator=(const HangWatchdog&) = delete;

  // Starts the thread (detached: it may outlive any wait for it at exit).
  // False if it could not.
  bool start() noexcept;
  // A launch was recorded (from the writer, in seq order; quick).
  void launched(uint64_t stream, uint64_t context, uint64_t launchIndex) noexcept;
  // Asks the thread to stop at its next wake-up; does not wait for it.
  void stop() noexcept;

 private:
  struct Shared;
  std::shared_ptr<Shared> shared_;  // with the thread, which may outlive this object
};

}  // namespace kcap
