// kcap extract FILE (--launch N | --range A..B | --graph-launch G --node K)
// -o OUT: writes a minimal, self-contained trace of the selected launches, or
// of one kernel node of a graph launch as a plain launch (replay/extract.h
// does the work; this file parses, prints and exits).
//
// Exit codes: 0 written (what a damaged source could not give is listed on
// stderr), 1 the source cannot be read or the output cannot be written,
// 2 usage (an unknown launch, OUT is FILE).
#include <iostream>

#include <CLI/CLI.hpp>

#include "common.h"
#include "extract.h"
#include "subcommands.h"

namespace kcap::tools {
namespace {

struct Options {
  std::string path;
  std::string output;
  std::vector<uint64_t> launches;
  std::string range;
  int device = 0;
  std::optional<uint64_t> graphLaunch;
  std::string node;
};

int runExtract(const Options& opt) {
  replay::ExtractRequest request;
  request.source = opt.path;
  request.output = opt.output;
  request.launches = opt.launches;
  request.device = opt.device;
  if (!opt.range.empty()) {
    request.range = parseLaunchRange(opt.range);
    if (!request.range) {
      std::cerr << "kcap extract: --range " << opt.range << ": expected A..B with A <= B\n";
      return kExitUsage;
    }
  }
  request.graphLaunch = opt.graphLaunch;
  request.node = opt.node;
  const int ways = (!opt.launches.empty()) + (!opt.range.empty()) + (opt.graphLaunch ? 1 : 0);
  if (ways != 1) {
    std::cerr << "kcap extract: choose one of --launch N and --range A..B (or --graph-launch G --node K)\n";
    return kExitUsage;
  }
  if (opt.graphLaunch.has_value() == opt.node.empty()) {
    std::cerr << "kcap extract: --graph-launch G and --node K go together\n";
    return kExitUsage;
  }
  return guarded(opt.path, [&]() -> int {
    replay::ExtractResult r;
    try {
      r = replay::extract(request);
    } catch (const replay::ExtractUsageError& e) {
      std::cerr << "kcap extract: " << e.what() << "\n";
      return kExitUsage;
    }
    for (const std::string& text : r.rebuildNotes) std::cerr << "kcap extract: " << opt.path << ": " << text << "\n";
    for (const std::string& text : r.skipped)
      std::cerr << "kcap extract: " << opt.path << ": skipped: " << text << "\n";
    if (!r.rebuiltVerification.empty()) {
      std::cout << "rebuilt by re-execution from the checkpoints; " << r.rebuiltVerification << "\n";
    }
    if (opt.graphLaunch) {
      std::cout << "extracted " << r.selection << " of " << opt.path << " as launch 0: " << withCommas(r.events)
                << " events, " << withCommas(r.bytes) << " bytes\n";
      if (r.notCompared.empty()) {
        std::cout << "its post-state is the graph launch's: every range it reaches is reached by no other node, or "
                     "unchanged by the graph launch\n";
      } else {
        std::cout << "no post-state: a replay of it compares nothing (" << r.notCompared << ")\n";
      }
      return kExitOk;
    }
    const size_t n = r.launches.size();
    const bool plural = n != 1 || request.range.has_value();
    const double percent =
        r.sourceBytes == 0 ? 0.0 : 100.0 * static_cast<double>(r.bytes) / static_cast<double>(r.sourceBytes);
    std::cout << "extracted " << (plural ? "launches " : "launch ") << r.selection << " (" << n
              << (n == 1 ? " launch" : " launches") << ") of " << opt.path << ": " << withCommas(r.events)
              << " events, " << r.modules << (r.modules == 1 ? " module, " : " modules, ") << withCommas(r.bytes)
              << " bytes (was " << withCommas(r.sourceBytes) << " bytes, " << strf("%.1f", percent)
              << "% of the original)\n";
    return kExitOk;
  });
}

}  // namespace

Run setupExtract(CLI::App& cmd) {
  auto opt = std::make_shared<Options>();
  cmd.add_option("file", opt->path, "Trace file")->required();
  cmd.add_option("-o,--output", opt->output, "The trace to write (replaced atomically; never FILE itself)")->required();
  cmd.add_option("--launch", opt->launches, "Extract launch N (a launchIndex; repeatable), to replay on its own");
  cmd.add_option("--range", opt->range,
                 "Extract launches A..B and the copies and memsets between them, to replay as a sequence");
  cmd.add_option("--graph-launch", opt->graphLaunch,
                 "With --node: extract a kernel node of graph launch G (a full-mode trace) as a plain launch")
      ->type_name("G");
  cmd.add_option("--node", opt->node,
                 "The node of --graph-launch: its index in the graph, or a nested node's path (\"node 3 > node 0\")")
      ->type_name("K");
  cmd.add_option("--device", opt->device,
                 "A checkpoint trace: the GPU that rebuilds the launch's memory by re-execution [default: 0]")
      ->type_name("N");
  return [opt] { return runExtract(*opt); };
}

}  // namespace kcap::tools
