// --check determinism on a checkpoint trace: an interval that differs from
// the recording is run again, --runs times, from its starting checkpoint,
// and after each launch the checkpoint ranges its pointer parameters point
// into are hashed. A launch whose outputs vary between runs is
// nondeterministic here (the first such launch is where the variance
// starts: the later ones may only have read its outputs). When no launch
// varies and every run ends in the same state, the interval is
// deterministic here, and its difference from the recording is not replay
// variance.
#include <algorithm>
#include <map>

#include "reexecutor.h"

namespace kcap::replay {

void Reexecutor::checkDeterminism(const CheckpointInfo& from, const CheckpointInfo& to, IntervalReport& report,
                                  ReexecutionListener& listener) {
  if (!from.restorable()) {
    report.determinism.push_back("not run: " + from.name() + " cannot be restored (" +
                                 (from.damage.empty() ? from.restoreDamage : from.damage) + ")");
    return;
  }
  const unsigned runs = std::max(2u, r_.options_.checkRuns);
  std::map<uint64_t, std::vector<std::vector<uint64_t>>> outputs;  // launchIndex -> its output hashes, per run
  std::vector<std::vector<uint64_t>> ends;                         // the state at `to`, per run
  std::vector<uint64_t> order;                                     // launches in the order they ran
  afterLaunch_ = [&](const LaunchRecord& launch) {
    const std::vector<unsigned> positions = reachedRanges(to, launch);
    auto& perRun = outputs[launch.launchIndex];
    if (perRun.empty()) order.push_back(launch.launchIndex);
    perRun.push_back(hashAll(piecesOf(to, &positions)));
  };
  try {
    for (unsigned run = 0; run < runs; ++run) {
      restore(from);
      reexecute(from.seq, to.seq, report, listener);
      ends.push_back(hashAll(piecesOf(to, nullptr)));
    }
  } catch (...) {
    afterLaunch_ = nullptr;
    throw;
  }
  afterLaunch_ = nullptr;

  std::vector<uint64_t> varying;
  for (const uint64_t index : order) {
    const auto& perRun = outputs[index];
    if (std::any_of(perRun.begin(), perRun.end(), [&](const auto& h) { return h != perRun.front(); })) {
      varying.push_back(index);
    }
  }
  const bool endsAgree = std::all_of(ends.begin(), ends.end(), [&](const auto& h) { return h == ends.front(); });
  const std::string n = std::to_string(runs);
  if (!varying.empty()) {
    const LaunchRecord* first = model_.launch(varying.front());
    report.determinism.push_back(
        "launch " + std::to_string(varying.front()) + " (" +
        (first != nullptr ? std::string(first->event().getKernelName().cStr()) : std::string("?")) +
        ") is the first whose outputs vary between " + n + " runs from " + from.name() + ": nondeterministic here" +
        (varying.size() > 1 ? " (" + std::to_string(varying.size()) + " launches' outputs vary in all)" : ""));
  } else if (!endsAgree) {
    report.determinism.push_back("no launch's outputs vary, but the " + n + " runs end in different states");
  } else {
    report.determinism.push_back("the " + n + " runs from " + from.name() +
                                 " agree with each other: deterministic here, so the difference from the "
                                 "recording is not replay variance");
  }
}

}  // namespace kcap::replay
