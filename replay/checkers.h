// Replay-time checkers (`kcap replay --check NAME`): after a launch replayed,
// replay it again in controlled ways and report what that shows about the
// kernel: races, outputs it leaves unwritten, reads of memory the program
// never wrote, accesses past an allocation's end, dependence on aliasing
// (docs/replay.md, "Checkers", defines each exactly).
//
// The checkers run in the replay process, through CheckTarget (the Replayer
// gives them one per launch); `sanitizer` runs compute-sanitizer on a
// separate `kcap replay` and is started by the tool (runSanitizer).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "device_memory.h"
#include "outcome.h"
#include "replay_options.h"
#include "trace_model.h"

namespace kcap::replay {

// What a checker may do with the launch being checked. Addresses are the
// recorded ones; the target translates them to where replay placed memory.
class CheckTarget {
 public:
  virtual ~CheckTarget() = default;
  virtual const LaunchRecord& launch() const = 0;
  virtual const TraceModel& model() const = 0;
  virtual const ReplayOptions& options() const = 0;
  virtual format::TraceReader& reader() = 0;
  std::vector<uint8_t> recorded(schema::Content::Reader content) { return reader().readContent(content); }
  virtual void restore() = 0;  // the recorded pre-state, every range, stored pointers rewritten
  virtual void write(uint64_t recordedAddress, const uint8_t* data, uint64_t size) = 0;
  virtual std::vector<uint8_t> read(uint64_t recordedAddress, uint64_t size) = 0;
  virtual std::vector<uint8_t> params() = 0;           // recorded parameter bytes, pointer words translated
  virtual void run(std::vector<uint8_t>& params) = 0;  // launch and wait (throws CudaError)
  // Memory outside the recorded ranges: a separate allocation (replay address).
  virtual uint64_t scratch(uint64_t size) = 0;
  virtual void writeDevice(uint64_t replayAddress, const uint8_t* data, uint64_t size) = 0;
  virtual std::vector<uint8_t> readDevice(uint64_t replayAddress, uint64_t size) = 0;
  // Every recorded range placed again with a guard after its end.
  virtual const std::vector<DeviceMemory::GuardedSpan>& placeGuarded() = 0;
  // Set by a checker whose launch ended the context (a sticky error).
  bool contextLost = false;
};

// The checkers that run in the replay process, by name, in the order they
// run (overrun last: a fault ends the process's context).
struct Checker {
  const char* name;
  const char* description;
  CheckFinding (*run)(CheckTarget& target);
};
const std::vector<Checker>& checkers();
// Every name --check accepts (the table above, and "sanitizer").
std::vector<std::string> checkNames();

// Runs options.checks (those of the table) on the launch just replayed;
// appends one CheckFinding per check to outcome.checks. Returns false when a
// sticky CUDA error ended the context (the caller reports, then stops).
bool runChecks(CheckTarget& target, LaunchOutcome& outcome);

// The determinism finding from the bytes that varied between runs:
// varies[r][b] for byte b of range r (labelled labels[r]). `runs` says what
// was repeated ("5 runs from the same pre-state"), `cause` what varying
// outputs point at. Used for one launch and for a whole sequence.
CheckFinding determinismFinding(const std::vector<std::string>& labels, const std::vector<std::vector<bool>>& varies,
                                const std::string& runs, const std::string& cause);

// "Never written before the launch" (the uninit check): the recorded bytes
// each device range held from the program before the launch, as sorted,
// disjoint [begin, end) intervals of recorded addresses. Pure.
std::vector<std::pair<uint64_t, uint64_t>> writtenBefore(const TraceModel& model, format::TraceReader& reader,
                                                         const LaunchRecord& launch);

// compute-sanitizer: where it is ("" when not found): $KCAP_COMPUTE_SANITIZER,
// then PATH, then $CUDA_HOME/bin and /usr/local/cuda/bin.
std::string findComputeSanitizer();
// Replays launch `launchIndex` of options.tracePath under each of its tools
// (memcheck, racecheck, initcheck): `kcapPath replay FILE --launch N
// --no-isolate`. One finding named "sanitizer".
CheckFinding runSanitizer(const ReplayOptions& options, uint64_t launchIndex, const std::string& kcapPath);

}  // namespace kcap::replay
