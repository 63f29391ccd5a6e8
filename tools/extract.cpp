// kcap extract FILE (--launch N | --range A..B) -o OUT: writes a minimal,
// self-contained trace of the selected launches (replay/extract.h does the
// work; this file parses, prints and exits).
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
  if (opt.launches.empty() == opt.range.empty()) {
    std::cerr << "kcap extract: choose one of --launch N and --range A..B\n";
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
  cmd.add_option("--device", opt->device,
                 "A checkpoint trace: the GPU that rebuilds the launch's memory by re-execution [default: 0]")
      ->type_name("N");
  return [opt] { return runExtract(*opt); };
}

}  // namespace kcap::tools
