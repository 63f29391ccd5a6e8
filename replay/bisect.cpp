#include "bisect.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>

#include "driver.h"
#include "isolation.h"

namespace kcap::replay {
namespace {

namespace fs = std::filesystem;

bool failed(Verdict v) { return v == Verdict::fault || v == Verdict::hang || v == Verdict::error; }
bool diverged(Verdict v) { return v == Verdict::differs || v == Verdict::fault || v == Verdict::hang; }

// A scratch directory for saved outputs, removed with everything in it.
class ScratchDir {
 public:
  ScratchDir() {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/kcap-bisect-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) throw ReplayError("cannot make a directory like " + pattern);
    path_ = pattern;
  }
  ~ScratchDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  std::string sub(const std::string& name) const {
    const std::string dir = path_ + "/" + name;
    fs::create_directories(dir);
    return dir;
  }
  void clear(const std::string& dir) const {
    std::error_code ignored;
    for (const auto& entry : fs::directory_iterator(dir, ignored)) fs::remove(entry.path(), ignored);
  }

 private:
  std::string path_;
};

std::vector<LaunchOutcome> replayAll(const TraceModel& model, const ReplayOptions& options,
                                     const Selection& selection) {
  std::vector<LaunchOutcome> outcomes;
  replayIsolated(model, options, selection, [&](const LaunchOutcome& o) { outcomes.push_back(o); });
  return outcomes;
}

std::string flagsOf(const BisectOptions& options) {
  std::string flags;
  if (options.base.device != 0) flags += " --device " + std::to_string(options.base.device);
  if (!options.base.fixedAddresses) flags += " --no-fixed-va";
  switch (options.against) {
    case Against::recorded:
      break;
    case Against::forcePtx:
      flags += " --force-ptx";
      break;
    case Against::override:
      for (const auto& o : options.overrides) flags += " --override '" + o.kernelPattern + "=" + o.imagePath + "'";
      break;
    case Against::otherDevice:
      flags =
          " --device " + std::to_string(options.otherDevice) + (options.base.fixedAddresses ? "" : " --no-fixed-va");
      break;
  }
  if (options.base.dtype) flags += " --dtype " + dtypeName(*options.base.dtype);
  return flags;
}

std::vector<uint8_t> readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Compares side B's saved outputs of one launch with side A's. Fills
// b.buffers (expected: side A) and returns whether any byte differs.
bool compareSides(const TraceModel& model, LaunchOutcome& b, const std::string& dirA, const std::string& dirB,
                  const ReplayOptions& options) {
  const LaunchRecord* launch = model.launch(b.launchIndex);
  auto ranges = launch->event().getPre();
  if (launch->end != nullptr && launch->end->get().getLaunchEnd().getPost().size() != 0) {
    ranges = launch->end->get().getLaunchEnd().getPost();
  }
  b.buffers.clear();
  bool differs = false;
  for (const auto range : ranges) {
    char name[64];
    std::snprintf(name, sizeof name, "/%llu-%llx.bin", static_cast<unsigned long long>(b.launchIndex),
                  static_cast<unsigned long long>(range.getAddress()));
    const std::vector<uint8_t> expected = readFile(dirA + name);
    const std::vector<uint8_t> actual = readFile(dirB + name);
    BufferReport report;
    report.address = range.getAddress();
    report.size = range.getContent().getSize();
    const auto param = parameterPointingInto(launch->event(), range.getAddress(), report.size);
    report.label = range.getKind() == schema::MemoryKind::MODULE_GLOBAL ? "global"
                   : param                                              ? "param " + std::to_string(*param)
                                                                        : "buffer";
    if (expected.size() != report.size || actual.size() != report.size) {
      report.differingBytes = report.size;
      report.firstOffset = 0;
      differs = true;
      b.buffers.push_back(report);
      continue;
    }
    const ByteDiff diff = compareBytes(expected.data(), actual.data(), expected.size());
    report.differingBytes = diff.differingBytes;
    report.firstOffset = diff.firstOffset;
    std::optional<DType> type = options.dtype;
    if (param) {
      if (const auto it = options.paramDtypes.find(*param); it != options.paramDtypes.end()) type = it->second;
    }
    if (!diff.same()) {
      if (type) report.stats = elementStats(*type, expected.data(), actual.data(), expected.size());
      report.withinTolerance = options.tolerance && report.stats && options.tolerance->accepts(*report.stats);
      differs = differs || !report.withinTolerance;
    }
    b.buffers.push_back(std::move(report));
  }
  return differs;
}

uint64_t median(std::vector<uint64_t> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace

ReplayOptions sideB(const BisectOptions& options) {
  ReplayOptions b = options.base;
  switch (options.against) {
    case Against::recorded:
      break;
    case Against::forcePtx:
      b.forcePtx = true;
      break;
    case Against::override:
      b.overrides = options.overrides;
      break;
    case Against::otherDevice:
      b.device = options.otherDevice;
      break;
  }
  return b;
}

std::string describeSide(const BisectOptions& options, bool b) {
  if (!b) {
    return options.against == Against::otherDevice ? "GPU " + std::to_string(options.base.device)
                                                   : "the recorded code on GPU " + std::to_string(options.base.device);
  }
  switch (options.against) {
    case Against::recorded:
      return "the recording";
    case Against::forcePtx:
      return "the image's PTX, JIT-compiled (--force-ptx)";
    case Against::override: {
      std::string text = "the override build";
      for (const auto& o : options.overrides) text += " " + o.imagePath + " for /" + o.kernelPattern + "/";
      return text;
    }
    case Against::otherDevice:
      return "GPU " + std::to_string(options.otherDevice);
  }
  return "?";
}

BisectResult bisect(const TraceModel& model, const std::vector<uint64_t>& launches, const BisectOptions& options,
                    const std::function<void(uint64_t, uint64_t)>& progress) {
  BisectResult result;
  const std::string trace = options.base.tracePath;
  const bool twoSided = options.against != Against::recorded;
  const auto reproduce = [&](uint64_t index) {
    if (options.sequence && !launches.empty()) {
      return "kcap replay " + trace + " --range " + std::to_string(launches.front()) + ".." + std::to_string(index) +
             flagsOf(options);
    }
    return "kcap replay " + trace + " --launch " + std::to_string(index) + flagsOf(options);
  };
  const auto divergence = [&](LaunchOutcome outcome, std::string why) {
    const uint64_t index = outcome.launchIndex;
    return Divergence{std::move(outcome), std::move(why), reproduce(index)};
  };

  // ---- timing --------------------------------------------------------------
  if (options.perf) {
    ReplayOptions a = options.base;
    a.repeat = options.perfRepeat;
    ReplayOptions b = sideB(options);
    b.repeat = options.perfRepeat;
    for (size_t at = 0; at < launches.size(); at += options.batch) {
      const Selection batch{std::vector<uint64_t>(launches.begin() + static_cast<std::ptrdiff_t>(at),
                                                  launches.begin() + static_cast<std::ptrdiff_t>(std::min(
                                                                         launches.size(), at + options.batch))),
                            false};
      const auto outA = replayAll(model, a, batch);
      const auto outB = twoSided ? replayAll(model, b, batch) : outA;
      for (size_t i = 0; i < outA.size() && i < outB.size(); ++i) {
        const uint64_t base = twoSided ? median(outA[i].timesNs) : outA[i].recordedDurationNs.value_or(0);
        const uint64_t other = median(outB[i].timesNs);
        if (base == 0 || other == 0) continue;
        ++result.timed;
        const double percent =
            100.0 * (static_cast<double>(other) - static_cast<double>(base)) / static_cast<double>(base);
        if (percent > options.thresholdPercent) {
          result.slower.push_back({outA[i].launchIndex, outA[i].kernel, base, other, percent});
        }
      }
      result.examined += outA.size();
      if (progress) progress(result.examined, launches.size());
    }
    return result;
  }

  // ---- against the recording ------------------------------------------------
  if (!twoSided) {
    const auto check = [&](const std::vector<LaunchOutcome>& outcomes) {
      for (const auto& o : outcomes) {
        ++result.examined;
        if (diverged(o.verdict)) {
          result.first = divergence(
              o, o.verdict == Verdict::differs
                     ? "its outputs differ from the recorded ones"
                     : std::string("it ") + (o.verdict == Verdict::hang ? "hangs" : "faults") + " here: " + o.detail);
          return true;
        }
      }
      return false;
    };
    if (options.sequence) {
      check(replayAll(model, options.base, Selection{launches, true}));
      if (progress) progress(result.examined, launches.size());
      return result;
    }
    for (size_t at = 0; at < launches.size(); at += options.batch) {
      const Selection batch{std::vector<uint64_t>(launches.begin() + static_cast<std::ptrdiff_t>(at),
                                                  launches.begin() + static_cast<std::ptrdiff_t>(std::min(
                                                                         launches.size(), at + options.batch))),
                            false};
      const bool stop = check(replayAll(model, options.base, batch));
      if (progress) progress(result.examined, launches.size());
      if (stop) break;
    }
    return result;
  }

  // ---- two sides --------------------------------------------------------------
  ScratchDir scratch;
  const std::string dirA = scratch.sub("a"), dirB = scratch.sub("b");
  ReplayOptions a = options.base;
  a.saveOutputsDir = dirA;
  ReplayOptions b = sideB(options);
  b.saveOutputsDir = dirB;
  const auto why = [&](const LaunchOutcome& oa, const LaunchOutcome& ob) -> std::string {
    if (failed(ob.verdict) && !failed(oa.verdict))
      return "it " + std::string(verdictName(ob.verdict)) + " with " + describeSide(options, true) + ": " + ob.detail;
    if (failed(oa.verdict) && !failed(ob.verdict))
      return "it " + std::string(verdictName(oa.verdict)) + " with " + describeSide(options, false) + " but not with " +
             describeSide(options, true) + ": " + oa.detail;
    if (failed(oa.verdict)) return "it fails on both sides: " + oa.detail;
    return "its outputs with " + describeSide(options, true) + " differ from those with " +
           describeSide(options, false);
  };
  // One launch, both sides done: the divergence, if any.
  const auto judge = [&](const LaunchOutcome& oa, LaunchOutcome ob) -> std::optional<Divergence> {
    // A launch that cannot be replayed on a side (no PTX to force, ...) has
    // nothing to compare: passed over, not a divergence.
    if (oa.verdict == Verdict::error || ob.verdict == Verdict::error) {
      ++result.notComparable;
      return std::nullopt;
    }
    if (failed(oa.verdict) || failed(ob.verdict)) return divergence(ob, why(oa, ob));
    if (compareSides(model, ob, dirA, dirB, options.base)) {
      ob.verdict = Verdict::differs;
      return divergence(ob, why(oa, ob));
    }
    return std::nullopt;
  };

  if (!options.sequence) {
    for (size_t at = 0; at < launches.size(); at += options.batch) {
      const Selection batch{std::vector<uint64_t>(launches.begin() + static_cast<std::ptrdiff_t>(at),
                                                  launches.begin() + static_cast<std::ptrdiff_t>(std::min(
                                                                         launches.size(), at + options.batch))),
                            false};
      const auto outA = replayAll(model, a, batch);
      const auto outB = replayAll(model, b, batch);
      bool stop = false;
      for (size_t i = 0; i < outA.size() && i < outB.size() && !stop; ++i) {
        ++result.examined;
        result.first = judge(outA[i], outB[i]);
        stop = result.first.has_value();
      }
      scratch.clear(dirA);
      scratch.clear(dirB);
      if (progress) progress(result.examined, launches.size());
      if (stop) break;
    }
    return result;
  }

  // A sequence between two sides: bisection over prefixes. probe(m) replays
  // launches[0..m] on both sides and compares what each side produced: every
  // launch's outputs and the memory state the prefix ends with. "Some launch
  // up to m differs" only becomes true as m grows, so the first m for which
  // it holds is where the sides part.
  a.saveSequenceEnd = b.saveSequenceEnd = true;
  std::map<size_t, bool> probed;
  const auto prefixOf = [&](size_t m) {
    return Selection{std::vector<uint64_t>(launches.begin(), launches.begin() + static_cast<std::ptrdiff_t>(m + 1)),
                     true};
  };
  const auto probe = [&](size_t m) {
    if (const auto it = probed.find(m); it != probed.end()) return it->second;
    scratch.clear(dirA);
    scratch.clear(dirB);
    const auto outA = replayAll(model, a, prefixOf(m));
    const auto outB = replayAll(model, b, prefixOf(m));
    ++result.probes;
    for (const auto* side : {&outA, &outB}) {
      for (const auto& o : *side) {
        if (o.verdict == Verdict::error) {
          throw ReplayError("launch " + std::to_string(o.launchIndex) + " cannot be replayed with " +
                            describeSide(options, side == &outB) + ": " + o.detail);
        }
      }
    }
    bool differs = outA.size() != outB.size();
    for (size_t i = 0; i < outA.size() && i < outB.size() && !differs; ++i) {
      differs = failed(outA[i].verdict) != failed(outB[i].verdict);
    }
    // Every launch's outputs (a later launch may overwrite a difference) and
    // the state the prefix ends with.
    std::error_code ignored;
    for (const auto& entry : fs::directory_iterator(dirA, ignored)) {
      if (differs) break;
      const std::string name = entry.path().filename().string();
      differs = readFile(dirA + "/" + name) != readFile(dirB + "/" + name);
    }
    if (progress) progress(result.probes, launches.size());
    return probed[m] = differs;
  };
  if (launches.empty() || !probe(launches.size() - 1)) {
    result.examined = launches.size();
    return result;
  }
  size_t lo = 0, hi = launches.size() - 1;  // the state after launches[0..hi] differs between the sides
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    if (probe(mid))
      hi = mid;
    else
      lo = mid + 1;
  }
  // The answer: the sides' outputs of launch hi, compared range by range.
  scratch.clear(dirA);
  scratch.clear(dirB);
  a.saveSequenceEnd = b.saveSequenceEnd = false;
  const auto outA = replayAll(model, a, prefixOf(hi));
  const auto outB = replayAll(model, b, prefixOf(hi));
  result.examined = hi + 1;
  if (!outA.empty() && !outB.empty()) result.first = judge(outA.back(), outB.back());
  if (!result.first) {
    LaunchOutcome o = outB.empty() ? LaunchOutcome{} : outB.back();
    o.verdict = Verdict::differs;
    result.first = divergence(o, "the memory state after it differs between " + describeSide(options, false) + " and " +
                                     describeSide(options, true));
  }
  return result;
}

}  // namespace kcap::replay
