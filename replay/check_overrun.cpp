// --check overrun: every recorded range placed again with its end against
// unmapped guard memory; a fault is an access past the end. The slack a
// 256-byte-aligned base leaves between a range's end and its guard is
// filled with two patterns in turn: outputs that differ between them are a
// read past the end, slack that changed a write past it.
#include "check_support.h"

#include <algorithm>

#include "driver.h"

namespace kcap::replay::checks {
namespace {

// Names the recorded range a span is, and a pointer parameter into it.
std::vector<std::string> candidates(schema::Launch::Reader e, const std::vector<DeviceMemory::GuardedSpan>& spans) {
  std::vector<std::string> out;
  for (const auto word : e.getPointers()) {
    const auto index = paramIndexOf(e, word.getOffset());
    for (const auto& s : spans) {
      if (word.getValue() >= s.recorded && word.getValue() - s.recorded < s.size) {
        out.push_back("candidate: " + (index ? "param " + std::to_string(*index) : std::string("pointer")) + " -> " +
                      hexText(s.recorded) + ", " + std::to_string(s.size) + " bytes (+" +
                      std::to_string(word.getValue() - s.recorded) + "), " + std::to_string(s.slack) +
                      " bytes of slack before the guard");
      }
    }
  }
  return out;
}

// What a run with every slack filled with one byte value gave.
struct SlackRun {
  uint8_t pattern = 0;
  std::vector<std::vector<uint8_t>> outputs;
  std::vector<std::string> written;  // "N bytes past the end of 0x... (+offset)", per span that changed
};

SlackRun runWithSlack(CheckTarget& t, const std::vector<Range>& ranges,
                      const std::vector<DeviceMemory::GuardedSpan>& spans, uint8_t pattern) {
  SlackRun run{pattern, {}, {}};
  run.outputs = replayOnce(t, ranges, [&] {
    for (const auto& s : spans) {
      if (s.slack == 0) continue;
      const std::vector<uint8_t> fill(s.slack, pattern);
      t.writeDevice(s.replay + s.size, fill.data(), s.slack);
    }
  });
  for (const auto& s : spans) {
    if (s.slack == 0) continue;
    const std::vector<uint8_t> after = t.readDevice(s.replay + s.size, s.slack);
    uint64_t changed = 0, first = s.slack;
    for (uint64_t k = 0; k < after.size(); ++k) {
      if (after[k] == pattern) continue;
      ++changed;
      first = std::min(first, k);
    }
    if (changed != 0) {
      run.written.push_back(std::to_string(changed) + " bytes written past the end of " + hexText(s.recorded) + " (" +
                            std::to_string(s.size) + " bytes), the first " + std::to_string(first) + " bytes past it");
    }
  }
  return run;
}

}  // namespace

CheckFinding overrun(CheckTarget& t) {
  CheckFinding f{"overrun", CheckStatus::kClean, "", {}};
  const auto e = t.launch().event();
  const auto& spans = t.placeGuarded();
  uint64_t maxSlack = 0;
  for (const auto& s : spans) maxSlack = std::max(maxSlack, s.slack);
  const auto fault = [&](const CudaError& error, const std::string& when) {
    f.status = CheckStatus::kFinding;
    f.summary = "access past the end of an allocation: with every range's end against unmapped memory" + when +
                " the launch failed (" + error.what() + "); the normal replay did not";
    f.details = candidates(e, spans);
    t.contextLost = error.sticky();  // runChecks stops after this finding
  };
  try {
    t.restore();
    std::vector<uint8_t> params = t.params();
    t.run(params);
  } catch (const CudaError& error) {
    fault(error, "");
    return f;
  }
  f.summary = "no fault with " + std::to_string(spans.size()) + " range(s) ending against unmapped memory";
  if (maxSlack == 0) return f;

  // The slack: 0xFF (NaN as f32, f16, bf16) against 0x7B (a large finite
  // value), the first again to tell a kernel whose outputs vary anyway.
  const std::vector<Range> ranges = outputRanges(t);
  std::vector<SlackRun> runs;
  for (const uint8_t pattern : {uint8_t{0xFF}, uint8_t{0x7B}, uint8_t{0xFF}}) {
    try {
      runs.push_back(runWithSlack(t, ranges, spans, pattern));
    } catch (const CudaError& error) {
      char when[96];
      std::snprintf(when, sizeof when, " and the slack before it filled with 0x%02X", pattern);
      fault(error, when);
      return f;
    }
  }
  std::vector<std::string> written;
  for (const SlackRun& run : runs) {
    for (const std::string& text : run.written) {
      if (std::find(written.begin(), written.end(), text) == written.end()) written.push_back(text);
    }
  }
  const bool varies = runs[0].outputs != runs[2].outputs;
  const bool reads = !varies && runs[0].outputs != runs[1].outputs;
  if (reads || !written.empty()) {
    f.status = CheckStatus::kFinding;
    f.summary = "access past the end of an allocation, inside the " + std::to_string(maxSlack) +
                " bytes of slack before the guard at most:";
    if (reads) f.summary += " the outputs differ when the slack holds 0xFF or 0x7B (a read past the end)";
    if (!written.empty()) f.summary += std::string(reads ? ";" : "") + " the slack was written (a write past the end)";
    for (size_t i = 0; reads && i < ranges.size(); ++i) {
      Diff d;
      for (uint64_t k = 0; k < ranges[i].size; ++k) {
        if (runs[0].outputs[i][k] != runs[1].outputs[i][k]) d.add(k);
      }
      if (d.bytes != 0) f.details.push_back(diffText(ranges[i], d, "of output differ between the two fills"));
    }
    f.details.insert(f.details.end(), written.begin(), written.end());
    const auto named = candidates(e, spans);
    f.details.insert(f.details.end(), named.begin(), named.end());
    return f;
  }
  f.summary += "; the slack before each guard (up to " + std::to_string(maxSlack) +
               " bytes) filled with 0xFF and then 0x7B changed no output and was not written";
  if (varies) f.summary += " (the outputs vary from run to run: reads of the slack could not be told apart)";
  return f;
}

}  // namespace kcap::replay::checks
