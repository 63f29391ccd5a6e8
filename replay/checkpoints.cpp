#include "checkpoints.h"

#include <algorithm>
#include <set>
#include <cstdio>

#include "hex_text.h"
#include "change_hash.h"
#include "hash.h"

namespace kcap::replay {
namespace {

// What is wrong with one range's sizes, "" when nothing.
std::string rangeProblem(schema::CheckpointRange::Reader range) {
  const auto content = range.getContent();
  const uint64_t size = content.getSize(), pieceSize = content.getPieceSize();
  const uint64_t pieces = content.getPieces().size();
  uint64_t end = 0;
  if (__builtin_add_overflow(range.getAddress(), size, &end)) {
    return "its " + std::to_string(size) + " bytes wrap past the end of the address space";
  }
  if (size != 0 && pieceSize == 0) return "piece size 0 for " + std::to_string(size) + " bytes";
  const uint64_t expected = size == 0 ? 0 : size / pieceSize + (size % pieceSize != 0 ? 1 : 0);
  if (pieces != expected) {
    return std::to_string(pieces) + " pieces for " + std::to_string(size) + " bytes of " + std::to_string(pieceSize) +
           "-byte pieces (expected " + std::to_string(expected) + ")";
  }
  // pieces < 2^29 (a list's length), so 16 * pieces cannot overflow.
  if (range.getChangeHashes().size() != format::kChangeHashBytes * pieces) {
    return std::to_string(range.getChangeHashes().size()) + " bytes of change hashes for " + std::to_string(pieces) +
           " pieces (expected " + std::to_string(format::kChangeHashBytes * pieces) + ")";
  }
  return {};
}

}  // namespace

std::string CheckpointInfo::name() const {
  return "checkpoint " + std::to_string(ordinal) + " at event #" + std::to_string(seq);
}

bool isLoggedInput(schema::MemoryKind kind) {
  return kind == schema::MemoryKind::HOST_MAPPED || kind == schema::MemoryKind::IMPORTED ||
         kind == schema::MemoryKind::MANAGED;
}

bool isDeviceAllocation(schema::AllocKind kind) {
  switch (kind) {
    case schema::AllocKind::MEM_ALLOC:
    case schema::AllocKind::MEM_ALLOC_PITCH:
    case schema::AllocKind::MANAGED:
    case schema::AllocKind::ASYNC:
    case schema::AllocKind::FROM_POOL:
    case schema::AllocKind::VMM_MAP:
      return true;
    default:
      return false;
  }
}

std::string checkpointProblem(schema::Checkpoint::Reader checkpoint) {
  if (checkpoint.getResult() != 0) {
    return "incomplete: taking it failed with CUresult " + std::to_string(checkpoint.getResult());
  }
  uint64_t previousEnd = 0;
  bool first = true;
  for (const auto range : checkpoint.getRanges()) {
    if (const std::string problem = rangeProblem(range); !problem.empty()) {
      return "range " + hexText(range.getAddress()) + ": " + problem;
    }
    if (!first && range.getAddress() < previousEnd) {
      return "range " + hexText(range.getAddress()) + ": overlaps or precedes the range before it";
    }
    previousEnd = range.getAddress() + range.getContent().getSize();
    first = false;
  }
  return {};
}

CheckpointPlan CheckpointPlan::build(const TraceModel& model, const format::TraceReader& reader) {
  CheckpointPlan plan;
  for (const auto& stored : model.checkpoints()) {
    CheckpointInfo info;
    info.event = stored.get();
    info.seq = stored->seq();
    const auto checkpoint = info.get();
    info.ordinal = checkpoint.getOrdinal();
    info.launchCount = checkpoint.getLaunchCount();
    info.damage = checkpointProblem(checkpoint);
    if (const int device = checkpoint.getDevice(), covered = model.checkpointDevice();
        info.damage.empty() && device >= 0 && device != covered) {
      info.damage = "it holds device " + std::to_string(device) +
                    "'s memory; the trace's first checkpoint holds device " + std::to_string(covered) + "'s";
    }
    for (const auto range : checkpoint.getRanges()) {
      const auto content = range.getContent();
      uint64_t end = 0;
      if (__builtin_add_overflow(range.getAddress(), content.getSize(), &end)) continue;
      info.bytes += content.getSize();
      info.pieces += content.getPieces().size();
      if (range.getKind() != schema::MemoryKind::MODULE_GLOBAL && content.getSize() != 0) {
        plan.regions_.push_back({range.getAddress(), content.getSize()});
      }
      if (!info.damage.empty() || !info.restoreDamage.empty()) continue;
      for (const auto piece : content.getPieces()) {
        if (!reader.hasBlob({piece.getHigh(), piece.getLow()})) {
          info.restoreDamage = "the content of range " + hexText(range.getAddress()) + " is not in the file (blob " +
                               format::Hash128{piece.getHigh(), piece.getLow()}.hex() + " missing)";
          break;
        }
      }
    }
    plan.checkpoints_.push_back(std::move(info));
  }
  for (const auto& stored : model.allocations()) {
    const auto event = stored->get();
    if (!event.isAlloc()) continue;
    const auto alloc = event.getAlloc();
    uint64_t end = 0;
    if (alloc.getResult() != 0 || !isDeviceAllocation(alloc.getKind()) || alloc.getSize() == 0 ||
        __builtin_add_overflow(alloc.getAddress(), alloc.getSize(), &end)) {
      continue;
    }
    plan.regions_.push_back({alloc.getAddress(), alloc.getSize()});
  }
  // Page-locked host memory and other processes' memory launches read
  // (checkpoint mode logs its content with each launch that reaches it):
  // placed as device memory, written with what each launch saw before it
  // runs (Reexecutor::writeLoggedInputs).
  std::set<std::pair<uint64_t, uint64_t>> loggedInputs;
  for (const auto& launch : model.launches()) {
    for (const auto range : launch.event().getPre()) {
      const uint64_t size = range.getContent().getSize();
      uint64_t end = 0;
      if (!isLoggedInput(range.getKind()) || size == 0 || __builtin_add_overflow(range.getAddress(), size, &end)) {
        continue;
      }
      if (loggedInputs.insert({range.getAddress(), size}).second) plan.regions_.push_back({range.getAddress(), size});
    }
  }

  for (const auto& launch : model.launches()) {
    plan.timeline_.push_back({TimelineEvent::Kind::kLaunch, launch.seq(), launch.launch.get(), &launch});
  }
  for (const auto& op : model.memoryOps()) {
    plan.timeline_.push_back({TimelineEvent::Kind::kMemoryOp, op->seq(), op.get(), nullptr});
  }
  for (const auto& graph : model.graphLaunches()) {
    plan.timeline_.push_back({TimelineEvent::Kind::kGraphLaunch, graph->seq(), graph.get(), nullptr});
  }
  for (const auto& alloc : model.allocations()) {
    plan.timeline_.push_back({TimelineEvent::Kind::kAllocation, alloc->seq(), alloc.get(), nullptr});
  }
  std::stable_sort(plan.timeline_.begin(), plan.timeline_.end(),
                   [](const TimelineEvent& a, const TimelineEvent& b) { return a.seq < b.seq; });
  return plan;
}

std::vector<TimelineEvent> CheckpointPlan::eventsBetween(uint64_t afterSeq, uint64_t beforeSeq) const {
  const auto first = std::upper_bound(timeline_.begin(), timeline_.end(), afterSeq,
                                      [](uint64_t seq, const TimelineEvent& e) { return seq < e.seq; });
  std::vector<TimelineEvent> events;
  for (auto it = first; it != timeline_.end() && it->seq < beforeSeq; ++it) events.push_back(*it);
  return events;
}

std::pair<uint64_t, uint64_t> CheckpointPlan::launchesBetween(uint64_t afterSeq, uint64_t beforeSeq) const {
  std::pair<uint64_t, uint64_t> range{1, 0};
  bool any = false;
  for (const TimelineEvent& e : eventsBetween(afterSeq, beforeSeq)) {
    if (e.kind != TimelineEvent::Kind::kLaunch || e.launch->event().getCapturing()) continue;
    if (!any) range.first = e.launch->launchIndex;
    range.second = e.launch->launchIndex;
    any = true;
  }
  return range;
}

}  // namespace kcap::replay
