#include "checkers.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <regex>

#include "driver.h"

namespace kcap::replay {
namespace {

std::string hexText(uint64_t v) {
  char text[24];
  std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(v));
  return text;
}

// Which parameter a pointer word belongs to (index in the parameter layout).
std::optional<uint32_t> paramIndexOf(schema::Launch::Reader e, uint32_t wordOffset) {
  const auto layout = e.getParamLayout();
  for (uint32_t i = 0; i < layout.size(); ++i) {
    if (wordOffset >= layout[i].getOffset() && wordOffset - layout[i].getOffset() < layout[i].getSize()) return i;
  }
  return std::nullopt;
}

// "param 2" when a pointer parameter points into [base, base + size), else "buffer".
std::string labelOf(schema::Launch::Reader e, uint64_t base, uint64_t size) {
  for (const auto word : e.getPointers()) {
    if (word.getValue() < base || word.getValue() - base >= size) continue;
    if (const auto i = paramIndexOf(e, word.getOffset())) return "param " + std::to_string(*i);
  }
  return "buffer";
}

std::string rangeText(schema::Launch::Reader e, uint64_t address, uint64_t size) {
  return labelOf(e, address, size) + " (" + hexText(address) + ", " + std::to_string(size) + " bytes)";
}

struct Range {
  uint64_t address = 0, size = 0;
  std::string label;
};

// Device ranges of the recorded post-state (module globals too: they are outputs).
std::vector<Range> outputRanges(CheckTarget& t) {
  std::vector<Range> out;
  if (t.launch().end == nullptr) return out;
  const auto e = t.launch().event();
  for (const auto r : t.launch().end->get().getLaunchEnd().getPost()) {
    const uint64_t size = r.getContent().getSize();
    Range range{r.getAddress(), size, rangeText(e, r.getAddress(), size)};
    if (r.getKind() == schema::MemoryKind::MODULE_GLOBAL) range.label = "global (" + hexText(r.getAddress()) + ")";
    out.push_back(range);
  }
  return out;
}

std::vector<std::vector<uint8_t>> readAll(CheckTarget& t, const std::vector<Range>& ranges) {
  std::vector<std::vector<uint8_t>> out;
  for (const Range& r : ranges) out.push_back(t.read(r.address, r.size));
  return out;
}

// One replay from the recorded pre-state; the outputs it left.
std::vector<std::vector<uint8_t>> replayOnce(CheckTarget& t, const std::vector<Range>& ranges,
                                             const std::function<void()>& before = {}) {
  t.restore();
  if (before) before();
  std::vector<uint8_t> params = t.params();
  t.run(params);
  return readAll(t, ranges);
}

// Recorded addresses of stored pointer words: never poisoned (the kernel
// would follow a poisoned pointer anywhere).
bool inPointerWord(schema::Launch::Reader e, uint64_t address) {
  for (const auto p : e.getIndirectPointers()) {
    uint64_t at = 0;
    if (__builtin_add_overflow(p.getBufferAddress(), p.getOffset(), &at)) continue;
    if (address >= at && address - at < 8) return true;
  }
  return false;
}

bool hasPostState(CheckTarget& t, CheckFinding& f) {
  const bool preOnly = t.model().traceBegin() != nullptr &&
                       t.model().traceBegin()->get().getTraceBegin().getCaptureMode() == schema::CaptureMode::PRE_ONLY;
  if (t.launch().end == nullptr || preOnly) {
    f.status = CheckStatus::notRun;
    f.summary = "the trace has no post-launch memory of this launch";
    return false;
  }
  return true;
}

struct Diff {
  uint64_t bytes = 0;
  std::optional<uint64_t> first;
  void add(uint64_t offset) {
    ++bytes;
    if (!first) first = offset;
  }
};

std::string diffText(const Range& r, const Diff& d, const char* what) {
  return r.label + ": " + std::to_string(d.bytes) + " bytes " + what + ", first at offset " +
         std::to_string(d.first.value_or(0));
}

// ---- determinism ------------------------------------------------------------------------------

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

// ---- unwritten --------------------------------------------------------------------------------

CheckFinding unwritten(CheckTarget& t) {
  CheckFinding f{"unwritten", CheckStatus::clean, "", {}};
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
  if (missedTotal != 0 || holesTotal != 0) f.status = CheckStatus::finding;
  return f;
}

// ---- uninit -----------------------------------------------------------------------------------

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

CheckFinding uninit(CheckTarget& t) {
  CheckFinding f{"uninit", CheckStatus::clean, "", {}};
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
    f.status = CheckStatus::error;
    f.summary = "the outputs vary between two plain runs (see --check determinism): cannot attribute differences";
    return f;
  }
  const auto poisoned = replayOnce(t, ranges, [&] {
    for (const Poison& p : poison) {
      std::vector<uint8_t> bytes = t.read(p.range.address, p.range.size);
      for (const auto& s : p.spans) {
        for (uint64_t k = s.first; k < s.second; ++k) {
          if (!inPointerWord(e, p.range.address + k)) bytes[k] = 0xFF;
        }
      }
      t.write(p.range.address, bytes.data(), p.range.size);
    }
  });
  // A poisoned byte the kernel left alone still holds 0xFF: not a difference.
  const auto wasPoisoned = [&](uint64_t address) {
    for (const Poison& p : poison) {
      if (address < p.range.address || address - p.range.address >= p.range.size) continue;
      for (const auto& s : p.spans) {
        if (address - p.range.address >= s.first && address - p.range.address < s.second) return true;
      }
    }
    return false;
  };
  uint64_t total = 0;
  std::vector<std::string> changedRanges;
  for (size_t i = 0; i < ranges.size(); ++i) {
    Diff d;
    for (uint64_t k = 0; k < ranges[i].size; ++k) {
      if (poisoned[i][k] == baseline[i][k]) continue;
      if (poisoned[i][k] == 0xFF && wasPoisoned(ranges[i].address + k)) continue;
      d.add(k);
    }
    if (d.bytes == 0) continue;
    total += d.bytes;
    changedRanges.push_back(diffText(ranges[i], d, "of output changed"));
  }
  uint64_t poisonedBytes = 0;
  for (const Poison& p : poison) poisonedBytes += p.bytes;
  if (total == 0) {
    f.summary = std::to_string(poisonedBytes) +
                " never-written bytes poisoned (0xFF, NaN as f32/f16/bf16): the outputs did not change";
    return f;
  }
  f.status = CheckStatus::finding;
  f.summary = "outputs depend on memory never written before the launch: " + std::to_string(total) +
              " output bytes changed when " + std::to_string(poisonedBytes) + " never-written bytes were poisoned";
  f.details = changedRanges;
  for (const Poison& p : poison) {
    f.details.push_back("poisoned " + p.range.label + ": " + std::to_string(p.bytes) +
                        " never-written bytes, first at offset " + std::to_string(p.spans.front().first));
  }
  return f;
}

// ---- alias ------------------------------------------------------------------------------------

CheckFinding alias(CheckTarget& t) {
  CheckFinding f{"alias", CheckStatus::clean, "", {}};
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
    f.status = CheckStatus::finding;
    f.summary = "output depends on aliasing: separating aliased parameters changes the outputs";
  }
  return f;
}

// ---- overrun ----------------------------------------------------------------------------------

CheckFinding overrun(CheckTarget& t) {
  CheckFinding f{"overrun", CheckStatus::clean, "", {}};
  const auto e = t.launch().event();
  const auto& spans = t.placeGuarded();
  uint64_t maxSlack = 0;
  for (const auto& s : spans) maxSlack = std::max(maxSlack, s.slack);
  try {
    t.restore();
    std::vector<uint8_t> params = t.params();
    t.run(params);
  } catch (const CudaError& error) {
    f.status = CheckStatus::finding;
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

}  // namespace

CheckFinding determinismFinding(const std::vector<std::string>& labels, const std::vector<std::vector<bool>>& varies,
                                const std::string& runs, const std::string& cause) {
  CheckFinding f{"determinism", CheckStatus::clean, "", {}};
  uint64_t total = 0;
  for (size_t i = 0; i < varies.size() && i < labels.size(); ++i) {
    Diff d;
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
    f.status = CheckStatus::finding;
    f.summary = std::to_string(total) + " output bytes in " + std::to_string(f.details.size()) +
                " range(s) vary over " + runs + " (" + cause + ")";
  }
  return f;
}

const std::vector<Checker>& checkers() {
  static const std::vector<Checker> table = {
      {"determinism", "replay N times (--runs) from one pre-state; outputs that vary", determinism},
      {"unwritten", "poison the outputs; bytes the recording changed that the replay leaves unwritten", unwritten},
      {"uninit", "poison bytes never written before the launch; outputs that change", uninit},
      {"alias", "pointer parameters into one written range; outputs that change when separated", alias},
      {"overrun", "every range against unmapped guard memory; a fault is an access past the end", overrun},
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
    if (outcome.verdict == Verdict::fault || outcome.verdict == Verdict::hang || outcome.verdict == Verdict::error) {
      outcome.checks.push_back({c.name, CheckStatus::notRun, "the launch did not replay cleanly", {}});
      continue;
    }
    if (target.contextLost) {
      outcome.checks.push_back({c.name, CheckStatus::notRun, "an earlier check ended the CUDA context", {}});
      continue;
    }
    try {
      outcome.checks.push_back(c.run(target));
    } catch (const CudaError& error) {
      outcome.checks.push_back({c.name, CheckStatus::error, error.what(), {}});
      if (error.sticky()) target.contextLost = true;
    } catch (const std::exception& error) {
      outcome.checks.push_back({c.name, CheckStatus::error, error.what(), {}});
    }
  }
  return !target.contextLost;
}

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

// ---- sanitizer (run by the tool, outside the replay process) ----------------------------------

namespace {

bool executable(const std::string& path) { return !path.empty() && ::access(path.c_str(), X_OK) == 0; }

// Runs argv, stdout and stderr together; the exit status (-1: could not run).
int capture(const std::vector<std::string>& argv, std::string& output) {
  int fds[2];
  if (::pipe(fds) != 0) return -1;
  const pid_t pid = ::fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    ::dup2(fds[1], 1);
    ::dup2(fds[1], 2);
    ::close(fds[0]);
    ::close(fds[1]);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    _exit(127);
  }
  ::close(fds[1]);
  char chunk[4096];
  for (;;) {
    const ssize_t n = ::read(fds[0], chunk, sizeof chunk);
    if (n > 0) {
      output.append(chunk, static_cast<size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

}  // namespace

std::string findComputeSanitizer() {
  if (const char* forced = std::getenv("KCAP_COMPUTE_SANITIZER")) return executable(forced) ? forced : "";
  if (const char* path = std::getenv("PATH")) {
    std::string dirs = path;
    size_t start = 0;
    while (start <= dirs.size()) {
      const size_t colon = std::min(dirs.find(':', start), dirs.size());
      const std::string dir = dirs.substr(start, colon - start);
      if (!dir.empty() && executable(dir + "/compute-sanitizer")) return dir + "/compute-sanitizer";
      start = colon + 1;
    }
  }
  if (const char* home = std::getenv("CUDA_HOME")) {
    if (executable(std::string(home) + "/bin/compute-sanitizer")) return std::string(home) + "/bin/compute-sanitizer";
  }
  if (executable("/usr/local/cuda/bin/compute-sanitizer")) return "/usr/local/cuda/bin/compute-sanitizer";
  return "";
}

CheckFinding runSanitizer(const ReplayOptions& options, uint64_t launchIndex, const std::string& kcapPath) {
  CheckFinding f{"sanitizer", CheckStatus::clean, "", {}};
  const std::string tool = findComputeSanitizer();
  if (tool.empty()) {
    f.status = CheckStatus::notRun;
    f.summary = "compute-sanitizer not found (PATH, $CUDA_HOME/bin, /usr/local/cuda/bin)";
    return f;
  }
  const std::regex summaryLine("ERROR SUMMARY: ([0-9]+) error");
  uint64_t errors = 0;
  std::vector<std::string> parts;
  for (const char* name : {"memcheck", "racecheck", "initcheck"}) {
    std::string output;
    const int status =
        capture({tool, "--tool", name, "--error-exitcode", "9", kcapPath, "replay", options.tracePath, "--launch",
                 std::to_string(launchIndex), "--no-isolate", "--device", std::to_string(options.device)},
                output);
    std::smatch match;
    uint64_t count = 0;
    bool summarized = false;
    std::string::const_iterator from = output.begin();
    while (std::regex_search(from, output.cend(), match, summaryLine)) {
      count = std::strtoull(match[1].str().c_str(), nullptr, 10);
      summarized = true;
      from = match[0].second;
    }
    if (status == 9 && count == 0) count = 1;
    errors += count;
    if (!summarized && status != 9 && status != 0 && status != 3) {
      f.status = f.status == CheckStatus::finding ? f.status : CheckStatus::error;
      parts.push_back(std::string(name) + ": did not run (exit status " + std::to_string(status) + ")");
    } else {
      parts.push_back(std::string(name) + ": " + std::to_string(count) + " error(s)");
    }
    // Its own report lines ("========= Invalid __global__ read ...", the summary).
    size_t kept = 0;
    size_t start = 0;
    while (start < output.size() && kept < 20) {
      const size_t eol = std::min(output.find('\n', start), output.size());
      const std::string line = output.substr(start, eol - start);
      if (line.rfind("=========", 0) == 0 && line.find_first_not_of("= ") != std::string::npos) {
        f.details.push_back(std::string(name) + ": " + line.substr(line.find_first_not_of("= ")));
        ++kept;
      }
      start = eol + 1;
    }
  }
  if (errors != 0) f.status = CheckStatus::finding;
  f.summary = "";
  for (size_t i = 0; i < parts.size(); ++i) f.summary += (i ? "; " : "") + parts[i];
  return f;
}

}  // namespace kcap::replay
