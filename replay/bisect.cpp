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

// With `device`, the device a replay process ran on is kept there (the
// first one known).
std::vector<LaunchOutcome> replayAll(const TraceModel& model, const ReplayOptions& options, const Selection& selection,
                                     std::optional<ReplayDevice>* device = nullptr) {
  std::vector<LaunchOutcome> outcomes;
  ReplayDevice ran;
  replayIsolated(
      model, options, selection, [&](const LaunchOutcome& o) { outcomes.push_back(o); }, &ran);
  if (device != nullptr && !*device && !ran.name.empty()) *device = ran;
  return outcomes;
}

std::vector<uint8_t> readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// One saved range, side B's file against side A's (`name` in both
// directories): fills `report` (address, size and label set) and says
// whether any byte differs. A file missing or cut short differs whole.
bool compareSaved(BufferReport& report, const std::string& dirA, const std::string& dirB, const std::string& name,
                  std::optional<uint32_t> param, const ReplayOptions& options) {
  const std::vector<uint8_t> expected = readFile(dirA + name);
  const std::vector<uint8_t> actual = readFile(dirB + name);
  if (expected.size() != report.size || actual.size() != report.size) {
    report.differingBytes = report.size;
    report.firstOffset = 0;
    return true;
  }
  return compareRange(report, expected.data(), actual.data(), expected.size(), param, options);
}

std::string hexDigits(uint64_t value) {
  char text[24];
  std::snprintf(text, sizeof text, "%llx", static_cast<unsigned long long>(value));
  return text;
}

// Compares side B's saved outputs of one launch (or graph launch) with side
// A's. Fills b.buffers (expected: side A) and returns whether any byte differs.
bool compareSides(const TraceModel& model, LaunchOutcome& b, const std::string& dirA, const std::string& dirB,
                  const ReplayOptions& options) {
  capnp::List<schema::MemoryRange>::Reader ranges;
  std::optional<schema::Launch::Reader> launch;
  std::string prefix = "/" + std::to_string(b.launchIndex) + "-";
  if (b.graph) {
    const GraphLaunchRecord* g = model.graphLaunch(b.launchIndex);
    if (g == nullptr) return false;
    ranges = g->event().getPre();
    if (g->end != nullptr && g->end->get().getGraphLaunchEnd().getPost().size() != 0) {
      ranges = g->end->get().getGraphLaunchEnd().getPost();
    }
    prefix = "/g" + std::to_string(b.launchIndex) + "-";
  } else {
    const LaunchRecord* l = model.launch(b.launchIndex);
    launch = l->event();
    ranges = l->event().getPre();
    if (l->end != nullptr && l->end->get().getLaunchEnd().getPost().size() != 0) {
      ranges = l->end->get().getLaunchEnd().getPost();
    }
  }
  b.buffers.clear();
  bool differs = false;
  for (const auto range : ranges) {
    BufferReport report;
    report.address = range.getAddress();
    report.size = range.getContent().getSize();
    const auto param =
        launch ? parameterPointingInto(*launch, range.getAddress(), report.size) : std::optional<uint32_t>();
    report.label = range.getKind() == schema::MemoryKind::MODULE_GLOBAL ? "global"
                   : param                                              ? "param " + std::to_string(*param)
                                                                        : "buffer";
    differs =
        compareSaved(report, dirA, dirB, prefix + hexDigits(range.getAddress()) + ".bin", param, options) || differs;
    b.buffers.push_back(std::move(report));
  }
  return differs;
}

uint64_t median(std::vector<uint64_t> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// A launch or a graph launch: what the independent search compares, in
// trace order.
struct Unit {
  bool graph = false;
  uint64_t index = 0;  // launchIndex or graphLaunchIndex
  uint64_t key() const { return graph ? index | kGraphLaunchKey : index; }
};

// The units in batches of `size`, one replay process each, in order, until
// `step` says to stop.
void inBatches(const std::vector<Unit>& units, size_t size,
               const std::function<bool(const Selection&, const std::vector<Unit>&)>& step) {
  for (size_t at = 0; at < units.size(); at += size) {
    const std::vector<Unit> batch(units.begin() + static_cast<std::ptrdiff_t>(at),
                                  units.begin() + static_cast<std::ptrdiff_t>(std::min(units.size(), at + size)));
    Selection selection;
    for (const Unit& u : batch) (u.graph ? selection.graphLaunchIndices : selection.launchIndices).push_back(u.index);
    if (step(selection, batch)) return;
  }
}

// Outcomes by key: a replay process reports launches before graph launches.
std::map<uint64_t, LaunchOutcome> byKey(std::vector<LaunchOutcome> outcomes) {
  std::map<uint64_t, LaunchOutcome> keyed;
  for (auto& o : outcomes) keyed.emplace(outcomeKey(o), std::move(o));
  return keyed;
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
  const std::vector<Unit>& units;  // launches and graph launches, trace order (launches only: sequence, perf)
  const BisectOptions& options;
  const std::function<void(uint64_t, uint64_t)>& progress;
  mutable std::optional<ReplayDevice> deviceA, deviceB;  // where each side's replays ran

  void reportProgress(uint64_t done) const {
    if (progress) progress(done, options.sequence ? launches.size() : units.size());
  }
  // The kcap replay command that shows the launch (or graph launch) diverging alone.
  std::string reproduce(const LaunchOutcome& o) const {
    const std::string& trace = options.base.tracePath;
    const std::string index = std::to_string(o.launchIndex);
    if (o.graph) return "kcap replay " + trace + " --graph-launch " + index + sideBReplayFlags(options);
    if (options.sequence && !launches.empty()) {
      return "kcap replay " + trace + " --range " + std::to_string(launches.front()) + ".." + index +
             sideBReplayFlags(options);
    }
    return "kcap replay " + trace + " --launch " + index + sideBReplayFlags(options);
  }
  Divergence divergence(LaunchOutcome outcome, std::string why) const {
    Divergence d;
    d.reproduce = reproduce(outcome);
    d.outcome = std::move(outcome);
    d.why = std::move(why);
    return d;
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
  inBatches(s.units, s.options.batch, [&](const Selection& batch, const std::vector<Unit>& /*units*/) {
    const auto outA = replayAll(s.model, a, batch, &s.deviceA);
    const auto outB = twoSided ? replayAll(s.model, b, batch, &s.deviceB) : outA;
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
  const auto divergesHere = [&](const LaunchOutcome& o) {
    ++result.examined;
    if (o.graph) ++result.graphsExamined;
    if (!diverged(o.verdict)) return false;
    result.first = s.divergence(
        o, o.verdict == Verdict::kDiffers
               ? "its outputs differ from the recorded ones"
               : std::string("it ") + (o.verdict == Verdict::kHang ? "hangs" : "faults") + " here: " + o.detail);
    if (o.graph) {
      result.first->descent =
          "the recording holds the graph launch's memory before and after it, not after each node: to name the node, "
          "compare two sides (--against force-ptx, --against override:KERNEL=IMAGE or --devices A,B)";
    }
    return true;
  };
  if (s.options.sequence) {
    for (const auto& o : replayAll(s.model, s.options.base, Selection{s.launches, true}, &s.deviceA)) {
      if (divergesHere(o)) break;
    }
    s.reportProgress(result.examined);
    return result;
  }
  inBatches(s.units, s.options.batch, [&](const Selection& batch, const std::vector<Unit>& units) {
    const auto outcomes = byKey(replayAll(s.model, s.options.base, batch, &s.deviceA));
    bool stop = false;
    for (size_t i = 0; i < units.size() && !stop; ++i) {
      const auto it = outcomes.find(units[i].key());
      stop = it != outcomes.end() && divergesHere(it->second);
    }
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

// What a .node file of a side's node-by-node run says (Replayer::saveNodeOutputs).
struct SavedNode {
  uint64_t index = 0;
  std::string path, kernel;
};
std::optional<SavedNode> readNode(const std::string& file) {
  const std::vector<uint8_t> bytes = readFile(file);
  const std::string text(bytes.begin(), bytes.end());
  const size_t first = text.find('\n');
  const size_t second = first == std::string::npos ? first : text.find('\n', first + 1);
  if (second == std::string::npos) return std::nullopt;
  SavedNode node;
  node.index = std::strtoull(text.c_str(), nullptr, 10);
  node.path = text.substr(first + 1, second - first - 1);
  node.kernel = text.substr(second + 1);
  if (!node.kernel.empty() && node.kernel.back() == '\n') node.kernel.pop_back();
  return node;
}

// A graph launch that diverges between the sides: its nodes again, one by
// one on each side, the memory each kernel node reaches saved after it; the
// first kernel node whose saved ranges differ is named.
void descend(const Search& s, const TwoSides& sides, Divergence& d) {
  const uint64_t g = d.outcome.launchIndex;
  sides.clear();
  ReplayOptions a = sides.a, b = sides.b;
  a.graphNodes = b.graphNodes = true;
  const Selection one{{}, false, {g}};
  const auto outA = replayAll(s.model, a, one), outB = replayAll(s.model, b, one);
  if (outA.empty() || outB.empty()) {
    d.descent = "its nodes could not be run one by one: a replay process reported nothing";
    return;
  }
  const LaunchOutcome &oa = outA.front(), &ob = outB.front();
  if (oa.verdict == Verdict::kError || ob.verdict == Verdict::kError) {
    d.descent = "its nodes cannot be run one by one, so no node is named: " +
                (oa.verdict == Verdict::kError ? oa.detail : ob.detail);
    return;
  }
  d.reproduce += " --graph-nodes";
  std::optional<GraphRun> run;  // to name the ranges by the parameters pointing into them
  try {
    run = s.model.graphRun(*s.model.graphLaunch(g));
  } catch (const std::exception&) {
    run.reset();
  }
  for (uint64_t k = 0;; ++k) {
    const std::string stem = "/g" + std::to_string(g) + "-n" + std::to_string(k);
    const auto nodeA = readNode(sides.dirA + stem + ".node"), nodeB = readNode(sides.dirB + stem + ".node");
    if (!nodeA && !nodeB) break;
    const SavedNode& saved = nodeA ? *nodeA : *nodeB;
    NodeDivergence n{saved.path, saved.index, k, saved.kernel, Verdict::kDiffers, {}};
    if (!nodeA || !nodeB) {
      // One side stopped before this node's outputs were saved: it failed here.
      n.verdict = failed(ob.verdict) ? ob.verdict : oa.verdict;
      d.why = whyTheyDiffer(s.options, oa, ob);
      d.node = std::move(n);
      return;
    }
    const GraphNodeRun* node = run ? findGraphNode(run->root, saved.path) : nullptr;
    std::vector<std::string> names;
    std::error_code ignored;
    const std::string prefix = stem.substr(1) + "-";
    for (const auto& entry : fs::directory_iterator(sides.dirA, ignored)) {
      const std::string name = entry.path().filename().string();
      if (name.rfind(prefix, 0) == 0) names.push_back(name);
    }
    std::sort(names.begin(), names.end());
    bool differs = false;
    for (const std::string& name : names) {
      BufferReport report;
      report.address = std::strtoull(name.c_str() + prefix.size(), nullptr, 16);
      const uintmax_t size = fs::file_size(sides.dirA + "/" + name, ignored);
      report.size = ignored ? 0 : static_cast<uint64_t>(size);
      const auto param = node != nullptr && node->params.isKernel()
                             ? parameterPointingInto(node->params.getKernel(), report.address, report.size)
                             : std::optional<uint32_t>();
      report.label = param ? "param " + std::to_string(*param) : "global";
      differs = compareSaved(report, sides.dirA, sides.dirB, "/" + name, param, s.options.base) || differs;
      n.buffers.push_back(std::move(report));
    }
    if (differs) {
      d.node = std::move(n);
      return;
    }
    d.nodesAgreeing.push_back(saved.path + " (" + saved.kernel + ")");
  }
  if (failed(oa.verdict) || failed(ob.verdict)) {
    d.descent = "every kernel node's outputs agree, but a node that is no kernel fails: " +
                (failed(ob.verdict) ? ob.detail : oa.detail);
    return;
  }
  d.descent = "no kernel node's outputs differ when the nodes run one by one (" +
              std::to_string(d.nodesAgreeing.size()) +
              " compared, as far as each one's pointer parameters reach): a node writes memory its parameters do "
              "not point to, or nodes the graph lets run at the same time race";
}

// Independent launches and graph launches between two sides: batch by batch,
// in trace order, up to the first divergence; a divergent graph launch is
// descended into.
BisectResult betweenSidesInBatches(const Search& s) {
  BisectResult result;
  TwoSides sides(s.options);
  inBatches(s.units, s.options.batch, [&](const Selection& batch, const std::vector<Unit>& units) {
    const auto outA = byKey(replayAll(s.model, sides.a, batch, &s.deviceA));
    const auto outB = byKey(replayAll(s.model, sides.b, batch, &s.deviceB));
    bool stop = false;
    for (size_t i = 0; i < units.size() && !stop; ++i) {
      const auto a = outA.find(units[i].key()), b = outB.find(units[i].key());
      if (a == outA.end() || b == outB.end()) continue;
      ++result.examined;
      if (units[i].graph) ++result.graphsExamined;
      result.first = judge(s, sides, a->second, b->second, result);
      stop = result.first.has_value();
    }
    if (stop && result.first->outcome.graph) descend(s, sides, *result.first);
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
    const auto outA = replayAll(s.model, sides.a, prefixOf(m), &s.deviceA);
    const auto outB = replayAll(s.model, sides.b, prefixOf(m), &s.deviceB);
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
  const auto outA = replayAll(s.model, sides.a, prefixOf(parted), &s.deviceA);
  const auto outB = replayAll(s.model, sides.b, prefixOf(parted), &s.deviceB);
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
      for (const auto& o : options.overrides) flags += " --override '" + o.kernelPattern + "=" + o.imagePath + "'";
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
      b.overrides = options.overrides;
      break;
  }
  return b;
}

namespace {

std::string overrideText(const BisectOptions& options) {
  std::string text = "the override build";
  for (const auto& o : options.overrides) text += " " + o.imagePath + " for /" + o.kernelPattern + "/";
  return text;
}

}  // namespace

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
    case Against::kOverride:
      return overrideText(options);
    case Against::kOtherDevice:
      return "GPU " + std::to_string(options.otherDevice) +
             (options.overrides.empty() ? std::string() : " with " + overrideText(options));
  }
  return "?";
}

BisectResult bisect(const TraceModel& model, const std::vector<uint64_t>& launches,
                    const std::vector<uint64_t>& graphLaunches, const BisectOptions& options,
                    const std::function<void(uint64_t, uint64_t)>& progress) {
  // Launches and graph launches merged by where they are in the trace.
  std::vector<std::pair<uint64_t, Unit>> ordered;
  for (const uint64_t index : launches) {
    if (const LaunchRecord* l = model.launch(index)) ordered.push_back({l->seq(), Unit{false, index}});
  }
  if (!options.sequence && !options.perf) {
    for (const uint64_t index : graphLaunches) {
      if (const GraphLaunchRecord* g = model.graphLaunch(index)) ordered.push_back({g->seq(), Unit{true, index}});
    }
  }
  std::stable_sort(ordered.begin(), ordered.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  std::vector<Unit> units;
  for (const auto& entry : ordered) units.push_back(entry.second);
  const Search search{model, launches, units, options, progress, {}, {}};
  BisectResult result = options.perf                            ? timeSides(search)
                        : options.against == Against::kRecorded ? againstRecording(search)
                        : options.sequence                      ? betweenSidesInSequence(search)
                                                                : betweenSidesInBatches(search);
  result.deviceA = search.deviceA;
  result.deviceB = search.deviceB;
  return result;
}

}  // namespace kcap::replay
