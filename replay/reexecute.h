// Replay of a checkpoint trace by re-execution (docs/checkpoint.md).
//
// Every checkpoint range and every device allocation of the trace is placed
// at its recorded address (parameters and memory hold raw pointers, which
// re-execution cannot rewrite); a checkpoint is restored; the events after
// it run again in recorded order on one stream (launches with their
// recorded parameters, host-to-device copies from their logged bytes,
// memsets, device-to-device copies); at the next checkpoint the device
// memory is hashed with the recording's change-hash kernel and compared,
// piece by piece, with the recorded hashes. The verdict is per interval
// between two checkpoints. While intervals reproduce, re-execution simply
// goes on (the state it reached is the next checkpoint's); after one that
// does not, the next restorable checkpoint is restored.
//
//   checkpoints.{h,cpp}           the checkpoints, their damage, the timeline (pure)
//   reexecute.{h,cpp}             the engine, in this process
//   reexecutor.h                  the engine's class
//   reexecute_stream.cpp          the events of an interval, submitted without waiting
//   reexecute_verify.cpp          the state reached hashed and compared with a checkpoint
//   reexecute_determinism.cpp     --check determinism: a differing interval run again
//   reexecute_isolation.cpp       the engine in a child process; reports across the pipe
//   reexecute_sides.cpp           kcap bisect: one side, each interval from its checkpoint
//   change_hash_image.cpp         the change-hash kernel's image, built in
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "isolation.h"
#include "outcome.h"
#include "replay_options.h"
#include "trace_model.h"

namespace kcap::replay {

enum class IntervalVerdict {
  kReproduced,       // every compared piece as recorded
  kDiffers,          // some piece not as recorded
  kFault,            // a launch (or copy) failed with a CUDA error
  kHang,             // a launch did not finish within the timeout
  kNotReexecutable,  // holds something re-execution cannot run (a graph launch, a copy without its data, ...)
  kUnverified,       // ran, or could not run, with nothing to compare with
};
const char* intervalVerdictName(IntervalVerdict verdict);  // "REPRODUCED", "NOT RE-EXECUTABLE", ...

// A checkpoint range whose pieces differ.
struct RangeDifference {
  uint64_t address = 0;
  uint64_t allocationBase = 0;
  std::string kind;  // "allocation", "moduleGlobal", ...
  uint64_t size = 0;
  uint64_t differingPieces = 0;
  uint64_t pieces = 0;
  std::optional<uint64_t> firstOffset;  // first differing byte in the range, when the recorded piece is in the file
  bool sameBytes = false;  // the recorded piece was read and equals the replayed one: its recorded hash is wrong
};

struct IntervalReport {
  uint64_t number = 0;                                   // the starting checkpoint's ordinal
  std::optional<uint64_t> fromCheckpoint, toCheckpoint;  // ordinals; none: the trace's start, or its end
  uint64_t firstLaunch = 1, lastLaunch = 0;              // launch indices; first > last when none
  IntervalVerdict verdict = IntervalVerdict::kUnverified;
  std::string detail;
  uint64_t bytesCompared = 0, piecesCompared = 0;
  std::vector<RangeDifference> differences;  // the first few differing ranges
  uint64_t differingRanges = 0;              // all of them
  std::optional<uint64_t> faultLaunch;       // kFault / kHang: the launch it happened in
  std::string faultKernel;
  // kFault / kHang while launches ran without waiting: the launch is one of
  // [first, last], not known which (reexecuteIsolated names it by running
  // the interval again with a wait after every launch).
  std::optional<std::pair<uint64_t, uint64_t>> faultAmong;
  bool foundByRerun = false;  // faultLaunch was found by that synchronized re-run
  // The pace: launches re-executed, the time from the first one's submission
  // to the last one's completion, and the program's time for the same
  // launches (between the two checkpoints' holds, from the trace's event
  // times; 0 when the trace does not say).
  uint64_t launchesRun = 0, reexecutionNs = 0, programNs = 0;
  std::vector<std::string> determinism;  // --check determinism: what running it again found, one line each
};

// What a re-execution is asked for.
struct ReexecutionRequest {
  // --launch N: from the last restorable checkpoint at or before N, up to
  // the next comparable checkpoint after N; none: every interval.
  std::optional<uint64_t> launch;
  // Wait for every launch to complete before the next (fault attribution);
  // otherwise launches go out back to back and are waited for where
  // something must be read back: the interval's end, a copy that needs it,
  // the determinism check's and kcap extract's hooks.
  bool synchronized = false;
  // With `launch`: no `launch` report for it (a re-run only for its interval).
  bool quiet = false;
};

// Told as the run goes.
class ReexecutionListener {
 public:
  virtual ~ReexecutionListener() = default;
  // The replay device is open.
  virtual void started(const ReplayDevice& /*device*/) {}
  // Placement, damaged checkpoints, where replay starts: one line each.
  virtual void note(const std::string& /*text*/) {}
  // Right before a launch is submitted, and when it completed (the watchdog),
  // when launches are waited for one by one (ReexecutionRequest::synchronized,
  // the hooks).
  virtual void launchStarting(uint64_t /*launchIndex*/) {}
  virtual void launchDone(uint64_t /*launchIndex*/) {}
  // Launches submitted without waiting: every few hundred, and before a
  // wait, the last one submitted (the watchdog runs until they complete);
  // as a wait goes, the last one known complete. Not called per launch.
  virtual void launchesQueued(uint64_t /*lastLaunchIndex*/) {}
  virtual void launchesCompleted(uint64_t /*lastLaunchIndex*/) {}
  // --launch N: the launch, once it ran (verdict kReproduced when it ran
  // cleanly, the interval says whether its results were right).
  virtual void launch(const LaunchOutcome& /*outcome*/) {}
  // An interval is about to run (`soFar`: what it covers), and its report.
  virtual void intervalStarting(const IntervalReport& /*soFar*/) {}
  virtual void interval(const IntervalReport& report) = 0;
};

// True when the trace was recorded with --mode checkpoint.
bool isCheckpointTrace(const TraceModel& model);

// Runs the re-execution in this process. A fault is reported as an interval
// verdict and ends the run. Throws ReplayError when nothing can run (no
// driver, the recorded addresses not granted, no intact checkpoint).
void reexecuteInProcess(const TraceModel& model, const ReplayOptions& options, const ReexecutionRequest& request,
                        ReexecutionListener& listener, ReplayDevice* device = nullptr);

// The same in a child process (isolation.h): a process that dies or hangs
// inside a launch gives that interval FAULT or HANG. A fault or hang found
// while launches ran without waiting is attributed by running the interval
// once more, in a fresh process, with a wait after every launch.
void reexecuteIsolated(const TraceModel& model, const ReplayOptions& options, const ReexecutionRequest& request,
                       ReexecutionListener& listener, ReplayDevice* device = nullptr);

// The change-hash kernel's image (interpose/record/change_hash.cuh), empty
// in a build without nvcc.
std::vector<uint8_t> changeHashImage();

}  // namespace kcap::replay
