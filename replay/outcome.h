// What replaying one launch found: the report's rows. Plain data, with an
// encoding (a line of JSON, then `end`) so that the replay process
// (isolation.h) can hand outcomes to the parent over a pipe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "compare.h"

namespace kcap::replay {

enum class Verdict {
  kReproduced,  // every compared byte as recorded
  kDiffers,     // some compared byte not as recorded
  kUnverified,  // ran; the trace has no post-state to compare with (pre mode, or the recorded run ended first)
  kFault,       // the launch failed with a CUDA error (sticky or not)
  kHang,        // the launch did not finish within the timeout
  kError,       // could not be replayed (trace lacks what is needed, code cannot run here, ...)
  kSkipped,     // not run: an earlier launch of the same sequence failed
};
const char* verdictName(Verdict verdict);  // "REPRODUCED", "DIFFERS", ...

enum class MemoryPath { kNone, kFixed, kRelocated, kMixed };
const char* memoryPathName(MemoryPath path);  // "fixed-va", "relocated", ...

struct BufferReport {
  uint64_t address = 0;  // recorded base of the compared range
  uint64_t size = 0;
  std::string label;  // "param 2", "global counter", "buffer"
  uint64_t differingBytes = 0;
  std::optional<uint64_t> firstOffset;
  std::optional<ElementStats> stats;  // with --dtype
  bool withinTolerance = false;       // with --tolerance: the differences are accepted
};

// What one replay-time checker (checkers.h) found for a launch.
enum class CheckStatus { kClean, kFinding, kNotRun, kError };
const char* checkStatusName(CheckStatus status);  // "clean", "finding", "not-run", "error" (as in --json)

struct CheckFinding {
  std::string name;  // "determinism", "unwritten", ...
  CheckStatus status = CheckStatus::kNotRun;
  std::string summary;               // one line
  std::vector<std::string> details;  // one line each: ranges, offsets, counts
};

struct LaunchOutcome {
  uint64_t launchIndex = 0;
  std::string kernel;
  uint32_t grid[3] = {0, 0, 0};
  uint32_t block[3] = {0, 0, 0};
  uint32_t sharedMemBytes = 0;
  Verdict verdict = Verdict::kError;
  std::string detail;  // fault/error text, or what was relocated
  MemoryPath memory = MemoryPath::kNone;
  std::string code;                   // "sass sm_90", "ptx compute_80 (JIT)", "override FILE"
  std::vector<BufferReport> buffers;  // every compared range (differing or not)
  // Restoring the pre-state: bytes copied to the GPU and the wall time it took
  // (reading and decompressing the trace included). placeNs: the time before
  // that, placing the device memory (reserving, mapping, allocating) and
  // loading the code and allocating page-locked buffers. restoreWaitNs: the
  // part of restoreNs spent waiting for copies to the GPU (the rest reads
  // and decodes the trace): close to restoreNs, the restore is bound by the
  // bus; close to zero, by reading the trace.
  // uploadedBytes: of restoredBytes, those copied to the GPU (pieces whose
  // hashes on the device matched were left as they were: piece_hashes.h).
  // readBackBytes: bytes of the post-state read back to compare (all of it,
  // or the pieces whose hashes differ).
  uint64_t restoredBytes = 0;
  uint64_t uploadedBytes = 0;
  uint64_t readBackBytes = 0;
  uint64_t restoreNs = 0;
  uint64_t restoreWaitNs = 0;
  uint64_t placeNs = 0;
  // --repeat: GPU time of the launch in ns (CUDA events)
  std::vector<uint64_t> timesNs;
  std::optional<uint64_t> recordedDurationNs;
  std::vector<CheckFinding> checks;  // --check
  // A graph launch's outcome: launchIndex is its graphLaunchIndex, kernel
  // says what it runs ("exec 0x..., 11 nodes: 4 kernels, ..."), and with
  // --graph-nodes each node's line ("node 2 (axpy): ran").
  bool graph = false;
  std::vector<std::string> nodeLines;
};

// Launches and graph launches in one list of keys (the replay process's
// messages, isolation.cpp): a graph launch's index with the top bit set.
constexpr uint64_t kGraphLaunchKey = uint64_t{1} << 63;
inline uint64_t outcomeKey(const LaunchOutcome& o) { return o.graph ? o.launchIndex | kGraphLaunchKey : o.launchIndex; }

std::string encodeOutcome(const LaunchOutcome& outcome);
// One word of the replay process's other messages (isolation.cpp): no
// spaces, '=', '%' or line breaks.
std::string escapeField(const std::string& text);
std::string unescapeField(const std::string& text);
// Parses what encodeOutcome wrote; nullopt if malformed.
std::optional<LaunchOutcome> decodeOutcome(const std::string& text);

}  // namespace kcap::replay
