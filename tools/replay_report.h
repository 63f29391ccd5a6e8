// Formatting shared by the subcommands that report replays (replay, bisect):
// one compared buffer as a line of text or as JSON.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common.h"
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
