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
#include <chrono>
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

// How far a replay is, on stderr. On a terminal, one line rewritten per
// outcome; elsewhere (a log file, a pipe) a full line at most every few
// seconds, so that a redirected run of many launches shows it is alive.
class Progress {
 public:
  Progress(size_t selected, bool json)
      : selected_(selected),
        live_(selected > 1 && !json && isatty(STDERR_FILENO)),
        periodic_(selected > 1 && !isatty(STDERR_FILENO)) {}

  // Before stdout prints: the terminal line would end up in front of it.
  void clear() {
    if (!shown_) return;
    std::cerr << "\r\033[K" << std::flush;
    shown_ = false;
  }

  void update(const LaunchOutcome& o) {
    ++done_;
    const std::string what = (o.graph ? "graph launch " : "launch ") + std::to_string(o.launchIndex);
    if (live_) {
      std::cerr << "\r[" << done_ << "/" << selected_ << "] " << what << " " << replay::verdictName(o.verdict)
                << "\033[K" << std::flush;
      shown_ = true;
    }
    const auto now = std::chrono::steady_clock::now();
    if (periodic_ && now - lastLine_ >= kInterval) {
      lastLine_ = now;
      std::cerr << "kcap replay: " << done_ << " of " << selected_ << " done (" << what << ": "
                << replay::verdictName(o.verdict) << "), "
                << std::chrono::duration_cast<std::chrono::seconds>(now - start_).count() << " s\n"
                << std::flush;
    }
  }

 private:
  static constexpr std::chrono::seconds kInterval{5};
  const size_t selected_;
  const bool live_;
  const bool periodic_;
  bool shown_ = false;
  size_t done_ = 0;
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point lastLine_ = start_;
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
    ReplayReport report({opt.path, opt.json, opt.verbose}, model, selection);
    Progress progress(selection.launchIndices.size() + selection.graphLaunchIndices.size(), opt.json);
    const auto onOutcome = [&](const LaunchOutcome& o) {
      progress.clear();
      report.add(o);
      progress.update(o);
    };
    try {
      if (options.isolate) {
        replay::replayIsolated(model, options, selection, onOutcome, &report.device);
      } else {
        replay::replayInProcess(model, options, selection, onOutcome, &report.device);
      }
    } catch (const replay::ReplayError& e) {
      progress.clear();
      std::cerr << "kcap replay: " << e.what() << "\n";
      return kExitTrace;
    }
    progress.clear();
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
