// kcap replay FILE [--launch N | --kernel REGEX | --range A..B | --all] ...:
// re-runs recorded launches on this machine's GPU and says whether they
// reproduce (replay/ does the work; this file selects, prints and exits).
//
// A checkpoint trace (--mode checkpoint) is re-executed instead, interval
// by interval (replay_checkpoint.cpp).
//
// Exit codes: 0 every launch reproduced as recorded (or ran where the trace
// has nothing to compare with), 3 some launch differs, 4 some launch faulted
// or hung, 1 a trace problem or a launch that cannot be replayed here,
// 2 usage.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <optional>

#include <CLI/CLI.hpp>

#include "common.h"
#include "checkers.h"
#include "driver.h"
#include "isolation.h"
#include "kernel_pattern.h"
#include "reexecute.h"
#include "replay_report.h"
#include "subcommands.h"
#include "trace_reader.h"

namespace kcap::tools {
namespace {

using replay::LaunchOutcome;
using replay::Verdict;

constexpr int kExitDiffers = 3;
constexpr int kExitFault = 4;

struct Options {
  std::string path;
  std::vector<uint64_t> launches;
  std::vector<uint64_t> graphLaunches;
  bool graphNodes = false;
  std::string kernel;
  std::string range;
  bool all = false;
  int device = 0;
  bool noFixedVa = false;
  bool forcePtx = false;
  std::vector<std::string> overrides;
  std::vector<std::string> dtypes;
  std::string tolerance;
  double timeout = 10;
  unsigned repeat = 0;
  bool json = false;
  bool noIsolate = false;
  bool verbose = false;
  std::vector<std::string> checks;
  unsigned runs = 5;
};

// This kcap's executable, for compute-sanitizer to start.
std::string selfPath() {
  char path[4096];
  const ssize_t n = ::readlink("/proc/self/exe", path, sizeof path - 1);
  return n > 0 ? std::string(path, static_cast<size_t>(n)) : std::string("kcap");
}

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

replay::ReplayOptions replayOptions(const Options& o) {
  replay::ReplayOptions r;
  r.tracePath = o.path;
  r.device = o.device;
  r.fixedAddresses = !o.noFixedVa;
  r.forcePtx = o.forcePtx;
  r.timeoutSeconds = o.timeout;
  r.repeat = o.repeat;
  r.isolate = !o.noIsolate;
  r.graphNodes = o.graphNodes;
  for (const std::string& item : o.overrides) {
    const size_t eq = item.rfind('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == item.size()) {
      throw UsageError("--override " + item + ": expected KERNEL=IMAGE");
    }
    replay::KernelOverride k{item.substr(0, eq), item.substr(eq + 1)};
    try {
      replay::KernelPattern check(k.kernelPattern);
    } catch (const std::invalid_argument& e) {
      throw UsageError("--override " + item + ": " + k.kernelPattern + " is not a valid regular expression (" +
                       e.what() + ")");
    }
    r.overrides.push_back(k);
  }
  for (const std::string& item : o.dtypes) {
    const size_t eq = item.find('=');
    const std::string type = eq == std::string::npos ? item : item.substr(eq + 1);
    const auto parsed = replay::parseDType(type);
    if (!parsed) {
      throw UsageError("--dtype " + item + ": unknown type " + type +
                       " (f64 f32 f16 bf16 e4m3 e5m2 i8 u8 i16 u16 i32 u32 i64 u64)");
    }
    if (eq == std::string::npos) {
      r.dtype = parsed;
    } else {
      char* end = nullptr;
      const std::string index = item.substr(0, eq);
      const unsigned long param = std::strtoul(index.c_str(), &end, 10);
      if (index.empty() || *end != '\0') throw UsageError("--dtype " + item + ": expected TYPE or PARAM=TYPE");
      r.paramDtypes[static_cast<uint32_t>(param)] = *parsed;
    }
  }
  if (!o.tolerance.empty()) {
    r.tolerance = replay::parseTolerance(o.tolerance);
    if (!r.tolerance) throw UsageError("--tolerance " + o.tolerance + ": expected e.g. 1e-3, rel=1e-2, ulp=4");
    if (!r.dtype && r.paramDtypes.empty())
      throw UsageError("--tolerance needs --dtype (errors are measured per element)");
  }
  if (!(o.timeout > 0)) throw UsageError("--timeout must be positive");
  const std::vector<std::string> known = replay::checkNames();
  for (const std::string& name : o.checks) {
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      std::string list;
      for (const std::string& k : known) list += " " + k;
      throw UsageError("--check " + name + ": unknown checker (one of" + list + ")");
    }
    if (std::find(r.checks.begin(), r.checks.end(), name) == r.checks.end()) r.checks.push_back(name);
  }
  if (o.runs < 2) throw UsageError("--runs must be at least 2");
  r.checkRuns = o.runs;
  // A sequence is checked as a whole: only determinism (the sequence replayed
  // --runs times) means something there; the other checkers replay one launch
  // again from its own pre-state.
  for (const std::string& name : r.checks) {
    if (!o.range.empty() && name != "determinism") {
      throw UsageError("--check " + name +
                       " replays each launch again from its own pre-state: select with --launch, "
                       "--kernel or --all, not --range (with --range only --check determinism, which replays the "
                       "whole sequence --runs times)");
    }
  }
  return r;
}

replay::Selection select(const Options& o, const replay::TraceModel& model) {
  const int ways =
      (!o.launches.empty()) + (!o.kernel.empty()) + (!o.range.empty()) + (o.all ? 1 : 0) + (!o.graphLaunches.empty());
  if (ways > 1) throw UsageError("choose one of --launch, --graph-launch, --kernel, --range, --all");
  if (o.graphNodes && (!o.launches.empty() || !o.kernel.empty() || !o.range.empty())) {
    throw UsageError("--graph-nodes runs graph launches node by node: select with --graph-launch N or --all");
  }
  replay::Selection s;
  const auto& launches = model.launches();
  const auto& graphLaunches = model.graphLaunchRecords();
  if (!o.graphLaunches.empty()) {
    for (const uint64_t index : o.graphLaunches) {
      if (model.graphLaunch(index) == nullptr) {
        throw UsageError("graph launch " + std::to_string(index) + " is not in " + o.path + " (it has " +
                         std::to_string(graphLaunches.size()) +
                         " graph launches; `kcap dump --type graphLaunch` lists them)");
      }
      s.graphLaunchIndices.push_back(index);
    }
  } else if (!o.launches.empty()) {
    for (const uint64_t index : o.launches) {
      if (model.launch(index) == nullptr) {
        throw UsageError("launch " + std::to_string(index) + " is not in " + o.path + " (it has " +
                         std::to_string(launches.size()) + " launches; `kcap dump --type launch` lists them)");
      }
      s.launchIndices.push_back(index);
    }
  } else if (!o.kernel.empty()) {
    std::optional<replay::KernelPattern> pattern;
    try {
      pattern.emplace(o.kernel);
    } catch (const std::invalid_argument& e) {
      throw UsageError("--kernel " + o.kernel + ": not a valid regular expression (" + e.what() + ")");
    }
    for (const auto& l : launches) {
      const auto name = l.event().getKernelName();
      if (!l.event().getCapturing() && pattern->search(std::string_view(name.cStr(), name.size()))) {
        s.launchIndices.push_back(l.launchIndex);
      }
    }
    if (s.launchIndices.empty()) throw UsageError("no launch of a kernel matching " + o.kernel + " in " + o.path);
  } else if (!o.range.empty()) {
    const auto range = parseLaunchRange(o.range);
    if (!range) throw UsageError("--range " + o.range + ": expected A..B with A <= B");
    const auto [first, last] = *range;
    for (const auto& l : launches) {
      if (!l.event().getCapturing() && l.launchIndex >= first && l.launchIndex <= last) {
        s.launchIndices.push_back(l.launchIndex);
      }
    }
    if (s.launchIndices.empty()) throw UsageError("no launches in " + o.range + " in " + o.path);
    s.sequence = true;
  } else {
    if (!o.graphNodes) {
      for (const auto& l : launches) {
        if (!l.event().getCapturing()) s.launchIndices.push_back(l.launchIndex);
      }
    }
    for (const auto& g : graphLaunches) s.graphLaunchIndices.push_back(g.graphLaunchIndex);
    if (s.launchIndices.empty() && s.graphLaunchIndices.empty()) {
      throw UsageError("every launch in " + o.path + " was captured into a CUDA graph, and it has no graph launches");
    }
  }
  return s;
}

std::string durationText(uint64_t ns) {
  if (ns < 10'000) return strf("%llu ns", static_cast<unsigned long long>(ns));
  if (ns < 10'000'000) return strf("%.1f us", static_cast<double>(ns) / 1e3);
  return strf("%.2f ms", static_cast<double>(ns) / 1e6);
}

struct TimingSummary {
  uint64_t median = 0, min = 0, max = 0;
};
std::optional<TimingSummary> timing(const LaunchOutcome& o) {
  if (o.timesNs.empty()) return std::nullopt;
  std::vector<uint64_t> t = o.timesNs;
  std::sort(t.begin(), t.end());
  return TimingSummary{t[t.size() / 2], t.front(), t.back()};
}

class Report {
 public:
  explicit Report(const Options& o) : opt_(o) {}

  void add(const LaunchOutcome& o) { outcomes_.push_back(o); }

  // Every requested check gets a row per launch: those the replay process
  // could not run ("not run"), and compute-sanitizer's, run from here.
  void completeChecks(const replay::ReplayOptions& options) {
    for (auto& o : outcomes_) {
      if (o.graph) continue;  // the checkers replay one kernel launch
      for (const std::string& name : options.checks) {
        const bool present =
            std::any_of(o.checks.begin(), o.checks.end(), [&](const auto& c) { return c.name == name; });
        if (present) continue;
        if (name == "sanitizer") {
          o.checks.push_back(replay::runSanitizer(options, o.launchIndex, selfPath()));
        } else {
          o.checks.push_back({name,
                              replay::CheckStatus::kNotRun,
                              "the launch did not replay cleanly (" + std::string(replay::verdictName(o.verdict)) + ")",
                              {}});
        }
      }
    }
  }
  replay::ReplayDevice device;

  int exitCode() const {
    int code = kExitOk;
    for (const auto& o : outcomes_) {
      if (o.verdict == Verdict::kFault || o.verdict == Verdict::kHang) return kExitFault;
      if (o.verdict == Verdict::kDiffers) code = kExitDiffers;
      if (o.verdict == Verdict::kError && code == kExitOk) code = kExitTrace;
      for (const auto& c : o.checks) {
        if (c.status == replay::CheckStatus::kFinding) code = kExitDiffers;
      }
    }
    return code;
  }

  void printText() const {
    if (!device.name.empty()) {
      std::cout << "Replaying " << opt_.path << " on GPU " << device.ordinal << ": " << printable(device.name)
                << " (sm_" << device.sm << "), driver " << versionText(device.driverVersion) << "\n\n";
    }
    Table table({"launch", "kernel", "grid", "block", "memory", "code", "result"}, "r");
    for (const auto& o : outcomes_) {
      if (o.graph) continue;
      std::string result = replay::verdictName(o.verdict);
      if (const auto t = timing(o)) {
        result += "  " + durationText(t->median) + " median of " + std::to_string(o.timesNs.size()) + " (min " +
                  durationText(t->min) + ", max " + durationText(t->max) + ")";
        if (o.recordedDurationNs) result += ", recorded " + durationText(*o.recordedDurationNs);
      } else if (o.recordedDurationNs) {
        result += "  recorded " + durationText(*o.recordedDurationNs);
      }
      table.row({std::to_string(o.launchIndex), printable(o.kernel), dim3Text(o.grid[0], o.grid[1], o.grid[2]),
                 dim3Text(o.block[0], o.block[1], o.block[2]), replay::memoryPathName(o.memory),
                 o.code.empty() ? "-" : o.code, result});
    }
    if (!std::all_of(outcomes_.begin(), outcomes_.end(), [](const auto& o) { return o.graph; })) {
      std::cout << table.render("");
    }
    printGraphLaunches();
    for (const auto& o : outcomes_) {
      if (o.graph) continue;
      const bool interesting = o.verdict != Verdict::kReproduced || opt_.verbose || !o.checks.empty();
      if (!interesting) continue;
      std::cout << "\nlaunch " << o.launchIndex << " (" << printable(o.kernel)
                << "): " << replay::verdictName(o.verdict);
      if (!o.detail.empty()) std::cout << ": " << printable(o.detail);
      std::cout << "\n";
      for (const auto& b : o.buffers) {
        if (b.differingBytes != 0 || opt_.verbose) std::cout << "  " << bufferLine(b) << "\n";
      }
      for (const auto& c : o.checks) {
        std::cout << "  check " << c.name << ": " << replay::checkStatusName(c.status);
        if (!c.summary.empty()) std::cout << ": " << printable(c.summary);
        std::cout << "\n";
        for (const auto& d : c.details) std::cout << "    " << printable(d) << "\n";
      }
      if (o.verdict == Verdict::kDiffers || o.verdict == Verdict::kFault || o.verdict == Verdict::kHang) {
        std::cout << "  alone: kcap replay " << word(opt_.path) << " --launch " << o.launchIndex << "\n";
      }
    }
    std::cout << "\n" << summary() << "\n" << verdict() << "\n";
  }

  // One sentence a user reads first.
  std::string verdict() const {
    size_t reproduced = 0, tolerated = 0, differs = 0, failed = 0, other = 0;
    for (const auto& o : outcomes_) {
      switch (o.verdict) {
        case Verdict::kReproduced: {
          const bool loose =
              std::any_of(o.buffers.begin(), o.buffers.end(), [](const auto& b) { return b.differingBytes != 0; });
          ++(loose ? tolerated : reproduced);
          break;
        }
        case Verdict::kDiffers:
          ++differs;
          break;
        case Verdict::kFault:
        case Verdict::kHang:
          ++failed;
          break;
        default:
          ++other;
          break;
      }
    }
    const size_t n = outcomes_.size();
    const size_t graphs =
        static_cast<size_t>(std::count_if(outcomes_.begin(), outcomes_.end(), [](const auto& o) { return o.graph; }));
    // "launches", "graph launches", or both counted together.
    const std::string noun = graphs == 0   ? "launches"
                             : graphs == n ? "graph launches"
                                           : "launches (graph launches included)";
    if (failed != 0)
      return "Verdict: " + std::to_string(failed) + " of " + std::to_string(n) + " " + noun + " faulted or hung here.";
    if (differs != 0)
      return "Verdict: " + std::to_string(differs) + " of " + std::to_string(n) + " " + noun +
             " differ from the recording.";
    if (other != 0)
      return "Verdict: " + std::to_string(n - other) + " of " + std::to_string(n) + " " + noun + " ran as recorded; " +
             std::to_string(other) + " could not be verified or replayed (see above).";
    if (tolerated != 0)
      return "Verdict: all " + std::to_string(n) + " " + noun + " reproduced, " + std::to_string(tolerated) +
             " within --tolerance.";
    if (n == 1)
      return graphs == 1 ? "Verdict: the graph launch reproduced bit-exactly as recorded."
                         : "Verdict: the launch reproduced bit-exactly as recorded.";
    return "Verdict: all " + std::to_string(n) + " " + noun + " reproduced bit-exactly as recorded.";
  }

  void printJson() const {
    Json launches = Json::array();
    for (const auto& o : outcomes_) {
      if (o.graph) continue;
      Json launch = {{"launchIndex", o.launchIndex},
                     {"kernel", o.kernel},
                     {"verdict", replay::verdictName(o.verdict)},
                     {"detail", o.detail},
                     {"memory", replay::memoryPathName(o.memory)},
                     {"code", o.code},
                     {"grid", {o.grid[0], o.grid[1], o.grid[2]}},
                     {"block", {o.block[0], o.block[1], o.block[2]}},
                     {"sharedMemBytes", o.sharedMemBytes},
                     {"buffers", buffersJson(o.buffers)}};
      if (const auto t = timing(o)) {
        launch["timeNs"] = {{"median", t->median},
                            {"min", t->min},
                            {"max", t->max},
                            {"repeats", static_cast<uint64_t>(o.timesNs.size())}};
      }
      if (o.recordedDurationNs) launch["recordedDurationNs"] = *o.recordedDurationNs;
      launch["restoredBytes"] = o.restoredBytes;
      launch["restoreNs"] = o.restoreNs;
      launch["placeNs"] = o.placeNs;
      launch["restoreWaitNs"] = o.restoreWaitNs;
      if (!o.checks.empty()) {
        Json checks = Json::array();
        for (const auto& c : o.checks) {
          checks.push_back({{"name", c.name},
                            {"status", replay::checkStatusName(c.status)},
                            {"summary", c.summary},
                            {"details", c.details}});
        }
        launch["checks"] = std::move(checks);
      }
      launches.push_back(std::move(launch));
    }
    const Json document = {{"trace", opt_.path},
                           {"device",
                            {{"ordinal", static_cast<int64_t>(device.ordinal)},
                             {"name", device.name},
                             {"sm", static_cast<int64_t>(device.sm)},
                             {"driverVersion", static_cast<int64_t>(device.driverVersion)}}},
                           {"launches", std::move(launches)},
                           {"graphLaunches", graphLaunchesJson(outcomes_)},
                           {"summary", summary()},
                           {"exitCode", static_cast<int64_t>(exitCode())}};
    std::cout << jsonText(document) << "\n";
  }

 private:
  // "4 launches: 4 REPRODUCED; 2 graph launches: 1 REPRODUCED, 1 DIFFERS"
  std::string summary() const {
    std::string text;
    for (const bool graph : {false, true}) {
      std::map<std::string, size_t> counts;
      size_t total = 0;
      for (const auto& o : outcomes_) {
        if (o.graph != graph) continue;
        ++counts[replay::verdictName(o.verdict)];
        ++total;
      }
      if (total == 0 && (graph || !outcomes_.empty())) continue;
      const std::string noun = graph ? " graph launch" : " launch";
      text += (text.empty() ? "" : "; ") + std::to_string(total) + noun + (total == 1 ? "" : "es") + ":";
      bool first = true;
      for (const auto& [name, n] : counts) {
        text += (first ? " " : ", ") + std::to_string(n) + " " + name;
        first = false;
      }
    }
    return text;
  }

  void printGraphLaunches() const {
    for (const auto& o : outcomes_) {
      if (!o.graph) continue;
      std::cout << "\n" << graphLaunchLine(o) << "\n";
      for (const auto& line : o.nodeLines) std::cout << "  " << printable(line) << "\n";
      for (const auto& b : o.buffers) {
        if (b.differingBytes != 0 || opt_.verbose) std::cout << "  " << bufferLine(b) << "\n";
      }
      if (o.verdict == Verdict::kDiffers || o.verdict == Verdict::kFault || o.verdict == Verdict::kHang) {
        std::cout << "  alone: kcap replay " << word(opt_.path) << " --graph-launch " << o.launchIndex << "\n";
      }
    }
  }

  const Options& opt_;
  std::vector<LaunchOutcome> outcomes_;
};

// A checkpoint trace is re-executed from its checkpoints (replay_checkpoint.cpp):
// only the options that mean something there.
int replayCheckpoints(const Options& opt, const replay::TraceModel& model) {
  CheckpointReplayArgs args;
  args.path = opt.path;
  args.json = opt.json;
  args.verbose = opt.verbose;
  try {
    const auto refuse = [](bool given, const std::string& what) {
      if (given) throw UsageError(what);
    };
    refuse(opt.launches.size() > 1, "--launch: a checkpoint trace is re-executed for one launch at a time");
    refuse(!opt.kernel.empty() || !opt.range.empty(),
           "--kernel and --range select launches to replay each from its own memory, which a checkpoint trace "
           "does not hold: replay it whole, or one --launch N");
    refuse(opt.noFixedVa, "--no-fixed-va: re-execution needs the recorded addresses (pointers stay as recorded)");
    for (const std::string& check : opt.checks) {
      refuse(check != "determinism",
             "--check " + check + ": on a checkpoint trace only determinism (a differing interval run again)");
    }
    refuse(opt.repeat != 0 || !opt.dtypes.empty() || !opt.tolerance.empty(),
           "--repeat, --dtype and --tolerance apply to launch replay, not to a checkpoint trace's intervals");
    args.options = replayOptions(opt);
  } catch (const UsageError& e) {
    std::cerr << "kcap replay: " << e.what() << "\n";
    return kExitUsage;
  }
  if (!opt.launches.empty()) args.launch = opt.launches.front();
  return runCheckpointReplay(model, args);
}

int runReplay(const Options& opt) {
  return guarded(opt.path, [&]() -> int {
    replay::ReplayOptions options;
    replay::Selection selection;
    auto reader = format::TraceReader::open(opt.path);
    const replay::TraceModel model = replay::TraceModel::load(*reader);
    for (const auto& problem : reader->problems()) {
      std::cerr << "kcap: " << opt.path << ": at byte " << problem.offset << ": " << problem.message
                << " (replaying the intact events)\n";
    }
    if (replay::isCheckpointTrace(model)) return replayCheckpoints(opt, model);
    if (model.launches().empty() && model.graphLaunchRecords().empty()) {
      std::cerr << "kcap: " << opt.path << ": the trace holds no launches\n";
      return kExitTrace;
    }
    try {
      options = replayOptions(opt);
      selection = select(opt, model);
    } catch (const UsageError& e) {
      std::cerr << "kcap replay: " << e.what() << "\n";
      return kExitUsage;
    }

    // Launches captured into a CUDA graph never ran as launches: they have no
    // memory to start from. Only --launch N asks for one explicitly.
    const size_t captured = static_cast<size_t>(std::count_if(model.launches().begin(), model.launches().end(),
                                                              [](const auto& l) { return l.event().getCapturing(); }));
    if (captured != 0 && opt.launches.empty() && !opt.json) {
      std::cerr << "kcap replay: " << captured << " launch(es) captured into CUDA graphs are not replayed alone "
                << "(they ran inside graph launches"
                << (model.graphLaunchRecords().empty() ? ", none of which the trace holds" : ", replayed as such")
                << ")\n";
    }
    Report report(opt);
    const size_t selected = selection.launchIndices.size() + selection.graphLaunchIndices.size();
    const bool progress = !opt.json && selected > 1 && isatty(STDERR_FILENO);
    size_t done = 0;
    const auto onOutcome = [&](const LaunchOutcome& o) {
      report.add(o);
      ++done;
      if (progress) {
        std::cerr << "\r[" << done << "/" << selected << "] " << (o.graph ? "graph launch " : "launch ")
                  << o.launchIndex << " " << replay::verdictName(o.verdict) << "\033[K" << std::flush;
      }
    };
    try {
      if (options.isolate) {
        replay::replayIsolated(model, options, selection, onOutcome, &report.device);
      } else {
        replay::replayInProcess(model, options, selection, onOutcome, &report.device);
      }
    } catch (const replay::ReplayError& e) {
      if (progress) std::cerr << "\r\033[K";
      std::cerr << "kcap replay: " << e.what() << "\n";
      return kExitTrace;
    }
    if (progress) std::cerr << "\r\033[K" << std::flush;
    report.completeChecks(options);
    if (opt.json)
      report.printJson();
    else
      report.printText();
    return report.exitCode();
  });
}

}  // namespace

Run setupReplay(CLI::App& cmd) {
  auto opt = std::make_shared<Options>();
  cmd.add_option("file", opt->path, "Trace file")->required();
  cmd.add_option("--launch", opt->launches, "Replay launch N (a launchIndex; repeatable)");
  cmd.add_option("--graph-launch", opt->graphLaunches,
                 "Replay graph launch N (a graphLaunchIndex; repeatable): its graph rebuilt from the recording, "
                 "launched from its recorded memory, compared");
  cmd.add_flag("--graph-nodes", opt->graphNodes,
               "Run each selected graph launch node by node, synchronizing after each, a line per node");
  cmd.add_option("--kernel", opt->kernel,
                 "Replay every launch of kernels whose name matches REGEX (RE2 syntax, anywhere in the name)");
  cmd.add_option("--range", opt->range,
                 "Replay launches A..B as a sequence: from A's recorded pre-state, in order, with the recorded "
                 "copies and memsets between them");
  cmd.add_flag("--all", opt->all, "Replay every launch, each from its own recorded pre-state (the default)");
  cmd.add_option("--device", opt->device, "GPU ordinal to replay on (default 0)");
  cmd.add_flag("--no-fixed-va", opt->noFixedVa, "Do not reserve the recorded addresses: relocate every pointer");
  cmd.add_flag("--force-ptx", opt->forcePtx, "Run the image's PTX through the JIT instead of its SASS");
  cmd.add_option("--override", opt->overrides,
                 "KERNEL=IMAGE: run kernels matching KERNEL (RE2 regex) from IMAGE (cubin, fatbin or PTX file)");
  cmd.add_option("--dtype", opt->dtypes,
                 "TYPE or PARAM=TYPE: element type for error statistics (f64 f32 f16 bf16 e4m3 e5m2 i8..u64)");
  cmd.add_option("--tolerance", opt->tolerance, "Accept differences within this: 1e-3 (abs), rel=1e-2, ulp=4");
  cmd.add_option("--timeout", opt->timeout, "Seconds a launch may run before it is reported as HANG (default 10)");
  cmd.add_option("--repeat", opt->repeat, "Time each launch N more times with CUDA events");
  cmd.add_flag("--json", opt->json, "One JSON document instead of the table");
  cmd.add_flag("-v,--verbose", opt->verbose, "List every compared buffer, also when identical");
  cmd.add_option("--check", opt->checks,
                 "Run a checker on each launch (repeatable): determinism, unwritten, uninit, alias, overrun, "
                 "sanitizer (docs/replay.md, Checkers)")
      ->allow_extra_args(false);
  cmd.add_option("--runs", opt->runs, "Replays per launch for --check determinism (default 5)");
  cmd.add_flag("--no-isolate", opt->noIsolate, "Replay in this process (debugging; a fault ends the run)");
  return [opt] { return runReplay(*opt); };
}

}  // namespace kcap::tools
