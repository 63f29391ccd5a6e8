// --check uninit: bytes of the pre-state the program never wrote before the
// launch (per the trace) poisoned; outputs that change depend on them.
#include "check_support.h"

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <utility>

namespace kcap::replay {
namespace {

void addInterval(std::map<uint64_t, uint64_t>& set, uint64_t begin, uint64_t end) {
  if (begin >= end) return;
  auto it = set.upper_bound(begin);
  if (it != set.begin()) {
    auto prev = std::prev(it);
    if (prev->second >= begin) {
      begin = prev->first;
      end = std::max(end, prev->second);
      it = set.erase(prev);
    }
  }
  while (it != set.end() && it->first <= end) {
    end = std::max(end, it->second);
    it = set.erase(it);
  }
  set[begin] = end;
}

// A value every never-written byte gets in one poisoned run: by its index
// among them (the per-run pattern varies along the bytes).
struct PoisonPattern {
  std::string name;
  uint8_t fill = 0;
  uint64_t seed = 0;  // non-zero: pseudo-random bytes from this seed

  uint8_t byteAt(uint64_t index) const {
    if (seed == 0) return fill;
    // splitmix64 of (seed, index / 8): eight bytes a step.
    uint64_t z = seed + 0x9E3779B97F4A7C15ull * (index / 8 + 1);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return static_cast<uint8_t>(z >> (8 * (index % 8)));
  }
};

// NaN (a quiet one in f32, f16 and bf16 alike), a large finite value of
// either sign (0x7B: 1.3e36 as f32 and bf16, 61280 as f16; 0xFB the
// negatives), and bytes that differ from run to run (their seed named, to
// repeat a finding).
const std::vector<PoisonPattern>& poisonPatterns() {
  static const std::vector<PoisonPattern> patterns = [] {
    const uint64_t seed = (static_cast<uint64_t>(std::random_device{}()) << 32 | std::random_device{}()) | 1;
    char name[64];
    std::snprintf(name, sizeof name, "random bytes (seed 0x%llx)", static_cast<unsigned long long>(seed));
    return std::vector<PoisonPattern>{{"0xFF (NaN)", 0xFF, 0},
                                      {"0x7B (large positive)", 0x7B, 0},
                                      {"0xFB (large negative)", 0xFB, 0},
                                      {name, 0, seed}};
  }();
  return patterns;
}

}  // namespace

std::vector<std::pair<uint64_t, uint64_t>> writtenBefore(const TraceModel& model, format::TraceReader& reader,
                                                         const LaunchRecord& launch) {
  std::map<uint64_t, uint64_t> set;
  for (const StoredEvent* op : model.memoryOpsBetween(0, launch.seq())) {
    const auto event = op->get();
    if (event.isMemcpy()) {
      const auto c = event.getMemcpy();
      if (c.getResult() != 0 || c.getDst() == 0) continue;
      if (c.getDirection() == schema::CopyDirection::DEVICE_TO_HOST ||
          c.getDirection() == schema::CopyDirection::HOST_TO_HOST) {
        continue;
      }
      if (c.getWidth() != 0 && (c.getHeight() > 1 || c.getDepth() > 1)) {
        // 2D and 3D: the rows, slice by slice (none of a damaged trace's).
        const auto rows = copyRows(c);
        for (uint64_t z = 0; rows && z < rows->slices; ++z) {
          for (uint64_t y = 0; y < rows->rows; ++y) {
            const uint64_t at = c.getDst() + rows->dstAt(y, z);
            addInterval(set, at, at + rows->width);
          }
        }
      } else {
        addInterval(set, c.getDst(), c.getDst() + c.getSize());
      }
    } else if (event.isCollective()) {
      const auto c = event.getCollective();
      if (c.getResult() == 0 && c.getWritten() != 0) {
        addInterval(set, c.getRecvBuffer(), c.getRecvBuffer() + c.getWritten());
      }
    } else if (event.isMemset()) {
      const auto m = event.getMemset();
      if (m.getResult() != 0) continue;
      const uint64_t rows = std::max<uint64_t>(m.getHeight(), 1);
      const uint64_t width = m.getCount() * std::max<uint64_t>(m.getElementSize(), 1);
      for (uint64_t row = 0; row < rows; ++row) {
        const uint64_t at = m.getDst() + row * m.getPitch();
        addInterval(set, at, at + width);
      }
    }
  }
  const bool preOnly = model.traceBegin() != nullptr &&
                       model.traceBegin()->get().getTraceBegin().getCaptureMode() == schema::CaptureMode::PRE_ONLY;
  for (const LaunchRecord& earlier : model.launches()) {
    if (earlier.seq() >= launch.seq()) break;
    const auto e = earlier.event();
    // What it changed, when the trace says; every range it reached otherwise.
    if (earlier.end == nullptr || preOnly || e.getCapturing()) {
      for (const auto pre : e.getPre())
        addInterval(set, pre.getAddress(), pre.getAddress() + pre.getContent().getSize());
      if (earlier.end != nullptr) {
        for (const auto post : earlier.end->get().getLaunchEnd().getPost()) {
          addInterval(set, post.getAddress(), post.getAddress() + post.getContent().getSize());
        }
      }
      continue;
    }
    for (const auto post : earlier.end->get().getLaunchEnd().getPost()) {
      const uint64_t base = post.getAddress(), size = post.getContent().getSize();
      std::vector<uint8_t> before;
      for (const auto pre : e.getPre()) {
        if (pre.getAddress() == base && pre.getContent().getSize() == size)
          before = reader.readContent(pre.getContent());
      }
      if (before.empty()) {
        addInterval(set, base, base + size);
        continue;
      }
      const std::vector<uint8_t> after = reader.readContent(post.getContent());
      for (uint64_t k = 0; k < size;) {
        if (before[k] == after[k]) {
          ++k;
          continue;
        }
        uint64_t end = k;
        while (end < size && before[end] != after[end]) ++end;
        addInterval(set, base + k, base + end);
        k = end;
      }
    }
  }
  return {set.begin(), set.end()};
}

namespace checks {

CheckFinding uninit(CheckTarget& t) {
  CheckFinding f{"uninit", CheckStatus::kClean, "", {}};
  const auto e = t.launch().event();
  const std::vector<std::pair<uint64_t, uint64_t>> known = writtenBefore(t.model(), t.reader(), t.launch());
  // Bytes of the pre-state never written before the launch.
  struct Poison {
    Range range;
    std::vector<std::pair<uint64_t, uint64_t>> spans;  // offsets in the range
    uint64_t bytes = 0;
  };
  std::vector<Poison> poison;
  for (const auto pre : e.getPre()) {
    if (pre.getKind() == schema::MemoryKind::MODULE_GLOBAL) continue;
    const uint64_t base = pre.getAddress(), size = pre.getContent().getSize();
    Poison p{{base, size, rangeText(e, base, size)}, {}, 0};
    uint64_t at = base;
    auto it = std::upper_bound(known.begin(), known.end(), std::make_pair(base, UINT64_MAX));
    if (it != known.begin()) --it;
    for (; it != known.end() && it->first < base + size && at < base + size; ++it) {
      if (it->second <= at) continue;
      if (it->first > at) p.spans.push_back({at - base, it->first - base});
      at = std::max(at, it->second);
    }
    if (at < base + size) p.spans.push_back({at - base, size});
    for (const auto& s : p.spans) p.bytes += s.second - s.first;
    if (p.bytes != 0) poison.push_back(std::move(p));
  }
  if (poison.empty()) {
    f.summary = "every byte of the pre-state was written before the launch (per the trace)";
    return f;
  }
  std::vector<Range> ranges = outputRanges(t);
  const auto baseline = replayOnce(t, ranges);
  const auto again = replayOnce(t, ranges);
  if (baseline != again) {
    f.status = CheckStatus::kError;
    f.summary = "the outputs vary between two plain runs (see --check determinism): cannot attribute differences";
    return f;
  }
  uint64_t poisonedBytes = 0;
  for (const Poison& p : poison) poisonedBytes += p.bytes;
  // Whether `address` is a never-written byte, and its offset among all of
  // them (a pattern's byte there).
  const auto poisonIndex = [&](uint64_t address) -> std::optional<uint64_t> {
    uint64_t before = 0;
    for (const Poison& p : poison) {
      const bool inside = address >= p.range.address && address - p.range.address < p.range.size;
      for (const auto& s : p.spans) {
        if (inside && address - p.range.address >= s.first && address - p.range.address < s.second) {
          return before + (address - p.range.address - s.first);
        }
        before += s.second - s.first;
      }
    }
    return std::nullopt;
  };

  // One value is not enough: a max-style reduction ignores NaN, a min-style
  // one a large positive value. Each pattern poisons every never-written
  // byte; any that changes an output is a finding.
  std::vector<std::string> changedBy;
  std::vector<std::string> changedRanges;
  uint64_t total = 0;
  for (const PoisonPattern& pattern : poisonPatterns()) {
    const auto poisoned = replayOnce(t, ranges, [&] {
      uint64_t index = 0;
      for (const Poison& p : poison) {
        std::vector<uint8_t> bytes = t.read(p.range.address, p.range.size);
        for (const auto& s : p.spans) {
          for (uint64_t k = s.first; k < s.second; ++k, ++index) {
            if (!inPointerWord(e, p.range.address + k)) bytes[k] = pattern.byteAt(index);
          }
        }
        t.write(p.range.address, bytes.data(), p.range.size);
      }
    });
    uint64_t changed = 0;
    std::vector<std::string> texts;
    for (size_t i = 0; i < ranges.size(); ++i) {
      Diff d;
      for (uint64_t k = 0; k < ranges[i].size; ++k) {
        if (poisoned[i][k] == baseline[i][k]) continue;
        // A poisoned byte the kernel left alone still holds the pattern: not a difference.
        const auto index = poisonIndex(ranges[i].address + k);
        if (index && poisoned[i][k] == pattern.byteAt(*index)) continue;
        d.add(k);
      }
      if (d.bytes == 0) continue;
      changed += d.bytes;
      const std::string what = "of output changed with " + pattern.name;
      texts.push_back(diffText(ranges[i], d, what.c_str()));
    }
    if (changed == 0) continue;
    changedBy.push_back(pattern.name);
    total = std::max(total, changed);
    if (changedRanges.empty()) changedRanges = std::move(texts);  // the first pattern's, in detail
  }
  std::string patterns;
  for (const PoisonPattern& pattern : poisonPatterns()) patterns += (patterns.empty() ? "" : "; ") + pattern.name;
  if (changedBy.empty()) {
    f.summary = std::to_string(poisonedBytes) + " never-written bytes poisoned with each of " +
                std::to_string(poisonPatterns().size()) + " patterns (" + patterns + "): the outputs did not change";
    return f;
  }
  f.status = CheckStatus::kFinding;
  std::string which;
  for (const std::string& name : changedBy) which += (which.empty() ? "" : "; ") + name;
  f.summary = "outputs depend on memory never written before the launch: up to " + std::to_string(total) +
              " output bytes changed when " + std::to_string(poisonedBytes) +
              " never-written bytes were poisoned (changed with " + which + ")";
  f.details = changedRanges;
  for (const Poison& p : poison) {
    f.details.push_back("poisoned " + p.range.label + ": " + std::to_string(p.bytes) +
                        " never-written bytes, first at offset " + std::to_string(p.spans.front().first));
  }
  return f;
}

}  // namespace checks
}  // namespace kcap::replay
