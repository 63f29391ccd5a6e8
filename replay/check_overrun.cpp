// --check overrun: every recorded range placed again with its end against
// unmapped guard memory; a fault is an access past the end.
#include "check_support.h"

#include <algorithm>

#include "driver.h"

namespace kcap::replay::checks {

CheckFinding overrun(CheckTarget& t) {
  CheckFinding f{"overrun", CheckStatus::kClean, "", {}};
  const auto e = t.launch().event();
  const auto& spans = t.placeGuarded();
  uint64_t maxSlack = 0;
  for (const auto& s : spans) maxSlack = std::max(maxSlack, s.slack);
  try {
    t.restore();
    std::vector<uint8_t> params = t.params();
    t.run(params);
  } catch (const CudaError& error) {
    f.status = CheckStatus::kFinding;
    f.summary = std::string(
                    "access past the end of an allocation: with every range's end against unmapped memory the launch "
                    "failed (") +
                error.what() + "); the normal replay did not";
    for (const auto word : e.getPointers()) {
      const auto index = paramIndexOf(e, word.getOffset());
      for (const auto& s : spans) {
        if (word.getValue() >= s.recorded && word.getValue() - s.recorded < s.size) {
          f.details.push_back("candidate: " + (index ? "param " + std::to_string(*index) : std::string("pointer")) +
                              " -> " + hexText(s.recorded) + ", " + std::to_string(s.size) + " bytes (+" +
                              std::to_string(word.getValue() - s.recorded) + "), " + std::to_string(s.slack) +
                              " bytes of slack before the guard");
        }
      }
    }
    t.contextLost = error.sticky();  // runChecks stops after this finding
    return f;
  }
  f.summary = "no fault with " + std::to_string(spans.size()) + " range(s) ending against unmapped memory";
  if (maxSlack != 0) {
    f.summary += "; overruns of fewer than " + std::to_string(maxSlack + 1) +
                 " bytes can go unnoticed (256-byte base alignment leaves that slack)";
  }
  return f;
}

}  // namespace kcap::replay::checks
