// Replays recorded launches in this process: the engine behind `kcap replay`.
//
// For each launch: place the memory it could reach (device_memory.h),
// restore the recorded pre-launch bytes, load its code (code_cache.h), launch
// it with the recorded configuration and parameters (pointer words rewritten
// where memory moved), wait, and compare every reachable range with the
// recorded post-launch bytes. Uses the driver: run it in a process that may
// die (isolation.h), since a faulting kernel poisons its context for good.
//
// The Replayer's parts, one job each:
//   replayer.cpp        the device; one launch from placing its memory to its checks
//   memory_restore.cpp  the recorded pre-state, and the copies and memsets between launches
//   launch_params.cpp   parameter bytes, pointer words, tensor maps re-encoded
//   post_state.cpp      replayed outputs against the recorded post-state; saved outputs
//   sequence.cpp        a run of launches in order, overlapping where the program let them
//   graph_replay.cpp    graph launches: their graph rebuilt (graph_rebuild.h) or run node by node
//
// Checkpoint traces (--mode checkpoint) are replayed by re-execution instead
// (reexecute.h), on these same parts.
#pragma once

#include <capnp/message.h>
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
class RebuiltGraph;
class PieceHasher;

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

// What a run tells its caller as it goes.
class ReplayListener {
 public:
  virtual ~ReplayListener() = default;
  // Right before a launch is submitted, a checker's launches too (the
  // watchdog starts then); `soFar` holds what is known before the launch
  // (memory path, code).
  virtual void launchStarting(const LaunchOutcome& /*soFar*/) {}
  // When it completed (before the comparison, which can take a while).
  virtual void launchDone(uint64_t /*launchIndex*/) {}
  // A launch's outcome, once known: every selected launch gets one.
  virtual void outcome(const LaunchOutcome& outcome) = 0;
};

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

// A launch's replayed output, kept for --check determinism on a sequence.
struct KeptOutput {
  std::string label;  // "param 2 (0x7f..., 4096 bytes)"
  std::vector<uint8_t> bytes;
};

// What restoring a launch's memory took, for its outcome.
struct RestoreStats {
  uint64_t bytes = 0;          // restored
  uint64_t uploadedBytes = 0;  // of those, copied to the GPU (the rest it held already)
  uint64_t waitNs = 0;         // spent waiting for copies to the GPU
};

// Pieces [first, first + count) of `content` as a Content of their own,
// built in `message` (memory_restore.cpp).
schema::Content::Reader contentPart(capnp::MallocMessageBuilder& message, schema::Content::Reader content,
                                    uint64_t first, uint64_t count);

// The parameter bytes a launch is submitted with.
struct LaunchParams {
  std::vector<uint8_t> bytes;
  std::vector<uint64_t> reencodedFrom;  // the seqs of the tensor map encodes run again for them
};

// One launch's replay as it goes: made for the launch, handed from step to
// step, its outcome filled in on the way.
struct LaunchRun {
  explicit LaunchRun(const LaunchRecord& l) : launch(l), outcome(outcomeOf(l)) {}
  const LaunchRecord& launch;
  LaunchOutcome outcome;
  LoadedKernel kernel;    // once its code is loaded
  RestoreStats restore;   // of its pre-state (and its companion's)
  bool runChecks = true;  // false in sequences: their checks run over the whole sequence
  // Sequences only.
  bool ranAhead = false;                    // already submitted, behind the launch before it
  std::optional<Companion> companion;       // to submit right behind it
  std::optional<uint64_t> submittedBehind;  // the companion's launchIndex, once submitted
  bool keepOutputs = false;                 // --check determinism: keep the replayed outputs in `kept`
  std::vector<KeptOutput> kept;             // in the order they were compared
};

class Replayer {
 public:
  // Opens the driver, selects the device. Throws ReplayError.
  Replayer(const TraceModel& model, format::TraceReader& reader, const ReplayOptions& options);
  ~Replayer();

  // Runs the selection, telling `listener` of each launch as it goes. A
  // sticky CUDA error ends the run after its FAULT outcome (the context is
  // unusable), with ContextLost: the caller starts a new process for the rest.
  void run(const Selection& selection, ReplayListener& listener);

  int smVersion() const { return sm_; }
  const std::string& deviceName() const { return deviceName_; }
  const std::string& pciBusId() const { return pciBusId_; }  // of the device its context is on

 private:
  friend class LaunchCheckTarget;  // checkers.h: --check replays the launch again
  friend class Reexecutor;         // reexecute.h: checkpoint traces, re-executed on these parts

  // replayer.cpp
  static uint64_t nsSince(std::chrono::steady_clock::time_point start);
  void replayLaunch(LaunchRun& run, const std::function<void()>& place, const std::function<void(LaunchRun&)>& prepare,
                    ReplayListener& listener);
  void launchOnce(const LaunchRecord& launch, const LoadedKernel& kernel, std::vector<uint8_t>& params,
                  bool synchronize = true);
  void timeRepeats(LaunchRun& run, std::vector<uint8_t>& params);
  std::optional<uint64_t> translate(uint64_t recorded, const LoadedKernel& kernel) const;
  std::optional<uint64_t> writeTarget(const StoredEvent& op, uint64_t recorded, uint64_t size,
                                      const LoadedKernel& kernel, bool reads = false) const;
  std::vector<Region> regionsOf(const LaunchRecord& launch) const;
  void copyToDevice(CUdeviceptr dst, const uint8_t* src, uint64_t size);
  void writeContent(CUdeviceptr dst, schema::Content::Reader data);
  void copyFromDevice(uint8_t* dst, CUdeviceptr src, uint64_t size);
  uint8_t* staging(uint64_t size);

  // sequence.cpp
  // `overlap`: a launch recorded to start before the one ahead of it ends
  // is submitted right behind it; without, every launch runs on its own.
  void runSequence(const std::vector<const LaunchRecord*>& launches, ReplayListener& listener,
                   std::map<uint64_t, std::vector<KeptOutput>>* kept = nullptr, bool overlap = true);
  void runSequenceForDeterminism(const std::vector<const LaunchRecord*>& launches, ReplayListener& listener);

  // graph_replay.cpp
  LaunchOutcome replayGraphLaunch(const GraphLaunchRecord& launch, ReplayListener& listener);
  // What --graph-nodes needs besides the body it runs.
  struct GraphNodesRun {
    RebuiltGraph& graph;
    const GraphLaunchRecord& launch;
    const std::map<const GraphNodeRun*, LoadedKernel>& kernels;
    const LoadedKernel& globals;    // every kernel node's module globals
    std::set<uint64_t> handlesSet;  // conditional handles a kernel of the graph may set
    uint64_t kernelNodesRun = 0;    // with saveOutputsDir: numbers the saved kernel nodes
  };
  void runGraphNodes(const GraphBodyRun& body, GraphNodesRun& run, LaunchOutcome& outcome);
  // With saveOutputsDir: the graph launch's ranges once it ran, and (node by
  // node) those a kernel node reaches right after it (graph_replay.cpp says how).
  void saveGraphOutputs(const GraphLaunchRecord& launch, const LoadedKernel& globals);
  void saveNodeOutputs(const GraphNodeRun& node, size_t index, GraphNodesRun& run);
  void compareGraph(const GraphLaunchRecord& launch, const GraphRun& run, const LoadedKernel& globals,
                    LaunchOutcome& outcome);

  // memory_restore.cpp
  void restoreRanges(capnp::List<schema::MemoryRange>::Reader ranges, const LoadedKernel& kernel, RestoreStats& stats,
                     std::set<uint64_t>* restoredBefore = nullptr);
  void allocateRestoreBuffers(capnp::List<schema::MemoryRange>::Reader ranges);
  void restore(const LaunchRecord& launch, const LoadedKernel& kernel, RestoreStats& stats,
               std::set<uint64_t>* restoredBefore = nullptr);
  void restoreContent(schema::Content::Reader content, CUdeviceptr dst, RestoreStats& stats);
  void uploadPieces(schema::Content::Reader content, CUdeviceptr dst, uint64_t first, uint64_t count, uint64_t& window,
                    RestoreStats& stats);
  void waitForUploads(RestoreStats& stats);
  static bool throughWindows(schema::Content::Reader content);
  void allocateRestoreBuffers(const LaunchRecord& launch);
  void allocateWindows();
  void applyMemoryOp(const StoredEvent& op);
  void applyMemoryOpOnStream(const StoredEvent& op);
  void applyCopyRows(const StoredEvent& op);

  // launch_params.cpp
  LaunchParams buildParams(const LaunchRecord& launch, const LoadedKernel& kernel);
  // Why `launch` cannot run with its recorded parameters ("" when it can):
  // a launch recorded with none, of a kernel that takes some (the
  // recording got no parameter layout for it), would read garbage.
  std::string missingParameters(const LaunchRecord& launch, const LoadedKernel& kernel) const;
  // The same into `built`, whose buffers are reused.
  void buildParamsInto(const LaunchRecord& launch, const LoadedKernel& kernel, LaunchParams& built);
  std::optional<CUtensorMap> reencode(schema::TensorMapEncode::Reader encode, uint64_t seq, const LoadedKernel& kernel);

  // post_state.cpp
  void compare(LaunchRun& run, const std::set<uint64_t>& comparedLater);
  bool compareByPieces(schema::Content::Reader content, CUdeviceptr src, BufferReport& report,
                       std::optional<uint32_t> param, LaunchOutcome& outcome);
  void saveOutputs(const LaunchRecord& launch, const LoadedKernel& kernel);
  // Each range's replayed bytes to DIR/<prefix><index>-<address in hex>.bin.
  void saveRanges(capnp::List<schema::MemoryRange>::Reader ranges, const LoadedKernel& kernel, const char* prefix,
                  uint64_t index);
  void saveRegions(const std::vector<Region>& regions);
  void writeFile(const std::string& path, const uint8_t* bytes, uint64_t size);

  const TraceModel& model_;
  format::TraceReader& reader_;
  const ReplayOptions& options_;
  Driver& driver_;
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
  CUstream stream_ = nullptr;
  int sm_ = 0;
  std::string deviceName_;
  std::string pciBusId_;
  std::unique_ptr<DeviceMemory> memory_;
  std::unique_ptr<CodeCache> code_;
  std::unique_ptr<PieceHasher> hasher_;  // restores and compares ranges by their pieces' hashes
  // Module globals the recorded copies and memsets may write (a copy to a
  // symbol): empty but for re-execution, which loads every module first.
  LoadedKernel opGlobals_;
  std::vector<CUlaunchAttribute> attributeScratch_;  // launchOnce's, kept between launches
  std::vector<void*> argumentScratch_;
  uint8_t* staging_ = nullptr;  // page-locked, for copies both ways
  uint64_t stagingSize_ = 0;
  // restoreContent's page-locked windows, used in turn: with three, decoding
  // is held up only when two copies are still queued. The window size is the
  // one that restored fastest when measured (docs/benchmarks.md).
  static constexpr size_t kRestoreWindows = 3;
  uint8_t* windows_[kRestoreWindows] = {};
  CUevent windowDone_[kRestoreWindows] = {};
#ifndef KCAP_RESTORE_WINDOW_MIB  // (a build-time knob for bench/replay_throughput.py comparisons)
#define KCAP_RESTORE_WINDOW_MIB 32
#endif
  static constexpr uint64_t kRestoreWindow = uint64_t{KCAP_RESTORE_WINDOW_MIB} << 20;
};

}  // namespace kcap::replay
