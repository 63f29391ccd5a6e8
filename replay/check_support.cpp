#include "check_support.h"
#include "hex_text.h"

#include <cstdio>

namespace kcap::replay::checks {
namespace {

// "param 2" when a pointer parameter points into [base, base + size), else "buffer".
std::string labelOf(schema::Launch::Reader e, uint64_t base, uint64_t size) {
  for (const auto word : e.getPointers()) {
    if (word.getValue() < base || word.getValue() - base >= size) continue;
    if (const auto i = paramIndexOf(e, word.getOffset())) return "param " + std::to_string(*i);
  }
  return "buffer";
}

}  // namespace

std::optional<uint32_t> paramIndexOf(schema::Launch::Reader e, uint32_t wordOffset) {
  const auto layout = e.getParamLayout();
  for (uint32_t i = 0; i < layout.size(); ++i) {
    if (wordOffset >= layout[i].getOffset() && wordOffset - layout[i].getOffset() < layout[i].getSize()) return i;
  }
  return std::nullopt;
}

std::string rangeText(schema::Launch::Reader e, uint64_t address, uint64_t size) {
  return labelOf(e, address, size) + " (" + hexText(address) + ", " + std::to_string(size) + " bytes)";
}

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

std::vector<std::vector<uint8_t>> replayOnce(CheckTarget& t, const std::vector<Range>& ranges,
                                             const std::function<void()>& before) {
  t.restore();
  if (before) before();
  std::vector<uint8_t> params = t.params();
  t.run(params);
  return readAll(t, ranges);
}

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
    f.status = CheckStatus::kNotRun;
    f.summary = "the trace has no post-launch memory of this launch";
    return false;
  }
  return true;
}

std::string diffText(const Range& r, const Diff& d, const char* what) {
  return r.label + ": " + std::to_string(d.bytes) + " bytes " + what + ", first at offset " +
         std::to_string(d.first.value_or(0));
}

}  // namespace kcap::replay::checks
