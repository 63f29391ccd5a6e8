// A checkpoint trace (capture mode checkpoint) as re-execution sees it: the
// checkpoints, whether each can be compared with and restored from, the
// device memory they and the allocations cover, and the events between two
// checkpoints in recorded order. Pure host code: no driver.
//
// A checkpoint can be compared with when it is complete (result 0) and its
// sizes are consistent (every range's content has ceil(size / pieceSize)
// pieces and 16 bytes of change hash a piece, ranges sorted and disjoint, no
// range wrapping past 2^64). It can be restored from when, besides, the
// trace holds the blob of every piece.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kcap.capnp.h"
#include "memory_plan.h"
#include "trace_model.h"
#include "trace_reader.h"

namespace kcap::replay {

struct CheckpointInfo {
  const StoredEvent* event = nullptr;
  uint64_t seq = 0;
  uint64_t ordinal = 0;       // as recorded
  uint64_t launchCount = 0;   // launches recorded before it
  std::string damage;         // why it cannot be compared with; "" when it can
  std::string restoreDamage;  // why it cannot be restored from; "" when it can (damage implies it)
  uint64_t bytes = 0;         // of its ranges
  uint64_t pieces = 0;

  schema::Checkpoint::Reader get() const { return event->get().getCheckpoint(); }
  bool comparable() const { return damage.empty(); }
  bool restorable() const { return damage.empty() && restoreDamage.empty(); }
  // "checkpoint 3 at event #1234"
  std::string name() const;
};

// One event re-execution acts on.
struct TimelineEvent {
  enum class Kind { kLaunch, kMemoryOp, kGraphLaunch, kAllocation };
  Kind kind = Kind::kLaunch;
  uint64_t seq = 0;
  const StoredEvent* event = nullptr;
  const LaunchRecord* launch = nullptr;  // kLaunch
};

// What is wrong with a checkpoint's sizes and counts, "" when nothing.
std::string checkpointProblem(schema::Checkpoint::Reader checkpoint);

// Whether an Alloc of this kind is device memory a launch can reach at its
// recorded address (not host memory, not bare address space or handles).
bool isDeviceAllocation(schema::AllocKind kind);
// Memory whose content checkpoint mode logs with each launch that reaches
// it (page-locked host memory, another process's memory): re-execution
// writes it before the launch instead of recomputing it.
bool isLoggedInput(schema::MemoryKind kind);

class CheckpointPlan {
 public:
  // Reads the model's checkpoints and checks each (blobs through `reader`).
  static CheckpointPlan build(const TraceModel& model, const format::TraceReader& reader);

  const std::vector<CheckpointInfo>& checkpoints() const { return checkpoints_; }
  // Every checkpoint range (module globals aside: their module places them)
  // and every device allocation of the trace: what must exist at its
  // recorded address. Ranges whose end would wrap are left out (their
  // checkpoint is damaged).
  const std::vector<Region>& regions() const { return regions_; }
  // Events with seq in (afterSeq, beforeSeq), in seq order.
  std::vector<TimelineEvent> eventsBetween(uint64_t afterSeq, uint64_t beforeSeq) const;
  // The launches with seq in (afterSeq, beforeSeq): first and last index, or
  // {1, 0} when none.
  std::pair<uint64_t, uint64_t> launchesBetween(uint64_t afterSeq, uint64_t beforeSeq) const;

 private:
  std::vector<CheckpointInfo> checkpoints_;
  std::vector<Region> regions_;
  std::vector<TimelineEvent> timeline_;  // every event, seq order
};

}  // namespace kcap::replay
