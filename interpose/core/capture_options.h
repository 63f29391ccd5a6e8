// What to record: the KCAP_* settings, read once when recording starts.
//
//   KCAP_OUTPUT        trace path; %p pid, %h host name, %r rank, %% a '%'.
//                      Unset or empty: the shim records nothing (pure pass-through).
//   KCAP_MODE          full (default): reachable memory before and after each launch
//                      pre: before only; metadata: no memory at all, no synchronization
//                      checkpoint: metadata, plus checkpoints of all live device memory
//                      (docs/checkpoint.md)
//   KCAP_CHECKPOINT_EVERY  checkpoint mode: a duration (500ms, 2s, 1m; default 1s)
//                      or a number of launches (1000launches) between checkpoints
//   KCAP_INCLUDE       pattern (name_pattern.h); only launches of kernels whose
//                      name it matches (anywhere in the name) are recorded
//   KCAP_EXCLUDE       pattern; launches of kernels it matches are not
//   KCAP_SKIP          skip the first K launches that pass the filters
//   KCAP_MAX_LAUNCHES  then record at most N of them
//   KCAP_LEVEL         zstd compression level (default 1)
//   KCAP_PIECE_SIZE    bytes per content piece, K/M suffixes allowed (default 1M)
//   KCAP_BUFFER        memory for snapshots not yet written to the file (default 256M)
//   KCAP_FLUSH         launch (default in full and pre modes): each launch's record
//                      and the memory it references are in the file before the
//                      launch runs; batch: written behind the program, in batches
//   KCAP_TIMING        1: also record each launch's GPU duration (CUPTI); 0 or
//                      unset: not
//   KCAP_HASH          device (default): a large range of device memory is hashed
//                      on the GPU first and only the pieces the trace lacks are
//                      copied; host: every range is copied and hashed on the host
//
// `kcap record` has a flag for each (and validates them with the same code).
// Pure logic: no CUDA, no I/O; the caller passes the variable lookup.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "name_pattern.h"

namespace kcap {

enum class CaptureMode : uint8_t { kFull, kPreOnly, kMetadata, kCheckpoint };

const char* captureModeName(CaptureMode mode);  // "full", "pre", "metadata", "checkpoint"

// Whether a launch records only its facts (no snapshots, no synchronization,
// one event that carries the call's outcome): metadata and checkpoint modes.
inline bool perLaunchMetadataOnly(CaptureMode mode) {
  return mode == CaptureMode::kMetadata || mode == CaptureMode::kCheckpoint;
}

// When the writer must have put a launch's record into the file. kLaunch:
// before the launch runs, so that a launch that kills the process (or a
// SIGKILL during it) is on record, at the cost of waiting for every byte of
// memory the trace has not seen to be compressed and written. kBatch: the
// file is written behind the program; SIGKILL loses what was not yet
// written, every other exit path still writes everything.
enum class FlushPolicy : uint8_t { kLaunch, kBatch };

const char* flushPolicyName(FlushPolicy policy);  // "launch", "batch"

// What fires the flight recorder (KCAP_TRIGGER, `kcap record --trigger`).
struct TriggerSet {
  bool error = false;        // a CUDA call returned a sticky error
  bool signal = false;       // SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL, SIGTERM, SIGUSR2
  bool exit = false;         // exit, _exit or _Exit with a non-zero status
  bool api = false;          // the program called kcap_trigger(reason)
  uint32_t hangSeconds = 0;  // 0: off; else a launch unfinished this long
  bool any() const { return error || signal || exit || api || hangSeconds != 0; }
  std::string text() const;  // as the list reads, "error,hang=30"; "" when none
};

// Parses a comma-separated list of triggers (error, signal, exit, api,
// hang=SECONDS). False if an item is not one of them: `bad` is that item.
bool parseTriggerList(std::string_view text, TriggerSet& out, std::string& bad);

// The most checkpoints a ring keeps (KCAP_RING, --ring).
constexpr uint32_t kMaxRingCheckpoints = 1000;

struct CaptureOptions {
  std::string output;  // the template, placeholders unexpanded
  CaptureMode mode = CaptureMode::kFull;
  std::string include;  // pattern sources, empty: none
  std::string exclude;
  uint64_t skip = 0;
  uint64_t maxLaunches = std::numeric_limits<uint64_t>::max();  // max: unlimited
  int zstdLevel = 1;                                            // format::TraceWriter::Options' default (why 1: there)
  uint32_t pieceSize = 1u << 20;
  // Bytes of snapshots the writer may hold before the launching thread
  // waits for the file (format::TraceWriter::Options::maxPendingBytes):
  // more lets a burst of fresh memory be captured at memory speed and
  // written out behind the program, at the cost of that much RAM.
  uint64_t bufferBytes = uint64_t{256} << 20;
  FlushPolicy flush = FlushPolicy::kLaunch;  // metadata mode never waits for the file
  bool timing = false;                       // kernelTiming events through CUPTI (cupti_timing.h)
  bool hashOnDevice = true;                  // memory_snapshot.h, device_hash.h
  // The writer's threads under SCHED_IDLE (format::ThreadPlacement::idle):
  // metadata and checkpoint modes only.
  bool idleWriter = false;
  // The CPUs the writer's threads may run on (format::ThreadPlacement::cpus),
  // each one the process may run on; empty: the process's own.
  std::vector<unsigned> writerCpus;
  // Checkpoint mode: the interval between checkpoints, in time or in
  // launches (exactly one of the two is not 0).
  uint64_t checkpointEveryNs = 1'000'000'000;
  uint64_t checkpointEveryLaunches = 0;
  // Checkpoint mode: the device whose memory the checkpoints hold (-1: the
  // device of the first launch). With several devices in one process, the
  // first checkpoint waits for a launch on this one.
  int checkpointDevice = -1;
  // The flight recorder (docs/checkpoint.md): with any trigger set, events
  // and pieces go to a ring in memory (bounded by bufferBytes) that keeps
  // the last ringCheckpoints checkpoints, and the file is written only when
  // a trigger fires.
  TriggerSet triggers;
  uint32_t ringCheckpoints = 2;
  // Past bufferBytes, the ring moves pieces to a ring file beside the
  // output, unnamed, up to this many bytes (0: none; past the buffer older
  // checkpoints are dropped).
  uint64_t ringDiskBytes = uint64_t{8} << 30;
  // Checkpoint mode: page-locked memory for reading back, without waiting
  // for the call, what NCCL calls and copies from other devices wrote
  // (record/written_readback.h). A call whose bytes would not fit, and
  // every call when 0, is waited for and read back at once.
  uint64_t readbackBytes = uint64_t{256} << 20;

  // Compiled once by readCaptureOptions; shared, immutable.
  std::shared_ptr<const NamePattern> includePattern;
  std::shared_ptr<const NamePattern> excludePattern;

  // True if launches of `kernelName` pass the include / exclude filters.
  bool selects(std::string_view kernelName) const;

  // Name -> value, as recorded in TraceBegin.options.
  std::vector<std::pair<std::string, std::string>> describe() const;
};

// An invalid setting: which variable, the value it had, and what is wrong.
class OptionError : public std::runtime_error {
 public:
  OptionError(std::string variable, std::string value, const std::string& reason);
  const std::string& variable() const { return variable_; }
  const std::string& value() const { return value_; }
  const std::string& reason() const { return reason_; }

 private:
  std::string variable_;
  std::string value_;
  std::string reason_;
};

// Looks a variable up; nullptr when unset. (getenv in the shim.)
using VariableLookup = std::function<const char*(const char* name)>;

// The variables readCaptureOptions reads, in the order it reads them.
const std::vector<const char*>& captureVariables();

// nullopt when KCAP_OUTPUT is unset or empty (recording off). Throws
// OptionError for the first invalid setting.
std::optional<CaptureOptions> readCaptureOptions(const VariableLookup& lookup);

// The rank for %r: the first of RANK, LOCAL_RANK, SLURM_PROCID,
// OMPI_COMM_WORLD_RANK that is set and not empty, else "0".
std::string rankFromEnvironment(const VariableLookup& lookup);

// Expands the placeholders of an output template. Throws OptionError
// (variable KCAP_OUTPUT) for an unknown placeholder or a lone trailing '%'.
std::string expandOutputPath(const std::string& pattern, long pid, std::string_view host, std::string_view rank);

// True if the template has a %p placeholder.
bool outputHasPid(const std::string& pattern);

// "dir/trace.kcap" -> "dir/trace.<pid>.kcap" ("trace" -> "trace.<pid>"): the
// name a descendant process uses when the template has no %p, so that it
// never overwrites its parent's trace.
std::string withPidSuffix(const std::string& path, long pid);

// Parses a checkpoint interval: a duration ("500ms", "2s", "1m", "250us")
// or a number of launches ("1000launches"). Sets exactly one of the two
// outputs; false if malformed, zero or too large.
bool parseCheckpointInterval(std::string_view text, uint64_t& ns, uint64_t& launches);

// Parses a byte count with an optional K, M or G suffix (powers of 1024,
// optionally followed by "iB" or "B"). nullopt if malformed or too large.
std::optional<uint64_t> parseByteCount(std::string_view text);

}  // namespace kcap
