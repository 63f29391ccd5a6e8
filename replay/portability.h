// Whether recorded launches can run on other GPU architectures, judged from
// the trace alone (no GPU): the dynamic shared memory a kernel asks for per
// block, its block size and its thread block clusters, against each
// architecture's per-block limits. Used by `kcap doctor`. Pure logic.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kcap.capnp.h"

namespace kcap::replay {

class TraceModel;

// One architecture's per-block launch limits.
struct ArchLimits {
  int sm = 0;                             // major * 10 + minor: 90 for sm_90
  uint32_t maxDynamicSharedPerBlock = 0;  // opt-in maximum (cudaFuncAttributeMaxDynamicSharedMemorySize)
  uint32_t maxThreadsPerBlock = 1024;
  bool clusters = false;  // thread block clusters (sm_90 and newer)
};

// The architectures doctor judges against, by sm: sm_70, 75, 80, 86, 87, 89,
// 90, 100, 120.
const std::vector<ArchLimits>& knownArchitectures();

// The limits of `sm`: the table's row, or for an sm the table lacks, the row
// of the nearest lower sm of the same major (sm_103 -> sm_100); nullopt when
// there is none.
std::optional<ArchLimits> limitsFor(int sm);

std::string smName(int sm);  // 90 -> "sm_90"

// What a kernel's recorded launches ask of a GPU: the largest of each.
struct KernelDemand {
  std::string kernel;
  uint64_t launches = 0;
  uint32_t sharedMemBytes = 0;            // largest Launch.sharedMemBytes
  int64_t maxDynamicSharedAttribute = 0;  // largest recorded CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 0 none
  uint64_t blockThreads = 0;              // largest blockX * blockY * blockZ
  uint32_t cluster[3] = {0, 0, 0};        // largest cluster (launch attribute 4), 0s when none

  // The dynamic shared memory per block the kernel needs the GPU to allow: a
  // launch with more fails, and so does setting the attribute above the limit.
  uint64_t sharedNeeded() const;
  uint64_t clusterBlocks() const;  // blocks in the cluster, 0 when none
};

// Why `arch` would refuse the kernel's launches; empty when it allows them.
std::vector<std::string> refusals(const KernelDemand& demand, const ArchLimits& arch);

struct PortabilityVerdict {
  std::vector<int> refusedOn;  // sm of each architecture that refuses, in table order
  // "big_tile_sum: 204800 bytes of dynamic shared memory per block: runs on
  // sm_90 (232448 max), sm_100 (232448 max), refused on sm_80 (166912 max),
  // ..." ; empty when every architecture allows the launches.
  std::string line;
};
PortabilityVerdict judge(const KernelDemand& demand,
                         const std::vector<ArchLimits>& architectures = knownArchitectures());

// The demands of every kernel with launches, in order of first launch.
std::vector<KernelDemand> kernelDemands(const TraceModel& model);

// The bytes a launch's pre-state covers: the device memory it needs restored.
uint64_t workingSetBytes(schema::Launch::Reader launch);

}  // namespace kcap::replay
