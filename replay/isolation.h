// Replay in a child process, so that one launch cannot poison the others.
//
// A faulting kernel leaves the CUDA context unusable (a sticky error), and a
// hung one never returns. The parent never touches the GPU: it forks a
// replay process, which streams each launch's start and outcome back over a
// pipe. A launch that does not finish within the timeout is a HANG (the
// process is killed); a process that dies inside a launch is a FAULT; either
// way the parent starts a new process for the launches that remain.
#pragma once

#include <functional>
#include <string>

#include "outcome.h"
#include "replay_options.h"
#include "trace_model.h"

namespace kcap::replay {

// Where the replay ran, for the report's header.
struct ReplayDevice {
  int ordinal = 0;
  std::string name;  // "NVIDIA H200"
  int sm = 0;        // 90
  int driverVersion = 0;
  std::string pciBusId;  // "0000:19:00.0": of the device the replay's context was on, as the driver said
};

// Replays `selection` of the trace at options.tracePath, handing every
// outcome to `report` in launch order (each selected launch gets exactly
// one). Throws ReplayError when no replay can be made at all (no driver, no
// such device): the message says why.
void replayIsolated(const TraceModel& model, const ReplayOptions& options, const Selection& selection,
                    const std::function<void(const LaunchOutcome&)>& report, ReplayDevice* device = nullptr);

// The same in this process, for debugging (--no-isolate): a fault ends it.
void replayInProcess(const TraceModel& model, const ReplayOptions& options, const Selection& selection,
                     const std::function<void(const LaunchOutcome&)>& report, ReplayDevice* device = nullptr);

}  // namespace kcap::replay
