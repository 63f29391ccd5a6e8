// What places a process in a multi-process job. The environment variables,
// each list in the order it is looked up: the recorder's %r in output paths
// takes the first rank variable set, and `kcap ranks` reads the variables a
// trace recorded (TraceBegin.environment) the same way. And the kernels
// through which the job's processes talk: NCCL's collectives, which wait for
// their peers (the recorder does not synchronize around them, replay does
// not run them, `kcap ranks` counts them).
#pragma once

#include <string_view>

namespace kcap::format {

inline constexpr const char* kRankVariables[] = {"RANK", "LOCAL_RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK"};
inline constexpr const char* kWorldSizeVariables[] = {"WORLD_SIZE", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE"};

// An NCCL kernel, by the names NCCL gives its device kernels.
inline bool isNcclKernel(std::string_view kernelName) {
  return kernelName.starts_with("ncclKernel") || kernelName.starts_with("ncclDevKernel");
}

}  // namespace kcap::format
