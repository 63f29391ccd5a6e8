// --check unwritten: the outputs poisoned with two patterns before the
// launch; bytes the recording changed but that keep the poison were left
// unwritten, and unwritten bytes between written ones are holes.
#include "check_support.h"

#include <algorithm>

namespace kcap::replay::checks {

CheckFinding unwritten(CheckTarget& t) {
  CheckFinding f{"unwritten", CheckStatus::kClean, "", {}};
  if (!hasPostState(t, f)) return f;
  const auto e = t.launch().event();
  // Ranges the recorded launch changed, with which bytes it changed.
  struct Output {
    Range range;
    std::vector<bool> changed;
  };
  std::vector<Output> outputs;
  for (const auto post : t.launch().end->get().getLaunchEnd().getPost()) {
    if (post.getKind() == schema::MemoryKind::MODULE_GLOBAL) continue;
    const uint64_t size = post.getContent().getSize();
    const std::vector<uint8_t> after = t.recorded(post.getContent());
    std::vector<uint8_t> before;
    for (const auto pre : e.getPre()) {
      if (pre.getAddress() == post.getAddress() && pre.getContent().getSize() == size)
        before = t.recorded(pre.getContent());
    }
    std::vector<bool> changed(size, true);  // no pre-state: every byte counts as changed
    bool any = before.empty();
    if (!before.empty()) {
      for (uint64_t b = 0; b < size; ++b) {
        changed[b] = before[b] != after[b];
        any = any || changed[b];
      }
    }
    if (any) outputs.push_back({{post.getAddress(), size, rangeText(e, post.getAddress(), size)}, std::move(changed)});
  }
  if (outputs.empty()) {
    f.summary = "the recorded launch changed no bytes: nothing to check";
    return f;
  }
  std::vector<Range> ranges;
  for (const Output& o : outputs) ranges.push_back(o.range);
  const auto poisoned = [&](uint8_t pattern) {
    return replayOnce(t, ranges, [&] {
      for (const Range& r : ranges) {
        std::vector<uint8_t> fill = t.read(r.address, r.size);  // restored: keeps stored pointer words
        for (uint64_t b = 0; b < r.size; ++b) {
          if (!inPointerWord(e, r.address + b)) fill[b] = pattern;
        }
        t.write(r.address, fill.data(), r.size);
      }
    });
  };
  const auto a = poisoned(0xA5);
  const auto b = poisoned(0x5A);
  uint64_t missedTotal = 0, extraTotal = 0, holesTotal = 0;
  for (size_t i = 0; i < outputs.size(); ++i) {
    Diff missed, extra, holes;
    // Left at the poison: every byte of its aligned 4-byte word holds the
    // poison after both runs (a read-modify-write of the poison can leave
    // one byte at a poison value by chance, hardly a whole word twice).
    const auto poisonWord = [&](uint64_t k) {
      const uint64_t w = k & ~uint64_t{3};
      for (uint64_t j = w; j < std::min(w + 4, ranges[i].size); ++j) {
        if (a[i][j] != 0xA5 || b[i][j] != 0x5A) return false;
      }
      return true;
    };
    std::optional<uint64_t> firstWritten, lastWritten;
    for (uint64_t k = 0; k < ranges[i].size; ++k) {
      const bool notWritten = poisonWord(k);
      if (outputs[i].changed[k] && notWritten) missed.add(k);
      if (!outputs[i].changed[k] && !notWritten) extra.add(k);
      if (!notWritten) {
        if (!firstWritten) firstWritten = k;
        lastWritten = k;
      }
    }
    // Holes: bytes the launch never writes between bytes it does write (rows
    // an unrolled loop skips, a group's tail). A slice written at one end of
    // a larger buffer leaves no hole; a strided writer does, and is reported.
    if (firstWritten) {
      for (uint64_t k = *firstWritten; k <= *lastWritten; ++k) {
        if (poisonWord(k)) holes.add(k);
      }
    }
    missedTotal += missed.bytes;
    extraTotal += extra.bytes;
    holesTotal += holes.bytes;
    if (holes.bytes) {
      f.details.push_back(
          diffText(ranges[i], holes, "never written by the launch, between bytes it writes (holes in its output)"));
    }
    if (missed.bytes)
      f.details.push_back(diffText(ranges[i], missed, "the recorded launch changed were left unwritten"));
    if (extra.bytes) {
      f.details.push_back(
          diffText(ranges[i], extra,
                   "written that the recorded launch left unchanged (note: possibly rewritten with the same value)"));
    }
  }
  f.summary = std::to_string(missedTotal) + " bytes the recorded launch changed were not written when poisoned; " +
              std::to_string(holesTotal) + " bytes never written between bytes it writes; " +
              std::to_string(extraTotal) + " bytes written that the recording left unchanged";
  if (missedTotal != 0 || holesTotal != 0) f.status = CheckStatus::kFinding;
  return f;
}

}  // namespace kcap::replay::checks
