// --check alias: pointer parameters into one range the launch writes, each
// given a separate copy in turn; outputs that change depend on the aliasing.
#include "check_support.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <utility>

namespace kcap::replay::checks {

CheckFinding alias(CheckTarget& t) {
  CheckFinding f{"alias", CheckStatus::kClean, "", {}};
  const auto e = t.launch().event();
  struct Param {
    uint32_t index;
    uint32_t wordOffset;
    uint64_t value;
  };
  // Pointer parameters grouped by the recorded range they point into.
  std::map<uint64_t, std::vector<Param>> byRange;
  std::map<uint64_t, uint64_t> rangeSize;
  for (const auto word : e.getPointers()) {
    if (word.getInTensorMap()) continue;
    const auto index = paramIndexOf(e, word.getOffset());
    if (!index) continue;
    for (const auto pre : e.getPre()) {
      if (pre.getKind() == schema::MemoryKind::MODULE_GLOBAL) continue;
      const uint64_t base = pre.getAddress(), size = pre.getContent().getSize();
      if (word.getValue() < base || word.getValue() - base >= size) continue;
      byRange[base].push_back({*index, word.getOffset(), word.getValue()});
      rangeSize[base] = size;
      break;
    }
  }
  // Written ranges: those the recorded launch changed (or, without a post-state, any).
  const auto writtenRange = [&](uint64_t base) {
    if (t.launch().end == nullptr) return true;
    for (const auto post : t.launch().end->get().getLaunchEnd().getPost()) {
      if (post.getAddress() != base) continue;
      for (const auto pre : e.getPre()) {
        if (pre.getAddress() == base && pre.getContent().getSize() == post.getContent().getSize()) {
          return t.recorded(pre.getContent()) != t.recorded(post.getContent());
        }
      }
      return true;
    }
    return false;
  };
  std::vector<std::pair<uint64_t, std::vector<Param>>> aliased;
  for (auto& [base, params] : byRange) {
    std::vector<uint32_t> distinct;
    for (const Param& p : params) {
      if (std::find(distinct.begin(), distinct.end(), p.index) == distinct.end()) distinct.push_back(p.index);
    }
    if (distinct.size() < 2 || !writtenRange(base)) continue;
    std::string line = "params";
    for (const Param& p : params) line += " " + std::to_string(p.index) + " (+" + std::to_string(p.value - base) + ")";
    f.details.push_back(line + " point into one written range (" + hexText(base) + ", " +
                        std::to_string(rangeSize[base]) + " bytes)");
    aliased.push_back({base, params});
  }
  if (aliased.empty()) {
    f.summary = "no two pointer parameters point into one range the launch writes";
    return f;
  }
  const std::vector<Range> ranges = outputRanges(t);
  const auto baseline = replayOnce(t, ranges);
  uint64_t dependent = 0;
  for (const auto& [base, group] : aliased) {
    for (const Param& p : group) {
      const uint64_t extent = base + rangeSize[base] - p.value;  // an upper bound of what p reaches
      t.restore();
      const std::vector<uint8_t> copy = t.read(p.value, extent);
      const uint64_t separate = t.scratch(extent);
      t.writeDevice(separate, copy.data(), extent);
      std::vector<uint8_t> bytes = t.params();
      std::memcpy(bytes.data() + p.wordOffset, &separate, sizeof separate);
      t.run(bytes);
      auto result = readAll(t, ranges);
      const std::vector<uint8_t> through = t.readDevice(separate, extent);
      // What the kernel wrote through the separated pointer lands where it would have.
      for (size_t i = 0; i < ranges.size(); ++i) {
        for (uint64_t k = 0; k < extent; ++k) {
          const uint64_t at = p.value + k;
          if (through[k] != copy[k] && at >= ranges[i].address && at - ranges[i].address < ranges[i].size) {
            result[i][at - ranges[i].address] = through[k];
          }
        }
      }
      for (size_t i = 0; i < ranges.size(); ++i) {
        Diff d;
        for (uint64_t k = 0; k < ranges[i].size; ++k) {
          if (result[i][k] != baseline[i][k]) d.add(k);
        }
        if (d.bytes == 0) continue;
        ++dependent;
        f.details.push_back("with param " + std::to_string(p.index) +
                            " given a separate copy: " + diffText(ranges[i], d, "of output differ"));
      }
    }
  }
  if (dependent == 0) {
    f.summary = std::to_string(aliased.size()) +
                " aliased range(s); the outputs do not change when the parameters are separated";
  } else {
    f.status = CheckStatus::kFinding;
    f.summary = "output depends on aliasing: separating aliased parameters changes the outputs";
  }
  return f;
}

}  // namespace kcap::replay::checks
