// kcap bisect on a checkpoint trace (--mode checkpoint): the trace holds no
// per-launch memory, so launches are re-executed from the checkpoints
// (reexecute.h) instead of replayed one by one.
//
// Against the recording, each interval's end state is compared with the
// recorded checkpoint: the first interval that differs is as far as the
// recording can narrow it (it holds no per-launch outputs).
//
// Between two sides (force-ptx, override:KERNEL=IMAGE, two devices), each
// side runs in its own process, on the same GPU one after the other (or on
// its own GPU): first every interval, each from its recorded starting
// checkpoint, with the change hashes of all the end checkpoint's ranges
// compared between the sides; then, in the first interval whose end states
// differ, that interval again on each side with the ranges every launch's
// pointer parameters reach hashed after it. The first launch whose hashes
// differ is the first divergent launch (a linear pass over the interval's
// launches: intervals are short).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bisect.h"
#include "reexecute.h"
#include "trace_model.h"

namespace kcap::replay {

// One side's run of one interval.
struct SideInterval {
  uint64_t from = 0, to = 0;  // checkpoint ordinals
  uint64_t firstLaunch = 1, lastLaunch = 0;
  IntervalVerdict verdict = IntervalVerdict::kReproduced;  // kReproduced: it ran (compared with nothing yet)
  std::string detail;
  std::optional<uint64_t> faultLaunch;
  std::vector<uint64_t> endHashes;  // change hashes (high, low) of every piece of `to`'s ranges
};

// A range of the end checkpoint a launch reaches, and how many of the
// launch's hashed pieces are its.
struct SideRange {
  uint64_t address = 0;
  std::string kind;  // "allocation", "moduleGlobal", ...
  uint64_t size = 0;
  uint64_t pieceSize = 0;
  uint64_t pieces = 0;  // 0: a module global no loaded module holds, not hashed
};

// One launch's outputs on one side: the change hashes (high, low) of the
// pieces of the ranges its pointer words reach, range after range.
struct SideLaunch {
  uint64_t launchIndex = 0;
  std::vector<SideRange> ranges;
  std::vector<uint64_t> hashes;
};

struct SideRun {
  std::vector<SideInterval> intervals;
  std::vector<SideLaunch> launches;  // only when one interval was asked for
  std::vector<std::string> notes;
  std::string error;  // nothing could run on this side
};

struct CheckpointDivergence {
  IntervalReport interval;         // the first divergent interval
  std::optional<uint64_t> launch;  // the first divergent launch, when known
  std::string kernel;
  IntervalVerdict verdict = IntervalVerdict::kDiffers;  // kDiffers, kFault or kHang
  std::string why;                                      // one sentence
  std::vector<std::string> ranges;                      // the differing ranges, one line each
  std::string reproduce;                                // the kcap replay command that shows it
};

struct CheckpointBisectResult {
  std::optional<CheckpointDivergence> first;
  uint64_t intervals = 0;          // intervals run (on each side)
  uint64_t compared = 0;           // intervals whose end states were compared
  uint64_t notComparable = 0;      // intervals that could not be re-executed on a side
  uint64_t launchesHashed = 0;     // launches whose outputs were hashed on each side
  std::vector<std::string> notes;  // what the sides said (damaged checkpoints, ...)
};

// Throws ReplayError when no re-execution can run at all.
CheckpointBisectResult bisectCheckpoints(const TraceModel& model, const BisectOptions& options);

}  // namespace kcap::replay
