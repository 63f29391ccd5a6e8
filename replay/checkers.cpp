// The checkers run in the replay process, by name, and the loop that runs
// the ones asked for on a launch; each checker is in its own check_*.cpp.
#include "checkers.h"

#include <algorithm>

#include "check_support.h"
#include "driver.h"

namespace kcap::replay {

const std::vector<Checker>& checkers() {
  static const std::vector<Checker> table = {
      {"determinism", "replay N times (--runs) from one pre-state; outputs that vary", checks::determinism},
      {"unwritten", "poison the outputs; bytes the recording changed that the replay leaves unwritten",
       checks::unwritten},
      {"uninit", "poison bytes never written before the launch; outputs that change", checks::uninit},
      {"alias", "pointer parameters into one written range; outputs that change when separated", checks::alias},
      {"overrun", "every range against unmapped guard memory; a fault is an access past the end", checks::overrun},
  };
  return table;
}

std::vector<std::string> checkNames() {
  std::vector<std::string> names;
  for (const Checker& c : checkers()) names.push_back(c.name);
  names.push_back("sanitizer");
  return names;
}

bool runChecks(CheckTarget& target, LaunchOutcome& outcome) {
  const auto& wanted = target.options().checks;
  for (const Checker& c : checkers()) {
    if (std::find(wanted.begin(), wanted.end(), c.name) == wanted.end()) continue;
    if (outcome.verdict == Verdict::kFault || outcome.verdict == Verdict::kHang || outcome.verdict == Verdict::kError) {
      outcome.checks.push_back({c.name, CheckStatus::kNotRun, "the launch did not replay cleanly", {}});
      continue;
    }
    if (target.contextLost) {
      outcome.checks.push_back({c.name, CheckStatus::kNotRun, "an earlier check ended the CUDA context", {}});
      continue;
    }
    try {
      outcome.checks.push_back(c.run(target));
    } catch (const CudaError& error) {
      outcome.checks.push_back({c.name, CheckStatus::kError, error.what(), {}});
      if (error.sticky()) target.contextLost = true;
    } catch (const std::exception& error) {
      outcome.checks.push_back({c.name, CheckStatus::kError, error.what(), {}});
    }
  }
  return !target.contextLost;
}

}  // namespace kcap::replay
