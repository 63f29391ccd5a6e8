// kcap bisect FILE [--against recorded|force-ptx|override:KERNEL=IMAGE] [--devices A,B]
//                  [--perf [--threshold PCT]] [--sequence] ...:
// the first launch whose outputs diverge, and why; in a divergent graph
// launch, its first divergent kernel node (replay/bisect.h does the search;
// this file selects, prints and exits). A checkpoint trace is
// re-executed from its checkpoints instead (replay/bisect_checkpoint.h).
//
// Exit codes: 0 no launch diverges (with --perf: none is slower than the
// threshold), 3 a launch diverges (or is slower), 4 the first divergence is
// a fault or hang, 1 a trace problem or nothing can be replayed, 2 usage.
#include <unistd.h>

#include <iostream>
#include <optional>
#include <tuple>

#include <CLI/CLI.hpp>

#include "bisect.h"
#include "bisect_checkpoint.h"
#include "common.h"
#include "driver.h"
#include "kernel_pattern.h"
#include "reexecute.h"
#include "replay_report.h"
#include "subcommands.h"
#include "trace_reader.h"

namespace kcap::tools {
namespace {

using replay::Against;

constexpr int kExitDiverges = 3;
constexpr int kExitFault = 4;

struct Options {
  std::string path;
  std::string against = "recorded";
  std::string devices;
  bool perf = false;
  double threshold = 10;
  unsigned repeat = 10;
  bool sequence = false;
  std::string kernel;
  std::string range;
  int device = 0;
  bool noFixedVa = false;
  std::string dtype;
  std::string tolerance;
  double timeout = 10;
  bool json = false;
};

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

replay::BisectOptions bisectOptions(const Options& o) {
  replay::BisectOptions b;
  b.base.tracePath = o.path;
  b.base.device = o.device;
  b.base.fixedAddresses = !o.noFixedVa;
  b.base.timeoutSeconds = o.timeout;
  b.sequence = o.sequence;
  b.perf = o.perf;
  b.thresholdPercent = o.threshold;
  b.perfRepeat = o.repeat;
  if (!(o.timeout > 0)) throw UsageError("--timeout must be positive");
  if (o.perf && o.repeat == 0) throw UsageError("--repeat must be at least 1 with --perf");
  if (!o.dtype.empty()) {
    b.base.dtype = replay::parseDType(o.dtype);
    if (!b.base.dtype) throw UsageError("--dtype " + o.dtype + ": unknown type");
  }
  if (!o.tolerance.empty()) {
    b.base.tolerance = replay::parseTolerance(o.tolerance);
    if (!b.base.tolerance) throw UsageError("--tolerance " + o.tolerance + ": expected e.g. 1e-3, rel=1e-2, ulp=4");
    if (!b.base.dtype) throw UsageError("--tolerance needs --dtype");
  }
  if (o.against == "recorded") {
    b.against = Against::kRecorded;
  } else if (o.against == "force-ptx") {
    b.against = Against::kForcePtx;
  } else if (o.against.rfind("override:", 0) == 0) {
    const std::string spec = o.against.substr(9);
    const size_t eq = spec.rfind('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size()) {
      throw UsageError("--against " + o.against + ": expected override:KERNEL=IMAGE");
    }
    try {
      replay::KernelPattern check(spec.substr(0, eq));
    } catch (const std::invalid_argument& e) {
      throw UsageError("--against " + o.against + ": KERNEL is not a valid regular expression (" + e.what() + ")");
    }
    b.against = Against::kOverride;
    b.overrides.push_back({spec.substr(0, eq), spec.substr(eq + 1)});
  } else {
    throw UsageError("--against " + o.against + ": expected recorded, force-ptx or override:KERNEL=IMAGE");
  }
  if (!o.devices.empty()) {
    // Side B may also run another build (override): a case that must
    // diverge, for a test of two GPUs that could otherwise pass vacuously.
    if (b.against == Against::kForcePtx) {
      throw UsageError("--devices takes no --against but override:KERNEL=IMAGE (side B's build)");
    }
    int first = -1, second = -1;
    char extra = 0;
    if (std::sscanf(o.devices.c_str(), "%d,%d%c", &first, &second, &extra) != 2 || first < 0 || second < 0 ||
        first == second) {
      throw UsageError("--devices " + o.devices + ": expected two different GPU ordinals, e.g. 0,1");
    }
    b.against = Against::kOtherDevice;
    b.base.device = first;
    b.otherDevice = second;
  }
  return b;
}

// The launches to compare, and the graph launches: every one, unless
// --kernel or --range select launches, or --sequence or --perf (which
// compare launches only) are given.
struct Selected {
  std::vector<uint64_t> launches, graphLaunches;
};

Selected select(const Options& o, const replay::TraceModel& model) {
  std::optional<replay::KernelPattern> pattern;
  if (!o.kernel.empty()) {
    try {
      pattern.emplace(o.kernel);
    } catch (const std::invalid_argument& e) {
      throw UsageError("--kernel " + o.kernel + ": not a valid regular expression (" + e.what() + ")");
    }
  }
  uint64_t first = 0, last = UINT64_MAX;
  if (!o.range.empty()) {
    const auto range = parseLaunchRange(o.range);
    if (!range) throw UsageError("--range " + o.range + ": expected A..B with A <= B");
    std::tie(first, last) = *range;
  }
  Selected selected;
  for (const auto& l : model.launches()) {
    if (l.event().getCapturing() || l.launchIndex < first || l.launchIndex > last) continue;
    const auto name = l.event().getKernelName();
    if (pattern && !pattern->search(std::string_view(name.cStr(), name.size()))) continue;
    selected.launches.push_back(l.launchIndex);
  }
  if (o.kernel.empty() && o.range.empty() && !o.sequence && !o.perf) {
    for (const auto& g : model.graphLaunchRecords()) selected.graphLaunches.push_back(g.graphLaunchIndex);
  }
  if (selected.launches.empty() && selected.graphLaunches.empty()) {
    throw UsageError("no launch of " + o.path + " matches the selection");
  }
  return selected;
}

// A divergent graph launch's node: its shape and parameters as recorded.
const replay::GraphNodeRun* divergentNode(const replay::TraceModel& model, const replay::Divergence& d,
                                          std::optional<replay::GraphRun>& run) {
  if (!d.node || !d.outcome.graph) return nullptr;
  const auto* g = model.graphLaunch(d.outcome.launchIndex);
  if (g == nullptr) return nullptr;
  try {
    run = model.graphRun(*g);
  } catch (const replay::ReplayError&) {
    return nullptr;
  }
  const auto* node = replay::findGraphNode(run->root, d.node->path);
  return node != nullptr && node->params.isKernel() ? node : nullptr;
}

// The launch's parameters as the recording has them: one line each.
std::vector<std::string> parameterLines(const replay::LaunchRecord& launch) {
  const auto e = launch.event();
  const auto params = e.getParams();
  std::vector<std::string> lines;
  const auto layout = e.getParamLayout();
  for (uint32_t i = 0; i < layout.size(); ++i) {
    const uint32_t offset = layout[i].getOffset(), size = layout[i].getSize();
    std::string line = strf("param %u: offset %u, %u bytes", i, offset, size);
    if (uint64_t{offset} + size <= params.size()) {  // in 64 bits: the trace's sum may wrap in 32
      if (size <= 8) {
        uint64_t value = 0;
        std::memcpy(&value, params.begin() + offset, size);
        line += " = " + hex(value);
        if (size == 4) {
          float f = 0;
          std::memcpy(&f, &value, 4);
          line += strf(" (int %d, float %g)", static_cast<int32_t>(value), static_cast<double>(f));
        }
      } else {
        line += " = " + hexBytes(params.begin() + offset, std::min<uint32_t>(size, 32)) + (size > 32 ? "..." : "");
      }
    }
    for (const auto word : e.getPointers()) {
      if (word.getOffset() >= offset && word.getOffset() - offset < size) {
        line += strf("; pointer at +%u into allocation %s", word.getOffset() - offset,
                     hex(word.getAllocationBase()).c_str());
      }
    }
    lines.push_back(line);
  }
  return lines;
}

// A divergent graph launch in --json: graphLaunchIndex, and the node the
// descent named (null when none: `descent` says why).
Json graphDivergenceJson(const replay::TraceModel& model, const replay::Divergence& d) {
  const auto& o = d.outcome;
  Json first = {{"launchIndex", nullptr},
                {"graphLaunchIndex", o.launchIndex},
                {"kernel", d.node ? Json(d.node->kernel) : Json(nullptr)},
                {"graph", o.kernel},
                {"verdict", replay::verdictName(o.verdict)},
                {"why", d.why},
                {"detail", o.detail},
                {"code", o.code},
                {"buffers", buffersJson(o.buffers)},
                {"nodesAgreeing", d.nodesAgreeing}};
  if (d.node) {
    std::optional<replay::GraphRun> run;
    Json node = {{"index", d.node->index},
                 {"path", d.node->path},
                 {"ordinal", d.node->ordinal},
                 {"kernel", d.node->kernel},
                 {"verdict", replay::verdictName(d.node->verdict)}};
    if (const auto* n = divergentNode(model, d, run)) {
      const auto k = n->params.getKernel();
      Json parameters = Json::array();
      for (const auto& line : parameterLines(replay::graphNodeLaunch(*n, o.launchIndex))) parameters.push_back(line);
      node["grid"] = {k.getGridX(), k.getGridY(), k.getGridZ()};
      node["block"] = {k.getBlockX(), k.getBlockY(), k.getBlockZ()};
      node["sharedMemBytes"] = k.getSharedMemBytes();
      node["parameters"] = std::move(parameters);
    }
    node["buffers"] = buffersJson(d.node->buffers);
    first["node"] = std::move(node);
  } else {
    first["node"] = nullptr;
  }
  first["descent"] = d.descent;
  first["reproduce"] = d.reproduce;
  return first;
}

// A divergent graph launch in text: the node the descent named, the kernel
// nodes before it that agree, the node's shape, parameters and differing
// ranges; or why no node was named, and the graph launch's differing ranges.
void printGraphDivergence(const replay::TraceModel& model, const replay::Divergence& d, const char* expected,
                          const char* actual) {
  const auto& o = d.outcome;
  std::cout << "First divergent launch: graph launch " << o.launchIndex;
  if (d.node) std::cout << " " << d.node->path << " (kernel " << printable(d.node->kernel) << ")";
  std::cout << "\n  graph launch " << o.launchIndex << ": " << printable(o.kernel) << "\n";
  std::cout << "  " << replay::verdictName(o.verdict) << ": " << printable(d.why) << "\n";
  const auto differing = [&](const std::vector<replay::BufferReport>& buffers, const std::string& heading) {
    bool any = false;
    for (const auto& b : buffers) {
      if (b.differingBytes == 0) continue;
      if (!any) std::cout << heading;
      any = true;
      std::cout << "    " << bufferLine(b, expected, actual) << "\n";
    }
  };
  if (!d.node) {
    if (!d.descent.empty()) std::cout << "  no node named: " << printable(d.descent) << "\n";
    differing(o.buffers, "  ranges of the graph launch that differ:\n");
    std::cout << "  reproduce it alone: " << d.reproduce << "\n";
    return;
  }
  std::cout << "  its kernel nodes, run one by one on each side in the same order:\n";
  for (const auto& agreeing : d.nodesAgreeing) std::cout << "    " << printable(agreeing) << ": outputs agree\n";
  std::cout << "    " << d.node->path << " (" << printable(d.node->kernel)
            << "): " << replay::verdictName(d.node->verdict) << "\n";
  std::optional<replay::GraphRun> run;
  if (const auto* n = divergentNode(model, d, run)) {
    const auto k = n->params.getKernel();
    std::cout << "  " << d.node->path << ": grid " << dim3Text(k.getGridX(), k.getGridY(), k.getGridZ()) << ", block "
              << dim3Text(k.getBlockX(), k.getBlockY(), k.getBlockZ()) << ", " << k.getSharedMemBytes()
              << " bytes of dynamic shared memory\n";
    std::cout << "  parameters:\n";
    for (const auto& line : parameterLines(replay::graphNodeLaunch(*n, o.launchIndex))) {
      std::cout << "    " << line << "\n";
    }
  }
  differing(d.node->buffers, "  buffers of " + d.node->path + " that differ:\n");
  std::cout << "  reproduce it alone: " << d.reproduce << "\n";
}

// A checkpoint trace (--mode checkpoint) holds no per-launch memory: its
// launches are re-executed from its checkpoints (replay/bisect_checkpoint.h).
int runCheckpointBisect(const Options& opt, const replay::TraceModel& model) {
  replay::BisectOptions options;
  try {
    const auto refuse = [](bool given, const std::string& what) {
      if (given) throw UsageError(what);
    };
    refuse(opt.perf,
           "--perf on a checkpoint trace: not built (the trace holds no per-launch memory to time "
           "launches from); record with --mode full to time launches");
    refuse(opt.sequence,
           "--sequence on a checkpoint trace: not needed, its launches are always re-executed in "
           "order from the checkpoints");
    refuse(!opt.kernel.empty() || !opt.range.empty(),
           "--kernel and --range select launches to replay each from its own memory, which a checkpoint trace "
           "does not hold: it is bisected whole");
    refuse(opt.noFixedVa, "--no-fixed-va: re-execution needs the recorded addresses (pointers stay as recorded)");
    refuse(!opt.dtype.empty() || !opt.tolerance.empty(),
           "--dtype and --tolerance apply to per-launch buffers, not to a checkpoint trace's change hashes");
    options = bisectOptions(opt);
  } catch (const UsageError& e) {
    std::cerr << "kcap bisect: " << e.what() << "\n";
    return kExitUsage;
  }
  replay::CheckpointBisectResult result;
  try {
    result = replay::bisectCheckpoints(model, options);
  } catch (const replay::ReplayError& e) {
    std::cerr << "kcap bisect: " << e.what() << "\n";
    return kExitTrace;
  }
  const bool twoSided = options.against != Against::kRecorded;
  int code = kExitOk;
  if (result.first) {
    const auto v = result.first->verdict;
    code = (v == replay::IntervalVerdict::kFault || v == replay::IntervalVerdict::kHang) ? kExitFault : kExitDiverges;
  } else if (result.compared == 0) {
    code = kExitTrace;
  }
  const std::string sideA = replay::describeSide(options, false);
  const std::string sideB = replay::describeSide(options, true);
  const auto intervalText = [](const replay::IntervalReport& r) {
    std::string text = "interval " + std::to_string(r.number) + " (";
    if (r.firstLaunch > r.lastLaunch) {
      text += "no launches";
    } else if (r.firstLaunch == r.lastLaunch) {
      text += "launch " + std::to_string(r.firstLaunch);
    } else {
      text += "launches " + std::to_string(r.firstLaunch) + ".." + std::to_string(r.lastLaunch);
    }
    return text + ", checkpoint " + std::to_string(r.fromCheckpoint.value_or(0)) + " -> " +
           std::to_string(r.toCheckpoint.value_or(0)) + ")";
  };
  const std::string how =
      twoSided ? "each interval re-executed from its checkpoint on each side, end states compared"
               : "the intervals re-executed from the checkpoints, end states compared with the recorded ones";

  if (opt.json) {
    Json document = {{"trace", opt.path},
                     {"mode", "checkpoint"},
                     {"sideA", sideA},
                     {"sideB", sideB},
                     {"intervals", result.intervals},
                     {"intervalsCompared", result.compared},
                     {"notComparable", result.notComparable},
                     {"launchesHashed", result.launchesHashed},
                     {"notes", result.notes}};
    if (result.first) {
      const auto& d = *result.first;
      Json first = {{"interval", d.interval.number},
                    {"fromCheckpoint", d.interval.fromCheckpoint.value_or(0)},
                    {"toCheckpoint", d.interval.toCheckpoint.value_or(0)},
                    {"verdict", replay::intervalVerdictName(d.verdict)},
                    {"why", d.why},
                    {"ranges", d.ranges},
                    {"reproduce", d.reproduce}};
      first["launchIndex"] = d.launch ? Json(*d.launch) : Json(nullptr);
      first["kernel"] = d.launch ? Json(d.kernel) : Json(nullptr);
      document["first"] = std::move(first);
    } else {
      document["first"] = nullptr;
    }
    document["exitCode"] = static_cast<int64_t>(code);
    std::cout << jsonText(document) << "\n";
    return code;
  }
  std::cout << "kcap bisect " << opt.path << ": checkpoint trace, " << model.launches().size() << " launches; " << how
            << "; comparing " << sideB << " with " << sideA << "\n";
  for (const auto& note : result.notes) std::cout << printable(note) << "\n";
  std::cout << "\n";
  if (!result.first) {
    if (result.compared == 0) {
      std::cout << "Nothing compared: no interval ran up to an intact checkpoint on "
                << (twoSided ? "both sides" : "this GPU") << ", so no divergence could be looked for.";
    } else {
      std::cout << "No launch diverges: all " << result.compared << " compared intervals agree"
                << (twoSided ? " between the sides." : " with the recording.");
    }
    if (result.notComparable != 0) {
      std::cout << " " << result.notComparable << " could not be re-executed (see kcap replay).";
    }
    std::cout << "\n";
    return code;
  }
  const auto& d = *result.first;
  if (d.launch) {
    std::cout << "First divergent launch: " << *d.launch << " (" << printable(d.kernel) << "), in "
              << intervalText(d.interval) << "\n";
    if (const auto* l = model.launch(*d.launch)) {
      const auto e = l->event();
      std::cout << "  grid " << dim3Text(e.getGridX(), e.getGridY(), e.getGridZ()) << ", block "
                << dim3Text(e.getBlockX(), e.getBlockY(), e.getBlockZ()) << ", " << e.getSharedMemBytes()
                << " bytes of dynamic shared memory\n";
    }
  } else {
    std::cout << "First divergent interval: " << intervalText(d.interval) << "\n";
  }
  std::cout << "  " << replay::intervalVerdictName(d.verdict) << ": " << printable(d.why) << "\n";
  if (d.launch) {
    if (const auto* l = model.launch(*d.launch)) {
      std::cout << "  parameters:\n";
      for (const auto& line : parameterLines(*l)) std::cout << "    " << line << "\n";
    }
  }
  if (!d.ranges.empty()) std::cout << "  ranges that differ:\n";
  for (const auto& line : d.ranges) std::cout << "    " << printable(line) << "\n";
  if (!d.reproduce.empty()) std::cout << "  reproduce it: " << d.reproduce << "\n";
  std::cout << "\n" << result.compared << " of " << result.intervals << " intervals compared before it was found";
  if (twoSided && result.launchesHashed != 0) {
    std::cout << "; then each launch of " << intervalText(d.interval) << " re-executed on each side, its outputs "
              << "hashed after it (" << result.launchesHashed << " launches, in order)";
  }
  std::cout << ".\n";
  return code;
}

int runBisect(const Options& opt) {
  return guarded(opt.path, [&]() -> int {
    auto reader = format::TraceReader::open(opt.path);
    const replay::TraceModel model = replay::TraceModel::load(*reader);
    for (const auto& problem : reader->problems()) {
      std::cerr << "kcap: " << opt.path << ": at byte " << problem.offset << ": " << problem.message
                << " (bisecting the intact events)\n";
    }
    if (replay::isCheckpointTrace(model)) return runCheckpointBisect(opt, model);
    replay::BisectOptions options;
    Selected selected;
    try {
      options = bisectOptions(opt);
      selected = select(opt, model);
    } catch (const UsageError& e) {
      std::cerr << "kcap bisect: " << e.what() << "\n";
      return kExitUsage;
    }
    const bool progress = !opt.json && isatty(STDERR_FILENO);
    replay::BisectResult result;
    try {
      result =
          replay::bisect(model, selected.launches, selected.graphLaunches, options, [&](uint64_t done, uint64_t total) {
            if (progress) std::cerr << "\r[" << done << "/" << total << "] launches compared\033[K" << std::flush;
          });
    } catch (const replay::ReplayError& e) {
      if (progress) std::cerr << "\r\033[K";
      std::cerr << "kcap bisect: " << e.what() << "\n";
      return kExitTrace;
    }
    if (progress) std::cerr << "\r\033[K" << std::flush;

    int code = kExitOk;
    if (options.perf) {
      code = result.slower.empty() ? kExitOk : kExitDiverges;
    } else if (result.first) {
      const auto v = result.first->outcome.verdict;
      code = (v == replay::Verdict::kFault || v == replay::Verdict::kHang) ? kExitFault : kExitDiverges;
    } else if (result.examined == result.notComparable) {
      code = kExitTrace;  // nothing compared: never "no launch diverges"
    }
    const std::string sideA = replay::describeSide(options, false);
    const std::string sideB = replay::describeSide(options, true);
    const char* expected = options.against == Against::kRecorded ? "recorded" : "side A";
    const char* actual = options.against == Against::kRecorded ? "replayed" : "side B";
    const uint64_t total = selected.launches.size() + selected.graphLaunches.size();
    // "launches", or "launches (graph launches included)"
    const std::string units = selected.graphLaunches.empty() ? "launches" : "launches (graph launches included)";

    if (opt.json) {
      Json document = {{"trace", opt.path},
                       {"sideA", sideA},
                       {"sideB", sideB},
                       {"sequence", options.sequence},
                       {"examined", result.examined},
                       {"notComparable", result.notComparable},
                       {"probes", result.probes},
                       {"total", total},
                       {"graphLaunchesExamined", result.graphsExamined}};
      const auto deviceJson = [](const std::optional<replay::ReplayDevice>& d) {
        return d ? Json{{"ordinal", d->ordinal}, {"name", d->name}, {"pciBusId", d->pciBusId}} : Json(nullptr);
      };
      document["devices"] = {{"sideA", deviceJson(result.deviceA)}, {"sideB", deviceJson(result.deviceB)}};
      if (options.perf) {
        document["thresholdPercent"] = options.thresholdPercent;
        document["timed"] = result.timed;
        Json slower = Json::array();
        for (const auto& s : result.slower) {
          slower.push_back({{"launchIndex", s.launchIndex},
                            {"kernel", s.kernel},
                            {"baseNs", s.baseNs},
                            {"otherNs", s.otherNs},
                            {"percent", s.percent}});
        }
        document["slower"] = std::move(slower);
      }
      if (result.first && result.first->outcome.graph) {
        document["first"] = graphDivergenceJson(model, *result.first);
      } else if (result.first) {
        const auto& o = result.first->outcome;
        Json parameters = Json::array();
        if (const auto* l = model.launch(o.launchIndex)) {
          for (const auto& line : parameterLines(*l)) parameters.push_back(line);
        }
        document["first"] = {{"launchIndex", o.launchIndex},
                             {"kernel", o.kernel},
                             {"verdict", replay::verdictName(o.verdict)},
                             {"why", result.first->why},
                             {"detail", o.detail},
                             {"code", o.code},
                             {"grid", {o.grid[0], o.grid[1], o.grid[2]}},
                             {"block", {o.block[0], o.block[1], o.block[2]}},
                             {"sharedMemBytes", o.sharedMemBytes},
                             {"parameters", std::move(parameters)},
                             {"buffers", buffersJson(o.buffers)},
                             {"reproduce", result.first->reproduce}};
      } else {
        document["first"] = nullptr;
      }
      document["exitCode"] = static_cast<int64_t>(code);
      std::cout << jsonText(document) << "\n";
      return code;
    }

    std::cout << "kcap bisect " << opt.path << ": " << selected.launches.size() << " launches"
              << (selected.graphLaunches.empty()
                      ? ""
                      : " and " + std::to_string(selected.graphLaunches.size()) + " graph launches")
              << (options.sequence ? " as one sequence" : ", each from its recorded pre-state") << "; comparing "
              << sideB << " with " << sideA << "\n";
    if (options.against == Against::kOtherDevice) {
      const auto where = [](const std::optional<replay::ReplayDevice>& d) {
        return d ? "GPU " + std::to_string(d->ordinal) + " (" + printable(d->name) +
                       (d->pciBusId.empty() ? "" : ", PCI " + d->pciBusId) + ")"
                 : std::string("no GPU (no replay ran)");
      };
      std::cout << "side A ran on " << where(result.deviceA) << ", side B on " << where(result.deviceB) << "\n";
    }
    if (selected.graphLaunches.empty() && !model.graphLaunchRecords().empty()) {
      std::cout << model.graphLaunchRecords().size()
                << " graph launches not compared: --kernel, --range, --sequence and --perf select launches only\n";
    }
    std::cout << "\n";
    if (options.perf) {
      if (result.timed == 0 && options.against == Against::kRecorded) {
        std::cout << "No launch could be timed against the recording: the trace holds no recorded durations "
                     "(record with `kcap record --timing`), or no launch replayed.\n";
        return kExitTrace;
      }
      std::cout << result.timed << " launches timed (" << options.perfRepeat << " runs each); slower by more than "
                << options.thresholdPercent << "%: " << result.slower.size() << "\n";
      Table table({"launch", "kernel", "before", "after", "slower"}, "rrrr");
      for (const auto& s : result.slower) {
        table.row({std::to_string(s.launchIndex), printable(s.kernel),
                   strf("%.1f us", static_cast<double>(s.baseNs) / 1e3),
                   strf("%.1f us", static_cast<double>(s.otherNs) / 1e3), strf("%+.1f%%", s.percent)});
      }
      if (!table.empty()) std::cout << table.render();
      return code;
    }
    if (!result.first && result.examined == result.notComparable) {
      std::cout << "Nothing compared: "
                << (result.examined == 0 ? "no launch was selected" : "no launch replayed on both sides")
                << " (see kcap replay).\n";
      return code;
    }
    if (!result.first) {
      std::cout << "No launch diverges: all " << result.examined - result.notComparable << " compared " << units
                << " agree.";
      if (result.notComparable != 0) {
        std::cout << " " << result.notComparable << " could not be replayed on one side (see kcap replay).";
      }
      std::cout << "\n";
      return code;
    }
    const auto& d = *result.first;
    const auto& o = d.outcome;
    if (o.graph) {
      printGraphDivergence(model, d, expected, actual);
      std::cout << "\n" << result.examined << " of " << total << " " << units << " compared before it was found.\n";
      return code;
    }
    std::cout << "First divergent launch: " << o.launchIndex << " (" << printable(o.kernel) << "), grid "
              << dim3Text(o.grid[0], o.grid[1], o.grid[2]) << ", block " << dim3Text(o.block[0], o.block[1], o.block[2])
              << ", " << o.sharedMemBytes << " bytes of dynamic shared memory\n";
    std::cout << "  " << replay::verdictName(o.verdict) << ": " << printable(d.why) << "\n";
    if (const auto* l = model.launch(o.launchIndex)) {
      std::cout << "  parameters:\n";
      for (const auto& line : parameterLines(*l)) std::cout << "    " << line << "\n";
    }
    bool any = false;
    for (const auto& b : o.buffers) {
      if (b.differingBytes == 0) continue;
      if (!any) std::cout << "  buffers that differ:\n";
      any = true;
      std::cout << "    " << bufferLine(b, expected, actual) << "\n";
    }
    std::cout << "  reproduce it alone: " << d.reproduce << "\n";
    if (result.probes != 0) {
      std::cout << "\nFound by bisection: " << result.probes << " prefixes of the " << total
                << "-launch sequence replayed on each side.\n";
    } else {
      std::cout << "\n" << result.examined << " of " << total << " " << units << " compared before it was found.\n";
    }
    return code;
  });
}

}  // namespace

Run setupBisect(CLI::App& cmd) {
  auto opt = std::make_shared<Options>();
  cmd.add_option("file", opt->path, "Trace file")->required();
  cmd.add_option("--against", opt->against,
                 "What to compare with: recorded (the recorded outputs, the default), force-ptx (the image's PTX "
                 "JIT-compiled), override:KERNEL=IMAGE (another build of matching kernels)");
  cmd.add_option("--devices", opt->devices, "A,B: the same launches on GPUs A and B, compared with each other");
  cmd.add_flag("--perf", opt->perf, "Time both sides instead of comparing outputs; report launches slower on side B");
  cmd.add_option("--threshold", opt->threshold, "--perf: percent slower that counts (default 10)");
  cmd.add_option("--repeat", opt->repeat, "--perf: timed runs of each launch on each side (default 10)");
  cmd.add_flag("--sequence", opt->sequence,
               "The launches depend on each other: replay them in order from the first one's pre-state");
  cmd.add_option("--kernel", opt->kernel,
                 "Only launches of kernels whose name matches REGEX (RE2 syntax, anywhere in the name)");
  cmd.add_option("--range", opt->range, "Only launches A..B");
  cmd.add_option("--device", opt->device, "GPU to replay on (default 0)");
  cmd.add_flag("--no-fixed-va", opt->noFixedVa, "Relocate every pointer instead of asking for recorded addresses");
  cmd.add_option("--dtype", opt->dtype, "Element type for error statistics of differing buffers");
  cmd.add_option("--tolerance", opt->tolerance, "Accept differences within this (needs --dtype)");
  cmd.add_option("--timeout", opt->timeout, "Seconds a launch may run before it counts as a hang (default 10)");
  cmd.add_flag("--json", opt->json, "One JSON document instead of text");
  return [opt] { return runBisect(*opt); };
}

}  // namespace kcap::tools
