// What a replay is asked to do (kcap replay's options, as data).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "compare.h"

namespace kcap::replay {

struct KernelOverride {
  std::string kernelPattern;  // RE2 syntax (kernel_pattern.h), searched in the name: a plain name matches itself
  std::string imagePath;      // cubin, fatbin or PTX file
};

struct ReplayOptions {
  std::string tracePath;
  int device = 0;
  bool fixedAddresses = true;  // --no-fixed-va clears it
  bool forcePtx = false;
  std::vector<KernelOverride> overrides;
  std::optional<DType> dtype;             // for every compared buffer
  std::map<uint32_t, DType> paramDtypes;  // per pointer parameter (index in the parameter list)
  std::optional<Tolerance> tolerance;
  double timeoutSeconds = 10;       // per launch, from its start to its completion
  unsigned repeat = 0;              // timed repetitions after the verified run
  bool isolate = true;              // run in a child process (tests turn it off)
  std::vector<std::string> checks;  // --check NAME (checkers.h), in the order they run
  unsigned checkRuns = 5;           // --runs: replays per launch for the determinism check
  // When set, the replayed bytes of every range a launch could reach are
  // written to DIR/<launchIndex>-<recorded address in hex>.bin after the
  // launch (bisect compares two replays with them).
  std::string saveOutputsDir;
  // With saveOutputsDir, a sequence (--range) also writes the final bytes of
  // every range it placed, DIR/end-<address>.bin, when it completes cleanly.
  bool saveSequenceEnd = false;
  // Graph launches run node by node (--graph-nodes) instead of as a rebuilt graph.
  bool graphNodes = false;
};

// Which launches, and how: independent launches each start from their own
// recorded pre-state; a sequence starts from the first one's and runs the
// rest in order with the recorded memory operations between them.
struct Selection {
  std::vector<uint64_t> launchIndices;  // in trace order
  bool sequence = false;
  // Graph launches (graphLaunchIndex), each from its own recorded memory,
  // after the launches.
  std::vector<uint64_t> graphLaunchIndices = {};
};

}  // namespace kcap::replay
