// kcap bisect: the first launch whose outputs diverge, and why.
//
// Two sides replay the same launches: side A as recorded (this GPU, the
// recorded code), side B changed in one respect (the PTX JIT path, another
// build of a kernel, another GPU), or, with `against recorded`, no side B:
// side A's outputs are compared with the recorded post-state.
//
// Independent launches (the default) each start from their own recorded
// pre-state: they are replayed in batches, in order, and the search stops at
// the first batch holding a divergence. Graph launches take their place among
// them, in trace order, each from its own recorded pre-state; when one
// diverges between two sides, the search descends into it: its nodes run one
// by one on each side, in the same order that respects the graph's edges
// (kcap replay --graph-nodes), and the first kernel node after which the
// memory it reaches differs between the sides is named. Against the
// recording there is nothing to descend with: the trace holds a graph
// launch's memory before and after it, not after each node. Dependent launches (--sequence) run
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

#include "isolation.h"
#include "outcome.h"
#include "replay_options.h"
#include "trace_model.h"

namespace kcap::replay {

enum class Against { kRecorded, kForcePtx, kOverride, kOtherDevice };

struct BisectOptions {
  ReplayOptions base;  // side A (and what both sides share: dtype, tolerance, timeout)
  Against against = Against::kRecorded;
  std::vector<KernelOverride> overrides;  // side B's: Against::kOverride, or kOtherDevice with another build
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

// The first kernel node of a divergent graph launch whose outputs differ
// between the sides when its nodes run one by one.
struct NodeDivergence {
  std::string path;                     // "node 2", "node 3 > node 0": the node in messages
  uint64_t index = 0;                   // its index in its graph's (or body's) node list
  uint64_t ordinal = 0;                 // among the graph launch's kernel nodes, in the order they ran
  std::string kernel;                   // its kernel's name
  Verdict verdict = Verdict::kDiffers;  // kDiffers, or kFault / kHang when it failed on a side
  std::vector<BufferReport> buffers;    // the ranges it reaches, side B against side A
};

struct Divergence {
  LaunchOutcome outcome;  // side B's outcome; buffers compare side B with side A (or the recording)
  std::string why;        // one sentence
  std::string reproduce;  // the kcap replay command that shows it alone
  // A graph launch (outcome.graph; outcome.launchIndex is its graphLaunchIndex):
  // the node found by descending into it, the kernel nodes before it whose
  // outputs agree ("node 0 (axpy)"), and why no node was named when none was.
  std::optional<NodeDivergence> node;
  std::vector<std::string> nodesAgreeing;
  std::string descent;
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
  uint64_t examined = 0;        // launches compared (graph launches included)
  uint64_t graphsExamined = 0;  // of those, graph launches
  uint64_t probes = 0;          // --sequence between two sides: prefixes replayed
  uint64_t notComparable = 0;   // launches that could not be replayed on one side (ERROR there)
  std::vector<PerfRegression> slower;
  uint64_t timed = 0;  // --perf: launches timed on both sides
  // Where side A's and side B's replays ran, as their replay processes
  // reported (side B: none when compared against the recording).
  std::optional<ReplayDevice> deviceA, deviceB;
};

// `launches`: launch indices in trace order; `graphLaunches`: graph launch
// indices, compared among them in trace order (independent launches only:
// --sequence and --perf take none). `progress(done, total)` is called as
// batches complete. Throws ReplayError when no replay can run.
BisectResult bisect(const TraceModel& model, const std::vector<uint64_t>& launches,
                    const std::vector<uint64_t>& graphLaunches, const BisectOptions& options,
                    const std::function<void(uint64_t, uint64_t)>& progress);

}  // namespace kcap::replay
