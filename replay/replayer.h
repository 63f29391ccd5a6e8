// Replays recorded launches in this process: the engine behind `kcap replay`.
//
// For each launch: place the memory it could reach (device_memory.h),
// restore the recorded pre-launch bytes, load its code (code_cache.h), launch
// it with the recorded configuration and parameters (pointer words rewritten
// where memory moved), wait, and compare every reachable range with the
// recorded post-launch bytes. Uses the driver: run it in a process that may
// die (isolation.h), since a faulting kernel poisons its context for good.
#pragma once

#include <cuda.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "code_cache.h"
#include "device_memory.h"
#include "outcome.h"
#include "replay_options.h"
#include "trace_model.h"

namespace kcap::replay {

struct Driver;

// An outcome naming the launch as recorded (kernel, grid, block, shared
// memory, recorded duration), its verdict still to be decided.
LaunchOutcome outcomeOf(const LaunchRecord& launch);

// Thrown by Replayer::run after it reported a sticky FAULT: the context
// cannot be used again, so the process must end.
struct ContextLost {};

// True when `next` was launched with programmatic stream serialization on the
// stream `previous` ran on, with no recorded copy or memset between: the
// two may overlap on the GPU, and a sequence replay submits them so.
bool startsBeforeEnd(const TraceModel& model, const LaunchRecord& previous, const LaunchRecord& next);
// The recorded addresses of the ranges a launch changed (post-state differs from pre-state).
std::set<uint64_t> rangesChangedBy(const LaunchRecord& launch);

class Replayer {
 public:
  // Opens the driver, selects the device. Throws ReplayError.
  Replayer(const TraceModel& model, format::TraceReader& reader, const ReplayOptions& options);
  ~Replayer();

  // Called right before each launch is submitted (the watchdog starts then);
  // `so_far` holds what is known before the launch (memory path, code).
  std::function<void(const LaunchOutcome& so_far)> onLaunchStart;
  // Called when it completed (before the comparison, which can take a while).
  std::function<void(uint64_t launchIndex)> onLaunchEnd;

  // Runs the selection, handing each outcome to `report` as it is known. A
  // sticky CUDA error ends the run after its FAULT outcome (the context is
  // unusable): the caller starts a new process for the rest.
  void run(const Selection& selection, const std::function<void(const LaunchOutcome&)>& report);

  int smVersion() const { return sm_; }
  const std::string& deviceName() const { return deviceName_; }

 private:
  static uint64_t nsSince(std::chrono::steady_clock::time_point start);
  friend class LaunchCheckTarget;  // checkers.h: --check replays the launch again
  LaunchOutcome replayLaunch(const LaunchRecord& launch, const std::function<void()>& place,
                             const std::function<void(const LoadedKernel&)>& prepare,
                             const std::function<void(const LaunchOutcome&)>& report);
  void runSequence(const std::vector<const LaunchRecord*>& launches,
                   const std::function<void(const LaunchOutcome&)>& report);
  void runSequenceForDeterminism(const std::vector<const LaunchRecord*>& launches,
                                 const std::function<void(const LaunchOutcome&)>& report);
  void restore(const LaunchRecord& launch, const LoadedKernel& kernel, bool all);
  void applyMemoryOp(const StoredEvent& op);
  void applyMemoryOpOnStream(const StoredEvent& op);
  void applyCopyRows(const StoredEvent& op);
  void launchOnce(const LaunchRecord& launch, const LoadedKernel& kernel, std::vector<uint8_t>& params,
                  bool synchronize = true);
  std::vector<uint8_t> buildParams(const LaunchRecord& launch, const LoadedKernel& kernel);
  std::optional<CUtensorMap> reencode(schema::TensorMapEncode::Reader encode, uint64_t seq, const LoadedKernel& kernel);
  void saveOutputs(const LaunchRecord& launch, const LoadedKernel& kernel);
  void saveRegions(const std::vector<Region>& regions);
  void writeFile(const std::string& path, const uint8_t* bytes, uint64_t size);
  void compare(const LaunchRecord& launch, const LoadedKernel& kernel, LaunchOutcome& outcome,
               const std::set<uint64_t>& comparedLater = {});
  void timeRepeats(const LaunchRecord& launch, const LoadedKernel& kernel, std::vector<uint8_t>& params,
                   LaunchOutcome& outcome);
  std::optional<uint64_t> translate(uint64_t recorded, const LoadedKernel& kernel) const;
  void restoreContent(schema::Content::Reader content, CUdeviceptr dst);
  void copyToDevice(CUdeviceptr dst, const uint8_t* src, uint64_t size);
  void copyFromDevice(uint8_t* dst, CUdeviceptr src, uint64_t size);
  uint8_t* staging(uint64_t size);
  static bool throughWindows(schema::Content::Reader content);
  void allocateRestoreBuffers(const LaunchRecord& launch);
  void allocateWindows();
  std::vector<Region> regionsOf(const LaunchRecord& launch) const;

  const TraceModel& model_;
  format::TraceReader& reader_;
  const ReplayOptions& options_;
  Driver& driver_;
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
  CUstream stream_ = nullptr;
  int sm_ = 0;
  std::string deviceName_;
  std::unique_ptr<DeviceMemory> memory_;
  std::unique_ptr<CodeCache> code_;
  uint8_t* staging_ = nullptr;  // page-locked, for copies both ways
  uint64_t stagingSize_ = 0;
  // restoreContent's page-locked windows (32 MiB each), used in turn: with
  // three, decoding is held up only when two copies are still queued. 32 MiB
  // restored 4 GiB at a median 81% of pinned H2D on the H200 against 75% for
  // 64 MiB and 78% for 16 (docs/benchmarks.md, 6 runs each).
  static constexpr size_t kRestoreWindows = 3;
  uint8_t* windows_[kRestoreWindows] = {};
  CUevent windowDone_[kRestoreWindows] = {};
#ifndef KCAP_RESTORE_WINDOW_MIB  // (a build-time knob for bench/replay_throughput.py comparisons)
#define KCAP_RESTORE_WINDOW_MIB 32
#endif
  static constexpr uint64_t kRestoreWindow = uint64_t{KCAP_RESTORE_WINDOW_MIB} << 20;
  // A sequence's launch that was recorded with programmatic stream
  // serialization right behind the launch being replayed: prepared with it
  // and submitted behind it with no synchronization between, so that the two
  // overlap on the GPU as they could in the program (a missing
  // cudaGridDependencySynchronize then shows).
  struct Companion {
    const LaunchRecord* launch = nullptr;
    LoadedKernel kernel;
    std::vector<uint8_t> params;
  };
  std::optional<Companion> companion_;
  // --check determinism on a sequence: compare() keeps each launch's
  // replayed outputs here, by launch index, in the order it compared them.
  struct KeptOutput {
    std::string label;  // "param 2 (0x7f..., 4096 bytes)"
    std::vector<uint8_t> bytes;
  };
  std::map<uint64_t, std::vector<KeptOutput>>* keptOutputs_ = nullptr;
  bool perLaunchChecks_ = true;             // false in sequences (their checks run over the whole sequence)
  std::optional<uint64_t> submittedAhead_;  // launchIndex of the companion last submitted
  std::set<uint64_t> restored_;             // recorded ranges restored in this run (sequences restore each once)
  uint64_t restoredBytes_ = 0;              // by the launch being prepared
  std::vector<uint64_t> reencodedFrom_;     // by the last buildParams: the seqs of the encodes re-run
  uint64_t restoreWaitNs_ = 0;              // of its restore, spent waiting for copies to the GPU
};

}  // namespace kcap::replay
