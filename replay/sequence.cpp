// The Replayer's sequences: a run of launches replayed in order from the
// first one's pre-state, with the recorded copies and memsets between them,
// and a launch recorded to start before the one ahead of it ends
// (programmatic dependent launch) submitted behind it so that the two
// overlap. --check determinism replays the whole sequence several times.
#include "replayer.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "checkers.h"

namespace kcap::replay {
namespace {

// Passes launch starts and ends on to another listener, and outcomes to `take`.
class OutcomesTo : public ReplayListener {
 public:
  OutcomesTo(ReplayListener& to, std::function<void(const LaunchOutcome&)> take) : to_(to), take_(std::move(take)) {}
  void launchStarting(const LaunchOutcome& soFar) override { to_.launchStarting(soFar); }
  void launchDone(uint64_t launchIndex) override { to_.launchDone(launchIndex); }
  void outcome(const LaunchOutcome& outcome) override { take_(outcome); }

 private:
  ReplayListener& to_;
  std::function<void(const LaunchOutcome&)> take_;
};

bool ranCleanly(const LaunchOutcome& o) { return o.verdict == Verdict::kReproduced || o.verdict == Verdict::kDiffers; }

}  // namespace

bool startsBeforeEnd(const TraceModel& model, const LaunchRecord& previous, const LaunchRecord& next) {
  const auto a = previous.event(), b = next.event();
  if (a.getStream() != b.getStream() || a.getPerThreadStream() != b.getPerThreadStream() ||
      a.getContext() != b.getContext() || b.getCapturing() || a.getCapturing()) {
    return false;
  }
  if (!model.memoryOpsBetween(previous.seq(), next.seq()).empty()) return false;
  for (const auto attribute : b.getAttributes()) {
    int32_t allowed = 0;
    if (attribute.getId() == CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION &&
        attribute.getValue().size() >= sizeof allowed) {
      std::memcpy(&allowed, attribute.getValue().begin(), sizeof allowed);
      if (allowed != 0) return true;
    }
  }
  return false;
}

std::set<uint64_t> rangesChangedBy(const LaunchRecord& launch) {
  std::set<uint64_t> changed;
  if (launch.end == nullptr) return changed;
  for (const auto post : launch.end->get().getLaunchEnd().getPost()) {
    bool same = false;
    for (const auto pre : launch.event().getPre()) {
      if (pre.getAddress() == post.getAddress()) same = sameContent(pre.getContent(), post.getContent());
    }
    if (!same) changed.insert(post.getAddress());
  }
  return changed;
}

// Every range any of the launches reaches is placed once; the first
// launch's pre-state is restored, then each later launch gets the recorded
// copies and memsets made before it, and the pre-state of ranges no earlier
// launch reached. With `kept`, each launch's compared outputs go there.
void Replayer::runSequence(const std::vector<const LaunchRecord*>& launches, ReplayListener& listener,
                           std::map<uint64_t, std::vector<KeptOutput>>* kept, bool overlap) {
  std::vector<Region> regions;
  for (const LaunchRecord* l : launches) {
    const auto more = regionsOf(*l);
    regions.insert(regions.end(), more.begin(), more.end());
  }
  memory_->release();
  bool placed = false;
  std::string stopped;
  std::set<uint64_t> restored;             // recorded ranges restored so far: each is restored once
  std::optional<uint64_t> submittedAhead;  // launchIndex of the companion last submitted
  uint64_t previousSeq = launches.empty() ? 0 : launches.front()->seq();
  for (size_t i = 0; i < launches.size(); ++i) {
    const LaunchRecord* l = launches[i];
    const LaunchRecord* next = i + 1 < launches.size() ? launches[i + 1] : nullptr;
    LaunchRun run(*l);
    // Events lost to damage before this launch (a launch or a copy that
    // wrote its inputs, perhaps): from here the sequence is not what the
    // program ran, and comparing it would report a divergence that never was.
    if (const auto missing = model_.missingBetween(previousSeq, l->seq()); missing && stopped.empty()) {
      stopped = "events #" + std::to_string(missing->first) + ".." + std::to_string(missing->second) +
                " before launch " + std::to_string(l->launchIndex) + " are missing (the trace is damaged there)";
    }
    if (!stopped.empty()) {
      run.outcome.verdict = Verdict::kSkipped;
      run.outcome.detail = stopped;
      listener.outcome(run.outcome);
      continue;
    }
    run.runChecks = false;
    run.keepOutputs = kept != nullptr;
    run.ranAhead = submittedAhead == l->launchIndex;
    const auto place = [&] {
      if (!placed) {
        memory_->place(regions);
        placed = true;
      }
    };
    const auto prepare = [&](LaunchRun& r) {
      if (l == launches.front()) {
        restored.clear();
        restore(*l, r.kernel, r.restore);
        for (const auto range : l->event().getPre()) restored.insert(range.getAddress());
      } else {
        for (const StoredEvent* op : model_.memoryOpsBetween(previousSeq, l->seq())) applyMemoryOp(*op);
        restore(*l, r.kernel, r.restore, &restored);
      }
      if (overlap && next != nullptr && !r.ranAhead && startsBeforeEnd(model_, *l, *next)) {
        // Everything the companion needs is in place before the pair is
        // submitted: a copy between the two would serialize them.
        LoadedKernel nextKernel = code_->kernelFor(model_.codeFor(*next));
        restore(*next, nextKernel, r.restore, &restored);
        std::vector<uint8_t> nextParams = buildParams(*next, nextKernel).bytes;
        r.companion = Companion{next, std::move(nextKernel), std::move(nextParams)};
      }
    };
    replayLaunch(run, place, prepare, listener);
    if (run.submittedBehind) submittedAhead = run.submittedBehind;
    if (kept != nullptr && !run.kept.empty()) {
      auto& into = (*kept)[l->launchIndex];
      into.insert(into.end(), std::make_move_iterator(run.kept.begin()), std::make_move_iterator(run.kept.end()));
    }
    if (run.outcome.verdict == Verdict::kFault || run.outcome.verdict == Verdict::kError) {
      stopped = "launch " + std::to_string(l->launchIndex) + " of the sequence did not run cleanly";
    }
    previousSeq = l->seq();
    listener.outcome(run.outcome);
  }
  if (stopped.empty() && placed && options_.saveSequenceEnd && !options_.saveOutputsDir.empty()) {
    saveRegions(regions);
  }
}

// --check determinism over a sequence: the whole sequence is replayed --runs
// times, each from its first launch's pre-state, and a launch whose compared
// outputs are not the same in every run gets a finding. A race between
// launches (a consumer that does not wait for its producer under
// programmatic dependent launch) shows only when they run together, and
// often loses the same way every time: when the sequence has launches that
// overlap, every second run serializes them, so a launch whose outputs
// depend on the schedule differs between the two kinds of run. The
// outcomes reported are the first (overlapped) run's, once every run is
// done; the outputs of one run are held in memory to compare the others with.
void Replayer::runSequenceForDeterminism(const std::vector<const LaunchRecord*>& launches, ReplayListener& listener) {
  const unsigned runs = std::max(2u, options_.checkRuns);
  bool overlapping = false;
  for (size_t i = 0; i + 1 < launches.size(); ++i) {
    if (startsBeforeEnd(model_, *launches[i], *launches[i + 1])) overlapping = true;
  }
  const std::string schedule = overlapping ? ", alternately overlapped as recorded and serialized" : "";
  std::vector<LaunchOutcome> outcomes;  // of the first run
  std::map<uint64_t, std::vector<KeptOutput>> first;
  std::map<uint64_t, std::vector<std::vector<bool>>> varies;  // per launch, per kept range, per byte
  std::string notRun;                                         // why the check could not finish
  const auto reportAll = [&] {
    for (LaunchOutcome& o : outcomes) {
      const bool clean = ranCleanly(o);
      if (!clean || !notRun.empty()) {
        o.checks.push_back({"determinism",
                            CheckStatus::kNotRun,
                            o.verdict == Verdict::kUnverified ? "nothing compared: " + o.detail
                            : !clean                          ? "the launch did not replay cleanly"
                                                              : notRun,
                            {}});
        listener.outcome(o);
        continue;
      }
      std::vector<std::string> labels;
      for (const KeptOutput& k : first[o.launchIndex]) labels.push_back(k.label);
      o.checks.push_back(determinismFinding(
          labels, varies[o.launchIndex],
          std::to_string(runs) + " runs of the " + std::to_string(launches.size()) + "-launch sequence" + schedule,
          overlapping ? "a race, within the launch or with the launches it overlaps"
                      : "a race, within the launch or with the launches around it"));
      listener.outcome(o);
    }
  };
  try {
    OutcomesTo firstRun(listener, [&](const LaunchOutcome& o) { outcomes.push_back(o); });
    runSequence(launches, firstRun, &first);
    for (auto& [index, kept] : first) {
      for (const auto& k : kept) varies[index].emplace_back(k.bytes.size(), false);
    }
    for (unsigned run = 1; run < runs && notRun.empty(); ++run) {
      std::map<uint64_t, std::vector<KeptOutput>> again;
      OutcomesTo laterRun(listener, [&](const LaunchOutcome& o) {
        if (!ranCleanly(o) && notRun.empty()) {
          notRun = "run " + std::to_string(run + 1) + " of the sequence stopped at launch " +
                   std::to_string(o.launchIndex) + " (" + verdictName(o.verdict) + ": " + o.detail + ")";
        }
      });
      runSequence(launches, laterRun, &again, !overlapping || run % 2 == 0);
      for (auto& [index, kept] : first) {
        const auto& other = again[index];
        for (size_t r = 0; r < kept.size(); ++r) {
          if (r >= other.size() || other[r].bytes.size() != kept[r].bytes.size()) continue;
          for (size_t b = 0; b < kept[r].bytes.size(); ++b) {
            if (other[r].bytes[b] != kept[r].bytes[b]) varies[index][r][b] = true;
          }
        }
      }
    }
  } catch (const ContextLost&) {
    if (notRun.empty()) notRun = "a launch of the sequence ended the CUDA context";
    reportAll();
    throw;
  }
  reportAll();
}

}  // namespace kcap::replay
