// The environment variables that place a process in a multi-process job,
// each list in the order it is looked up: the recorder's %r in output paths
// takes the first rank variable set, and `kcap ranks` reads the variables a
// trace recorded (TraceBegin.environment) the same way.
#pragma once

namespace kcap::format {

inline constexpr const char* kRankVariables[] = {"RANK", "LOCAL_RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK"};
inline constexpr const char* kWorldSizeVariables[] = {"WORLD_SIZE", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE"};

}  // namespace kcap::format
