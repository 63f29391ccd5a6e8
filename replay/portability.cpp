#include "portability.h"

#include <algorithm>
#include <cstring>
#include <map>

#include "driver.h"
#include "trace_model.h"

namespace kcap::replay {
namespace {

constexpr int32_t kMaxDynamicSharedAttribute = 8;  // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
constexpr int32_t kClusterDimensionAttribute = 4;  // CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION

std::string join(const std::vector<std::string>& parts, const std::string& separator) {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : separator) + p;
  return out;
}

}  // namespace

// The per-block limits of the CUDA C++ Programming Guide's table "Technical
// Specifications per Compute Capability" (rows "Maximum amount of shared
// memory per thread block" -- the opt-in maximum a kernel reaches with
// cudaFuncAttributeMaxDynamicSharedMemorySize -- and "Maximum number of
// threads per block"; thread block clusters from compute capability 9.0).
// The KiB figures there: 7.0 96, 7.5 64, 8.0 163, 8.6 99, 8.7 163, 8.9 99,
// 9.0 227, 10.0 227, 12.0 99. (Not re-checked against the guide here: the
// reference search found no copy of it; the values match what the driver
// reports as CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN on those
// GPUs, e.g. 232448 on an H200.)
const std::vector<ArchLimits>& knownArchitectures() {
  static const std::vector<ArchLimits> table = {
      {70, 96 * 1024, 1024, false}, {75, 64 * 1024, 1024, false},  {80, 163 * 1024, 1024, false},
      {86, 99 * 1024, 1024, false}, {87, 163 * 1024, 1024, false}, {89, 99 * 1024, 1024, false},
      {90, 227 * 1024, 1024, true}, {100, 227 * 1024, 1024, true}, {120, 99 * 1024, 1024, true},
  };
  return table;
}

std::optional<ArchLimits> limitsFor(int sm) {
  std::optional<ArchLimits> best;
  for (const auto& a : knownArchitectures()) {
    if (a.sm == sm) return a;
    if (a.sm / 10 == sm / 10 && a.sm < sm && (!best || a.sm > best->sm)) best = a;
  }
  if (best) best->sm = sm;
  return best;
}

std::string smName(int sm) { return "sm_" + std::to_string(sm); }

uint64_t KernelDemand::sharedNeeded() const {
  return std::max<uint64_t>(sharedMemBytes, maxDynamicSharedAttribute > 0 ? uint64_t(maxDynamicSharedAttribute) : 0);
}

uint64_t KernelDemand::clusterBlocks() const {
  if (cluster[0] == 0 && cluster[1] == 0 && cluster[2] == 0) return 0;
  return uint64_t{std::max(cluster[0], 1u)} * std::max(cluster[1], 1u) * std::max(cluster[2], 1u);
}

std::vector<std::string> refusals(const KernelDemand& d, const ArchLimits& arch) {
  std::vector<std::string> out;
  if (d.sharedNeeded() > arch.maxDynamicSharedPerBlock) {
    out.push_back(std::to_string(d.sharedNeeded()) + " bytes of dynamic shared memory per block (" + smName(arch.sm) +
                  " allows " + std::to_string(arch.maxDynamicSharedPerBlock) + ")");
  }
  if (d.blockThreads > arch.maxThreadsPerBlock) {
    out.push_back(std::to_string(d.blockThreads) + " threads per block (" + smName(arch.sm) + " allows " +
                  std::to_string(arch.maxThreadsPerBlock) + ")");
  }
  if (d.clusterBlocks() > 1 && !arch.clusters) {
    out.push_back("thread block clusters (" + smName(arch.sm) + " has none; they need sm_90 or newer)");
  }
  return out;
}

PortabilityVerdict judge(const KernelDemand& d, const std::vector<ArchLimits>& architectures) {
  PortabilityVerdict v;
  std::vector<std::string> reasons;

  // dynamic shared memory: which run, which refuse (largest limit first)
  std::vector<ArchLimits> runs, refused;
  for (const auto& a : architectures) (d.sharedNeeded() > a.maxDynamicSharedPerBlock ? refused : runs).push_back(a);
  if (!refused.empty()) {
    auto byLimit = [](const ArchLimits& a, const ArchLimits& b) {
      return a.maxDynamicSharedPerBlock != b.maxDynamicSharedPerBlock
                 ? a.maxDynamicSharedPerBlock > b.maxDynamicSharedPerBlock
                 : a.sm < b.sm;
    };
    std::stable_sort(runs.begin(), runs.end(), byLimit);
    std::stable_sort(refused.begin(), refused.end(), byLimit);
    auto list = [](const std::vector<ArchLimits>& archs) {
      std::vector<std::string> names;
      for (const auto& a : archs) {
        names.push_back(smName(a.sm) + " (" + std::to_string(a.maxDynamicSharedPerBlock) + " max)");
      }
      return join(names, ", ");
    };
    std::string r = std::to_string(d.sharedNeeded()) + " bytes of dynamic shared memory per block";
    if (d.maxDynamicSharedAttribute > int64_t{d.sharedMemBytes}) {
      r += " (the recorded CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES; launches used up to " +
           std::to_string(d.sharedMemBytes) + ")";
    }
    r += ": ";
    r += runs.empty() ? "runs on none of " + smName(architectures.front().sm) + ".." + smName(architectures.back().sm)
                      : "runs on " + list(runs);
    r += ", refused on " + list(refused);
    reasons.push_back(r);
  }

  // block size and clusters
  const ArchLimits* anyArch = architectures.empty() ? nullptr : &architectures.front();
  if (anyArch != nullptr && d.blockThreads > anyArch->maxThreadsPerBlock) {
    reasons.push_back(std::to_string(d.blockThreads) + " threads per block: more than " +
                      std::to_string(anyArch->maxThreadsPerBlock) + ", refused on every architecture");
  }
  if (d.clusterBlocks() > 1) {
    std::vector<std::string> without;
    for (const auto& a : architectures) {
      if (!a.clusters) without.push_back(smName(a.sm));
    }
    if (!without.empty()) {
      reasons.push_back("thread block clusters of " + std::to_string(d.cluster[0]) + "x" +
                        std::to_string(d.cluster[1]) + "x" + std::to_string(d.cluster[2]) +
                        " blocks: need sm_90 or newer, refused on " + join(without, ", "));
    }
  }

  for (const auto& a : architectures) {
    if (!refusals(d, a).empty()) v.refusedOn.push_back(a.sm);
  }
  if (!reasons.empty()) v.line = d.kernel + ": " + join(reasons, "; ");
  return v;
}

uint64_t workingSetBytes(schema::Launch::Reader launch) {
  uint64_t total = 0;
  for (auto range : launch.getPre()) total += range.getContent().getSize();
  return total;
}

std::vector<KernelDemand> kernelDemands(const TraceModel& model) {
  std::vector<KernelDemand> out;
  std::map<std::string, size_t> index;
  for (const auto& record : model.launches()) {
    const auto l = record.event();
    std::string name = l.getKernelName().cStr();
    int64_t attribute = 0;
    try {
      const CodeRef code = model.codeFor(record);
      if (name.empty()) name = code.kernelName;
      for (const auto& e : code.attributes) {
        const auto a = e->get().getFunctionAttribute();
        if (a.getApi() != schema::AttributeApi::FUNC_SET_ATTRIBUTE &&
            a.getApi() != schema::AttributeApi::KERNEL_SET_ATTRIBUTE) {
          continue;
        }
        if (a.getAttribute() == kMaxDynamicSharedAttribute) attribute = std::max(attribute, a.getValue());
      }
    } catch (const ReplayError&) {
      // the code is not in the trace: judge the launch by what it says alone
    }
    if (name.empty()) name = "<function " + std::to_string(l.getFunction()) + ">";
    auto [it, inserted] = index.emplace(name, out.size());
    if (inserted) {
      out.emplace_back();
      out.back().kernel = name;
    }
    KernelDemand& d = out[it->second];
    ++d.launches;
    d.sharedMemBytes = std::max(d.sharedMemBytes, l.getSharedMemBytes());
    d.maxDynamicSharedAttribute = std::max(d.maxDynamicSharedAttribute, attribute);
    d.blockThreads =
        std::max(d.blockThreads, uint64_t{l.getBlockX()} * uint64_t{l.getBlockY()} * uint64_t{l.getBlockZ()});
    for (auto attr : l.getAttributes()) {
      if (attr.getId() != kClusterDimensionAttribute || attr.getValue().size() < 12) continue;
      uint32_t dims[3];
      std::memcpy(dims, attr.getValue().begin(), sizeof dims);
      KernelDemand candidate;
      std::copy(dims, dims + 3, candidate.cluster);
      if (candidate.clusterBlocks() > d.clusterBlocks()) std::copy(dims, dims + 3, d.cluster);
    }
  }
  return out;
}

}  // namespace kcap::replay
