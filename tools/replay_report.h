// Formatting shared by the subcommands that report replays (replay, bisect):
// one compared buffer as a line of text or as JSON; and kcap replay's report.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common.h"
#include "isolation.h"
#include "outcome.h"
#include "replay_options.h"
#include "trace_model.h"

namespace kcap::tools {

// "param 2 (0x7f.., 4.00 KiB): 12 of 4,096 bytes differ, first at offset 400 (0x190); as f32: ..."
// `expected`/`actual` name the two sides in the statistics ("recorded" / "replayed").
std::string bufferLine(const replay::BufferReport& buffer, const char* expected = "recorded",
                       const char* actual = "replayed");

// The "buffers" array of a launch's JSON object.
Json buffersJson(const std::vector<replay::BufferReport>& buffers);

// "graph launch 3 (exec 0x..., 11 nodes: 4 kernels, ...): REPRODUCED, 5 ranges compared"
std::string graphLaunchLine(const replay::LaunchOutcome& outcome);
// The "graphLaunches" array of kcap replay --json: the graph launches among `outcomes`.
Json graphLaunchesJson(const std::vector<replay::LaunchOutcome>& outcomes);

// The report of kcap replay on launches and graph launches. As text, each
// launch's row of the table (a graph launch's block) is printed as its
// outcome arrives, so that a long replay shows how far it is also when
// stdout is a file; what needs every outcome (details, checks, summary,
// verdict) comes at the end. As JSON, one document at the end.
struct ReportOptions {
  std::string path;  // the trace
  bool json = false;
  bool verbose = false;  // every compared buffer, also when identical
};
class ReplayReport {
 public:
  ReplayReport(ReportOptions options, const replay::TraceModel& model, const replay::Selection& selection);

  void add(const replay::LaunchOutcome& outcome);
  // Every requested check gets a row per launch: those the replay process
  // could not run ("not run"), and compute-sanitizer's, run from here.
  void completeChecks(const replay::ReplayOptions& options);
  int exitCode() const;
  // What follows the rows and graph launches that add() printed.
  void printText();
  void printJson() const;

  replay::ReplayDevice device;  // filled in by the replay

 private:
  // One sentence a user reads first.
  std::string verdict() const;
  // "4 launches: 4 REPRODUCED; 2 graph launches: 1 REPRODUCED, 1 DIFFERS"
  std::string summary() const;
  // The line naming the GPU, once: with the first outcome, by which the
  // replay process has said which GPU it runs on.
  void start();
  static Table table();
  // The columns are as wide as the selected launches' recorded index, name
  // and shape, any memory path, and the usual code descriptions need: known
  // before the first row is printed.
  static std::vector<size_t> plannedWidths(const replay::TraceModel& model, const replay::Selection& selection);
  static std::vector<std::string> rowOf(const replay::LaunchOutcome& outcome);
  void printGraphLaunch(const replay::LaunchOutcome& outcome) const;

  const ReportOptions opt_;
  const std::vector<size_t> widths_;
  bool started_ = false;
  bool headerShown_ = false;
  std::vector<replay::LaunchOutcome> outcomes_;
};

// kcap replay on a checkpoint trace (replay_checkpoint.cpp): re-execution
// verified at checkpoints, one line per interval. Returns the exit code.
struct CheckpointReplayArgs {
  std::string path;
  std::optional<uint64_t> launch;  // --launch N
  bool json = false;
  bool verbose = false;
  replay::ReplayOptions options;
};
int runCheckpointReplay(const replay::TraceModel& model, const CheckpointReplayArgs& args);

}  // namespace kcap::tools
