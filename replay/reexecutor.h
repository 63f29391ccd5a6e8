// The re-execution engine's class, shared by its files (reexecute.cpp,
// reexecute_stream.cpp, reexecute_verify.cpp, reexecute_determinism.cpp,
// reexecute_sides.cpp): a Replayer's parts (its device, stream,
// memory placement, code cache, content restore, memory operations,
// parameters and launch) driven through a checkpoint trace's timeline.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <optional>
#include <string>
#include <vector>

#include "hex_text.h"
#include "bisect_checkpoint.h"
#include "checkpoints.h"
#include "reexecute.h"
#include "replayer.h"

namespace kcap::replay {

inline constexpr uint64_t kHashBatch = uint64_t{1} << 16;  // pieces hashed per kernel launch

// One piece as kcap_change_hash takes it (kcap::ChangeHashPiece).
struct HashPiece {
  uint64_t address = 0;
  uint64_t length = 0;
};

// Thrown inside an interval: the verdict it ends with.
struct IntervalStop {
  IntervalVerdict verdict;
  std::string detail;
};

class Reexecutor {
 public:
  Reexecutor(const TraceModel& model, format::TraceReader& reader, const ReplayOptions& options)
      : model_(model), reader_(reader), plan_(CheckpointPlan::build(model, reader)), r_(model, reader, options) {}
  ~Reexecutor();
  Reexecutor(const Reexecutor&) = delete;
  Reexecutor& operator=(const Reexecutor&) = delete;
  Replayer& replayer() { return r_; }
  void run(const ReexecutionRequest& request, ReexecutionListener& listener);
  // reexecute_sides.cpp: kcap bisect's side of a checkpoint trace. Every
  // interval from its recorded starting checkpoint, its end state hashed;
  // with `interval` (a starting checkpoint's ordinal) only that one, each
  // launch's outputs hashed too.
  void runSide(std::optional<uint64_t> interval, SideRun& out, ReexecutionListener& listener);

  // kcap extract: `around(true)` right before launch `launchIndex` is
  // submitted (the memory as re-execution rebuilt it) and `around(false)`
  // once it completed.
  void aroundLaunch(uint64_t launchIndex, std::function<void(bool before)> around) {
    aroundIndex_ = launchIndex;
    around_ = std::move(around);
  }
  // Copies [recorded, recorded + size) of the replayed memory to `dst`: a
  // placed range (at its recorded address) or a module global (where its
  // module put it here). False when no placed range or global holds it all.
  bool read(uint64_t recorded, uint8_t* dst, uint64_t size);

 private:
  void place(ReexecutionListener& listener);
  // Loads the code of the launches after `afterSeq`; says how many NCCL
  // launches it passes over.
  void loadCode(uint64_t afterSeq, ReexecutionListener& listener);
  void restore(const CheckpointInfo& checkpoint);
  IntervalReport runInterval(const CheckpointInfo& from, const CheckpointInfo* to, ReexecutionListener& listener,
                             std::optional<uint64_t> reportLaunch = std::nullopt);
  void reexecute(uint64_t afterSeq, uint64_t beforeSeq, IntervalReport& report, ReexecutionListener& listener,
                 std::optional<uint64_t> reportLaunch = std::nullopt);
  // reexecute_stream.cpp
  // False when the launch is not one to run (captured into a graph, refused when recorded).
  bool runLaunch(const LaunchRecord& launch, IntervalReport& report, ReexecutionListener& listener);
  void runMemoryOp(const StoredEvent& op, ReexecutionListener& listener);
  // reexecute_graph.cpp: a graph launch, its graph rebuilt at the recorded
  // addresses, waited for. IntervalStop when it cannot be rebuilt.
  void runGraphLaunch(const StoredEvent& launch, ReexecutionListener& listener);
  // Writes the page-locked host memory `launch` read, as logged with it.
  void writeLoggedInputs(const LaunchRecord& launch, ReexecutionListener& listener);
  // Issues a checked copy or memset on the replay stream, in order with the launches before it.
  void issueMemoryOp(const StoredEvent& op, ReexecutionListener& listener);
  // Page-locked bytes for a host-to-device copy's source that stay untouched
  // until the next drain; null when `size` is over the arena.
  uint8_t* hostBytes(uint64_t size, ReexecutionListener& listener);
  // Marks the launches submitted so far: an event recorded behind them, and
  // the watchdog told.
  void mark(ReexecutionListener& listener);
  // How many launches between two marks, from the program's pace over the interval.
  void setMarkSpacing(const IntervalReport& bounds);
  // Waits for everything submitted, telling the watchdog as launches complete.
  void drain(ReexecutionListener& listener);
  // Forgets what was in flight (after a drain, or after an error).
  void clearQueue();
  // reexecute_verify.cpp
  void verify(const CheckpointInfo& checkpoint, IntervalReport& report);
  void hashBatch(const std::vector<HashPiece>& pieces, std::vector<uint64_t>& out);
  // The change hashes (high, low) of any number of pieces.
  std::vector<uint64_t> hashAll(const std::vector<HashPiece>& pieces);
  // The pieces of a checkpoint's ranges at `positions` (all when null), as
  // placed here; module globals no loaded module holds are left out.
  std::vector<HashPiece> piecesOf(const CheckpointInfo& checkpoint, const std::vector<unsigned>* positions);
  // reexecute_determinism.cpp: --check determinism on a differing interval.
  void checkDeterminism(const CheckpointInfo& from, const CheckpointInfo& to, IntervalReport& report,
                        ReexecutionListener& listener);
  void findFirstDifference(schema::Content::Reader content, uint64_t piece, uint64_t deviceAddress,
                           RangeDifference& difference);
  // The ranges of `to` (positions, sorted by address there) that the launch's pointer words point into.
  std::vector<unsigned> reachedRanges(const CheckpointInfo& to, const LaunchRecord& launch) const;
  const GlobalPlacement* globalAt(uint64_t recorded) const;
  // Where recorded device memory is in this process: a module global where
  // its module put it, a placed range where its group was placed.
  uint64_t here(uint64_t recorded) const;
  enum class Coverage { kInside, kOutside, kPartial };
  Coverage coverage(uint64_t address, uint64_t size) const;
  IntervalReport intervalBetween(const CheckpointInfo* from, const CheckpointInfo* to) const;
  void unverified(const CheckpointInfo& from, const CheckpointInfo* to, const std::string& why,
                  ReexecutionListener& listener);
  bool restoreOrSkip(size_t& at, ReexecutionListener& listener);

  const TraceModel& model_;
  format::TraceReader& reader_;
  CheckpointPlan plan_;
  Replayer r_;
  std::vector<Region> merged_;                       // the placed regions, sorted, overlaps merged
  std::map<std::string, LoadedKernel> kernels_;      // by code (module load, kernel, attributes)
  std::map<uint64_t, GlobalPlacement> globals_;      // every loaded module's, by recorded address
  std::map<uint64_t, std::string> launchCodeError_;  // launchIndex -> why it cannot run (": ...", " is malformed: ...")
  // Launches not run: NCCL kernels launched by a logged NCCL call
  // (Launch.collectiveCall; the call's Collective events write what it
  // wrote), and launches on other devices than the checkpoints'.
  std::set<uint64_t> passedOver_;
  bool notedOtherDeviceGraph_ = false;  // runGraphLaunch said once that it passes such graphs over
  bool notedGraphCollectives_ = false;  // ... and once that it runs no NCCL kernel node
  // By position in model_.launches(): the kernel loadCode found, null when none.
  std::vector<const LoadedKernel*> kernelAt_;
  bool synchronized_ = false;  // ReexecutionRequest::synchronized
  bool quiet_ = false;         // ReexecutionRequest::quiet
  // Launches submitted and not yet waited for: the first and the last.
  std::optional<uint64_t> inFlight_;
  uint64_t lastSubmitted_ = 0;
  uint64_t sinceMark_ = 0;              // launches submitted since the last marker
  uint64_t markEvery_ = 1;              // setMarkSpacing
  std::vector<CUevent> markers_;        // recorded behind every kMarkEvery launches, reused
  std::vector<uint64_t> markerLaunch_;  // the last launch before each marker in use
  uint8_t* arena_ = nullptr;            // hostBytes' page-locked arena
  uint64_t arenaUsed_ = 0;
  LaunchParams params_;     // runLaunch's, reused
  bool relocated_ = false;  // some region is not at its recorded address
  CUmodule hashModule_ = nullptr;
  CUfunction hashFunction_ = nullptr;
  CUdeviceptr piecesBuffer_ = 0;                          // kHashBatch pieces, then kHashBatch hashes
  std::function<void(const LaunchRecord&)> afterLaunch_;  // called once a launch completed (determinism)
  uint64_t aroundIndex_ = 0;
  std::function<void(bool)> around_;  // aroundLaunch
};

}  // namespace kcap::replay
