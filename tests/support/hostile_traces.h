// The hostile-trace corpus: files an attacker or a damaged disk could hand
// to kcap, each small, most with valid checksums, each aimed at one way a
// reader or replay could be made to crash, allocate without bound, run
// without bound, or mislead (wrapped offsets, sizes that decompression
// cannot back, contents that claim gigabytes through deduplicated pieces,
// terminal controls in names, damage worth thousands of findings).
// tests/replay/hostile_corpus_test.cpp runs every reading command and replay
// (against the driver double) over them under memory and time limits;
// kcap_make_hostile_traces writes them for a person or the fuzzer.
#pragma once

#include <string>
#include <vector>

namespace kcap::test {

struct HostileTrace {
  std::string name;  // file name in the directory
  std::string what;  // what it aims at, one line
  // What `kcap check` must say: 0 for a trace that is valid however odd
  // (terminal controls, a 60,000-byte name, a 16 GiB snapshot of zeros), 1
  // for the rest.
  int checkExit = 1;
  // What `kcap replay --all` against the driver double must exit with: 0
  // every launch reproduced, 1 refused as a trace problem (never 3 or 4: a
  // damaged trace is not a kernel that differs or faults).
  int replayExit = 1;
};

// Writes the corpus into `dir` (which must exist), the event-level cases as
// edits of `recorded`, an intact trace recorded against the driver double
// with at least one launch that has a pre- and a post-state. Returns the
// cases in the order written. Throws std::runtime_error when `recorded`
// lacks what a case edits.
std::vector<HostileTrace> writeHostileTraces(const std::string& dir, const std::string& recorded);

}  // namespace kcap::test
