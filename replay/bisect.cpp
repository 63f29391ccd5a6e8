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

bool failed(Verdict v) { return v == Verdict::kFault || v == Verdict::kHang || v == Verdict::kError; }
bool diverged(Verdict v) { return v == Verdict::kDiffers || v == Verdict::kFault || v == Verdict::kHang; }

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
    differs = compareRange(report, expected.data(), actual.data(), expected.size(), param, options) || differs;
    b.buffers.push_back(std::move(report));
  }
  return differs;
}

uint64_t median(std::vector<uint64_t> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// The launches in batches of `size`, one replay process each, in order,
// until `step` says to stop.
void inBatches(const std::vector<uint64_t>& launches, size_t size, const std::function<bool(const Selection&)>& step) {
  for (size_t at = 0; at < launches.size(); at += size) {
    const auto first = launches.begin() + static_cast<std::ptrdiff_t>(at);
    const auto last = launches.begin() + static_cast<std::ptrdiff_t>(std::min(launches.size(), at + size));
    if (step(Selection{std::vector<uint64_t>(first, last), false})) return;
  }
}

// The halving step: the first m in [lo, hi] for which `holds(m)`, where
// holds(hi) is known and, once true, stays true as m grows.
size_t firstHolding(size_t lo, size_t hi, const std::function<bool(size_t)>& holds) {
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    if (holds(mid)) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return hi;
}

// What every mode of the search shares.
struct Search {
  const TraceModel& model;
  const std::vector<uint64_t>& launches;
  const BisectOptions& options;
  const std::function<void(uint64_t, uint64_t)>& progress;

  void reportProgress(uint64_t done) const {
    if (progress) progress(done, launches.size());
  }
  // The kcap replay command that shows launch `index` diverging alone.
  std::string reproduce(uint64_t index) const {
    const std::string& trace = options.base.tracePath;
    if (options.sequence && !launches.empty()) {
      return "kcap replay " + trace + " --range " + std::to_string(launches.front()) + ".." + std::to_string(index) +
             sideBReplayFlags(options);
    }
    return "kcap replay " + trace + " --launch " + std::to_string(index) + sideBReplayFlags(options);
  }
  Divergence divergence(LaunchOutcome outcome, std::string why) const {
    const uint64_t index = outcome.launchIndex;
    return Divergence{std::move(outcome), std::move(why), reproduce(index)};
  }
};

// --perf: both sides timed (against the recording: the recorded durations),
// launches slower past the threshold listed.
BisectResult timeSides(const Search& s) {
  BisectResult result;
  const bool twoSided = s.options.against != Against::kRecorded;
  ReplayOptions a = s.options.base;
  a.repeat = s.options.perfRepeat;
  ReplayOptions b = sideB(s.options);
  b.repeat = s.options.perfRepeat;
  inBatches(s.launches, s.options.batch, [&](const Selection& batch) {
    const auto outA = replayAll(s.model, a, batch);
    const auto outB = twoSided ? replayAll(s.model, b, batch) : outA;
    for (size_t i = 0; i < outA.size() && i < outB.size(); ++i) {
      const uint64_t base = twoSided ? median(outA[i].timesNs) : outA[i].recordedDurationNs.value_or(0);
      const uint64_t other = median(outB[i].timesNs);
      if (base == 0 || other == 0) continue;
      ++result.timed;
      const double percent =
          100.0 * (static_cast<double>(other) - static_cast<double>(base)) / static_cast<double>(base);
      if (percent > s.options.thresholdPercent) {
        result.slower.push_back({outA[i].launchIndex, outA[i].kernel, base, other, percent});
      }
    }
    result.examined += outA.size();
    s.reportProgress(result.examined);
    return false;
  });
  return result;
}

// Side A against the recorded post-state: one pass over the sequence, or
// batch by batch, up to the first launch that differs, faults or hangs.
BisectResult againstRecording(const Search& s) {
  BisectResult result;
  const auto firstDiverging = [&](const std::vector<LaunchOutcome>& outcomes) {
    for (const auto& o : outcomes) {
      ++result.examined;
      if (diverged(o.verdict)) {
        result.first = s.divergence(
            o, o.verdict == Verdict::kDiffers
                   ? "its outputs differ from the recorded ones"
                   : std::string("it ") + (o.verdict == Verdict::kHang ? "hangs" : "faults") + " here: " + o.detail);
        return true;
      }
    }
    return false;
  };
  if (s.options.sequence) {
    firstDiverging(replayAll(s.model, s.options.base, Selection{s.launches, true}));
    s.reportProgress(result.examined);
    return result;
  }
  inBatches(s.launches, s.options.batch, [&](const Selection& batch) {
    const bool stop = firstDiverging(replayAll(s.model, s.options.base, batch));
    s.reportProgress(result.examined);
    return stop;
  });
  return result;
}

// Side A and side B, each saving the outputs of its replays to its own
// scratch directory to be compared there.
struct TwoSides {
  explicit TwoSides(const BisectOptions& options)
      : dirA(scratch.sub("a")), dirB(scratch.sub("b")), a(options.base), b(sideB(options)) {
    a.saveOutputsDir = dirA;
    b.saveOutputsDir = dirB;
  }
  void clear() const {
    scratch.clear(dirA);
    scratch.clear(dirB);
  }
  ScratchDir scratch;
  const std::string dirA, dirB;
  ReplayOptions a, b;
};

std::string whyTheyDiffer(const BisectOptions& options, const LaunchOutcome& oa, const LaunchOutcome& ob) {
  if (failed(ob.verdict) && !failed(oa.verdict))
    return "it " + std::string(verdictName(ob.verdict)) + " with " + describeSide(options, true) + ": " + ob.detail;
  if (failed(oa.verdict) && !failed(ob.verdict))
    return "it " + std::string(verdictName(oa.verdict)) + " with " + describeSide(options, false) + " but not with " +
           describeSide(options, true) + ": " + oa.detail;
  if (failed(oa.verdict)) return "it fails on both sides: " + oa.detail;
  return "its outputs with " + describeSide(options, true) + " differ from those with " + describeSide(options, false);
}

// One launch, both sides done: the divergence, if any. A launch that cannot
// be replayed on a side (no PTX to force, ...) has nothing to compare: it is
// passed over (counted as not comparable), not a divergence.
std::optional<Divergence> judge(const Search& s, const TwoSides& sides, const LaunchOutcome& oa, LaunchOutcome ob,
                                BisectResult& result) {
  if (oa.verdict == Verdict::kError || ob.verdict == Verdict::kError) {
    ++result.notComparable;
    return std::nullopt;
  }
  if (failed(oa.verdict) || failed(ob.verdict)) return s.divergence(ob, whyTheyDiffer(s.options, oa, ob));
  if (compareSides(s.model, ob, sides.dirA, sides.dirB, s.options.base)) {
    ob.verdict = Verdict::kDiffers;
    return s.divergence(ob, whyTheyDiffer(s.options, oa, ob));
  }
  return std::nullopt;
}

// Independent launches between two sides: batch by batch, launch by launch,
// up to the first divergence.
BisectResult betweenSidesInBatches(const Search& s) {
  BisectResult result;
  TwoSides sides(s.options);
  inBatches(s.launches, s.options.batch, [&](const Selection& batch) {
    const auto outA = replayAll(s.model, sides.a, batch);
    const auto outB = replayAll(s.model, sides.b, batch);
    bool stop = false;
    for (size_t i = 0; i < outA.size() && i < outB.size() && !stop; ++i) {
      ++result.examined;
      result.first = judge(s, sides, outA[i], outB[i], result);
      stop = result.first.has_value();
    }
    sides.clear();
    s.reportProgress(result.examined);
    return stop;
  });
  return result;
}

// A sequence between two sides: bisection over prefixes. probe(m) replays
// launches[0..m] on both sides and compares what each side produced: every
// launch's outputs and the memory state the prefix ends with. "Some launch
// up to m differs" only becomes true as m grows, so the first m for which
// it holds is where the sides part.
BisectResult betweenSidesInSequence(const Search& s) {
  BisectResult result;
  TwoSides sides(s.options);
  sides.a.saveSequenceEnd = sides.b.saveSequenceEnd = true;
  const auto prefixOf = [&](size_t m) {
    return Selection{std::vector<uint64_t>(s.launches.begin(), s.launches.begin() + static_cast<std::ptrdiff_t>(m + 1)),
                     true};
  };
  std::map<size_t, bool> probed;
  const auto probe = [&](size_t m) {
    if (const auto it = probed.find(m); it != probed.end()) return it->second;
    sides.clear();
    const auto outA = replayAll(s.model, sides.a, prefixOf(m));
    const auto outB = replayAll(s.model, sides.b, prefixOf(m));
    ++result.probes;
    for (const auto* side : {&outA, &outB}) {
      for (const auto& o : *side) {
        if (o.verdict == Verdict::kError) {
          throw ReplayError("launch " + std::to_string(o.launchIndex) + " cannot be replayed with " +
                            describeSide(s.options, side == &outB) + ": " + o.detail);
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
    for (const auto& entry : fs::directory_iterator(sides.dirA, ignored)) {
      if (differs) break;
      const std::string name = entry.path().filename().string();
      differs = readFile(sides.dirA + "/" + name) != readFile(sides.dirB + "/" + name);
    }
    s.reportProgress(result.probes);
    return probed[m] = differs;
  };
  if (s.launches.empty() || !probe(s.launches.size() - 1)) {
    result.examined = s.launches.size();
    return result;
  }
  const size_t parted = firstHolding(0, s.launches.size() - 1, probe);
  // The answer: the sides' outputs of that launch, compared range by range.
  sides.clear();
  sides.a.saveSequenceEnd = sides.b.saveSequenceEnd = false;
  const auto outA = replayAll(s.model, sides.a, prefixOf(parted));
  const auto outB = replayAll(s.model, sides.b, prefixOf(parted));
  result.examined = parted + 1;
  if (!outA.empty() && !outB.empty()) result.first = judge(s, sides, outA.back(), outB.back(), result);
  if (!result.first) {
    LaunchOutcome o = outB.empty() ? LaunchOutcome{} : outB.back();
    o.verdict = Verdict::kDiffers;
    result.first = s.divergence(o, "the memory state after it differs between " + describeSide(s.options, false) +
                                       " and " + describeSide(s.options, true));
  }
  return result;
}

}  // namespace

std::string sideBReplayFlags(const BisectOptions& options) {
  std::string flags;
  if (options.base.device != 0) flags += " --device " + std::to_string(options.base.device);
  if (!options.base.fixedAddresses) flags += " --no-fixed-va";
  switch (options.against) {
    case Against::kRecorded:
      break;
    case Against::kForcePtx:
      flags += " --force-ptx";
      break;
    case Against::kOverride:
      for (const auto& o : options.overrides) flags += " --override '" + o.kernelPattern + "=" + o.imagePath + "'";
      break;
    case Against::kOtherDevice:
      flags =
          " --device " + std::to_string(options.otherDevice) + (options.base.fixedAddresses ? "" : " --no-fixed-va");
      break;
  }
  if (options.base.dtype) flags += " --dtype " + dtypeName(*options.base.dtype);
  return flags;
}

ReplayOptions sideB(const BisectOptions& options) {
  ReplayOptions b = options.base;
  switch (options.against) {
    case Against::kRecorded:
      break;
    case Against::kForcePtx:
      b.forcePtx = true;
      break;
    case Against::kOverride:
      b.overrides = options.overrides;
      break;
    case Against::kOtherDevice:
      b.device = options.otherDevice;
      break;
  }
  return b;
}

std::string describeSide(const BisectOptions& options, bool b) {
  if (!b) {
    return options.against == Against::kOtherDevice ? "GPU " + std::to_string(options.base.device)
                                                    : "the recorded code on GPU " + std::to_string(options.base.device);
  }
  switch (options.against) {
    case Against::kRecorded:
      return "the recording";
    case Against::kForcePtx:
      return "the image's PTX, JIT-compiled (--force-ptx)";
    case Against::kOverride: {
      std::string text = "the override build";
      for (const auto& o : options.overrides) text += " " + o.imagePath + " for /" + o.kernelPattern + "/";
      return text;
    }
    case Against::kOtherDevice:
      return "GPU " + std::to_string(options.otherDevice);
  }
  return "?";
}

BisectResult bisect(const TraceModel& model, const std::vector<uint64_t>& launches, const BisectOptions& options,
                    const std::function<void(uint64_t, uint64_t)>& progress) {
  const Search search{model, launches, options, progress};
  if (options.perf) return timeSides(search);
  if (options.against == Against::kRecorded) return againstRecording(search);
  return options.sequence ? betweenSidesInSequence(search) : betweenSidesInBatches(search);
}

}  // namespace kcap::replay
