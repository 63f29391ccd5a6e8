// --check determinism: the launch replayed --runs times from one pre-state;
// output bytes that vary between runs point at a race.
#include "check_support.h"

#include <algorithm>

namespace kcap::replay::checks {

CheckFinding determinism(CheckTarget& t) {
  const std::vector<Range> ranges = outputRanges(t);
  const unsigned runs = std::max(2u, t.options().checkRuns);
  const auto first = replayOnce(t, ranges);
  std::vector<std::vector<bool>> varies(ranges.size());
  std::vector<std::string> labels;
  for (size_t i = 0; i < ranges.size(); ++i) {
    varies[i].assign(ranges[i].size, false);
    labels.push_back(ranges[i].label);
  }
  for (unsigned run = 1; run < runs; ++run) {
    const auto again = replayOnce(t, ranges);
    for (size_t i = 0; i < ranges.size(); ++i) {
      for (uint64_t b = 0; b < ranges[i].size; ++b) {
        if (again[i][b] != first[i][b]) varies[i][b] = true;
      }
    }
  }
  return determinismFinding(labels, varies, std::to_string(runs) + " runs from the same pre-state",
                            "a race, or order-dependent atomics");
}

}  // namespace kcap::replay::checks

namespace kcap::replay {

CheckFinding determinismFinding(const std::vector<std::string>& labels, const std::vector<std::vector<bool>>& varies,
                                const std::string& runs, const std::string& cause) {
  CheckFinding f{"determinism", CheckStatus::kClean, "", {}};
  uint64_t total = 0;
  for (size_t i = 0; i < varies.size() && i < labels.size(); ++i) {
    checks::Diff d;
    for (uint64_t b = 0; b < varies[i].size(); ++b) {
      if (varies[i][b]) d.add(b);
    }
    if (d.bytes == 0) continue;
    total += d.bytes;
    f.details.push_back(labels[i] + ": " + std::to_string(d.bytes) + " bytes vary between runs, first at offset " +
                        std::to_string(d.first.value_or(0)));
  }
  if (total == 0) {
    f.summary = runs + " gave identical outputs";
  } else {
    f.status = CheckStatus::kFinding;
    f.summary = std::to_string(total) + " output bytes in " + std::to_string(f.details.size()) +
                " range(s) vary over " + runs + " (" + cause + ")";
  }
  return f;
}

}  // namespace kcap::replay
