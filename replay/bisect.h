// kcap bisect: the first launch whose outputs diverge, and why.
//
// Two sides replay the same launches: side A as recorded (this GPU, the
// recorded code), side B changed in one respect (the PTX JIT path, another
// build of a kernel, another GPU), or, with `against recorded`, no side B:
// side A's outputs are compared with the recorded post-state.
//
// Independent launches (the default) each start from their own recorded
// pre-state: they are replayed in batches, in order, and the search stops at
// the first batch holding a divergence. Dependent launches (--sequence) run
// as one sequence from the first launch's pre-state: against the recording,
// one pass compares every launch with its recorded post-state; between two
// sides, a bisection over prefixes [first..m] (each compared in full: every
// launch's outputs and the final memory state) replays O(log n) prefixes
// instead of every one.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "outcome.h"
#include "replay_options.h"
#include "trace_model.h"

namespace kcap::replay {

enum class Against { kRecorded, kForcePtx, kOverride, kOtherDevice };

struct BisectOptions {
  ReplayOptions base;  // side A (and what both sides share: dtype, tolerance, timeout)
  Against against = Against::kRecorded;
  std::vector<KernelOverride> overrides;  // Against::kOverride
  int otherDevice = 1;                    // Against::kOtherDevice
  bool sequence = false;
  bool perf = false;             // time both sides instead of comparing outputs
  double thresholdPercent = 10;  // --perf: report launches slower by more than this
  unsigned perfRepeat = 10;
  size_t batch = 64;  // launches a replay process takes at a time
};

// Side B's options (side A's for Against::kRecorded).
ReplayOptions sideB(const BisectOptions& options);
std::string describeSide(const BisectOptions& options, bool b);  // "SASS as recorded", "PTX (--force-ptx)", ...
// The flags that make `kcap replay` run as side B does (" --force-ptx", ...).
std::string sideBReplayFlags(const BisectOptions& options);

struct Divergence {
  LaunchOutcome outcome;  // side B's outcome; buffers compare side B with side A (or the recording)
  std::string why;        // one sentence
  std::string reproduce;  // the kcap replay command that shows it alone
};

struct PerfRegression {
  uint64_t launchIndex = 0;
  std::string kernel;
  uint64_t baseNs = 0;   // side A median (or the recorded duration)
  uint64_t otherNs = 0;  // side B median (or side A's replay, against the recording)
  double percent = 0;    // how much slower
};

struct BisectResult {
  std::optional<Divergence> first;
  uint64_t examined = 0;       // launches compared
  uint64_t probes = 0;         // --sequence between two sides: prefixes replayed
  uint64_t notComparable = 0;  // launches that could not be replayed on one side (ERROR there)
  std::vector<PerfRegression> slower;
  uint64_t timed = 0;  // --perf: launches timed on both sides
};

// `launches`: launch indices in trace order. `progress(done, total)` is
// called as batches complete. Throws ReplayError when no replay can run.
BisectResult bisect(const TraceModel& model, const std::vector<uint64_t>& launches, const BisectOptions& options,
                    const std::function<void(uint64_t, uint64_t)>& progress);

}  // namespace kcap::replay
