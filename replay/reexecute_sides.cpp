// kcap bisect on a checkpoint trace: one side's re-execution
// (bisect_checkpoint.h). Unlike `kcap replay`, every interval starts from
// its own recorded checkpoint, so that the two sides start each interval
// from the same state whatever the earlier intervals did on either side.
#include <algorithm>

#include "schema_names.h"

#include "driver.h"
#include "reexecutor.h"

namespace kcap::replay {

std::vector<unsigned> Reexecutor::reachedRanges(const CheckpointInfo& to, const LaunchRecord& launch) const {
  const auto ranges = to.get().getRanges();
  std::vector<unsigned> positions;
  for (const auto word : launch.event().getPointers()) {
    const uint64_t value = word.getValue();
    unsigned low = 0, high = ranges.size();
    while (low < high) {
      const unsigned middle = low + (high - low) / 2;
      if (ranges[middle].getAddress() <= value) {
        low = middle + 1;
      } else {
        high = middle;
      }
    }
    if (low == 0) continue;
    const auto range = ranges[low - 1];
    if (value - range.getAddress() >= range.getContent().getSize()) continue;
    if (std::find(positions.begin(), positions.end(), low - 1) == positions.end()) positions.push_back(low - 1);
  }
  return positions;
}

void Reexecutor::runSide(std::optional<uint64_t> interval, SideRun& out, ReexecutionListener& listener) {
  const auto& checkpoints = plan_.checkpoints();
  // The intervals: from each restorable checkpoint to the next comparable one.
  std::vector<std::pair<size_t, size_t>> plan;
  for (size_t k = 0; k < checkpoints.size(); ++k) {
    if (!checkpoints[k].restorable()) {
      out.notes.push_back(checkpoints[k].name() + " cannot be restored (" +
                          (checkpoints[k].damage.empty() ? checkpoints[k].restoreDamage : checkpoints[k].damage) +
                          "): no interval starts there");
      continue;
    }
    size_t n = k + 1;
    while (n < checkpoints.size() && !checkpoints[n].comparable()) ++n;
    if (n == checkpoints.size()) break;
    if (!interval || checkpoints[k].ordinal == *interval) plan.emplace_back(k, n);
  }
  if (plan.empty()) return;
  // The bisect's process watches each launch (start, done): one at a time.
  synchronized_ = true;
  place(listener);
  loadCode(checkpoints[plan.front().first].seq, listener);
  for (const auto& [k, n] : plan) {
    const CheckpointInfo& from = checkpoints[k];
    const CheckpointInfo& to = checkpoints[n];
    const IntervalReport bounds = intervalBetween(&from, &to);
    SideInterval side;
    side.from = from.ordinal;
    side.to = to.ordinal;
    side.firstLaunch = bounds.firstLaunch;
    side.lastLaunch = bounds.lastLaunch;
    IntervalReport report = bounds;
    if (interval) {
      afterLaunch_ = [&](const LaunchRecord& launch) {
        SideLaunch l;
        l.launchIndex = launch.launchIndex;
        const std::vector<unsigned> positions = reachedRanges(to, launch);
        const auto ranges = to.get().getRanges();
        for (const unsigned position : positions) {
          const std::vector<unsigned> one{position};
          const auto range = ranges[position];
          l.ranges.push_back({range.getAddress(), format::enumName(range.getKind()), range.getContent().getSize(),
                              range.getContent().getPieceSize(), piecesOf(to, &one).size()});
        }
        l.hashes = hashAll(piecesOf(to, &positions));
        out.launches.push_back(std::move(l));
      };
    }
    bool sticky = false;
    try {
      restore(from);
      reexecute(from.seq, to.seq, report, listener);
      side.endHashes = hashAll(piecesOf(to, nullptr));
    } catch (const IntervalStop& stop) {
      side.verdict = stop.verdict;
      side.detail = stop.detail;
    } catch (const CudaError& error) {
      side.verdict = IntervalVerdict::kFault;
      side.detail = error.what();
      side.faultLaunch = report.faultLaunch;
      sticky = error.sticky();
    } catch (const std::exception& e) {  // a checkpoint's content that does not read back, ...
      side.verdict = IntervalVerdict::kNotReexecutable;
      side.detail = e.what();
    }
    afterLaunch_ = nullptr;
    out.intervals.push_back(std::move(side));
    if (sticky) return;  // the context is lost: nothing more runs on this side
  }
}

}  // namespace kcap::replay
