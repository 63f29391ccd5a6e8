// `kcap doctor` (ctest label "doctor"): the portability rules of
// replay/portability.h, and the command end to end against the driver double
// on a trace of tests/interpose/programs/direct_launch recorded with
// `kcap record`.
#include "portability.h"
#include "process_runner.h"
#include "recorded_traces.h"
#include "trace_files.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <map>
#include <regex>
#include <string>
#include <vector>

namespace kcap_test {
namespace {

using kcap::replay::ArchLimits;
using kcap::replay::KernelDemand;

constexpr int kExitOk = 0, kExitUsage = 2, kExitDiffers = 3;

KernelDemand demand(const std::string& name, uint32_t shared, uint64_t threads = 256) {
  KernelDemand d;
  d.kernel = name;
  d.launches = 1;
  d.sharedMemBytes = shared;
  d.blockThreads = threads;
  return d;
}

ArchLimits arch(int sm) {
  const auto limits = kcap::replay::limitsFor(sm);
  EXPECT_TRUE(limits.has_value()) << sm;
  return limits.value_or(ArchLimits{});
}

TEST(DoctorPortability, TheArchitectureTableHoldsTheOptInLimits) {
  EXPECT_EQ(arch(70).maxDynamicSharedPerBlock, 98304u);
  EXPECT_EQ(arch(75).maxDynamicSharedPerBlock, 65536u);
  EXPECT_EQ(arch(80).maxDynamicSharedPerBlock, 166912u);
  EXPECT_EQ(arch(86).maxDynamicSharedPerBlock, 101376u);
  EXPECT_EQ(arch(87).maxDynamicSharedPerBlock, 166912u);
  EXPECT_EQ(arch(89).maxDynamicSharedPerBlock, 101376u);
  EXPECT_EQ(arch(90).maxDynamicSharedPerBlock, 232448u);
  EXPECT_EQ(arch(100).maxDynamicSharedPerBlock, 232448u);
  EXPECT_EQ(arch(120).maxDynamicSharedPerBlock, 101376u);
  // an sm the table lacks takes its major's nearest lower row
  EXPECT_EQ(arch(103).maxDynamicSharedPerBlock, 232448u);
  EXPECT_EQ(arch(103).sm, 103);
  EXPECT_FALSE(kcap::replay::limitsFor(60).has_value());
}

TEST(DoctorPortability, A200KiBTileRunsOnSm90AndIsRefusedOnSm80) {
  const auto d = demand("big_tile_sum", 204800);
  EXPECT_TRUE(kcap::replay::refusals(d, arch(90)).empty());
  const auto onSm80 = kcap::replay::refusals(d, arch(80));
  ASSERT_EQ(onSm80.size(), 1u);
  EXPECT_EQ(onSm80[0], "204800 bytes of dynamic shared memory per block (sm_80 allows 166912)");
  const auto v = kcap::replay::judge(d);
  EXPECT_EQ(v.refusedOn, (std::vector<int>{70, 75, 80, 86, 87, 89, 120}));
  EXPECT_EQ(v.line,
            "big_tile_sum: 204800 bytes of dynamic shared memory per block: runs on sm_90 (232448 max), "
            "sm_100 (232448 max), refused on sm_80 (166912 max), sm_87 (166912 max), sm_86 (101376 max), "
            "sm_89 (101376 max), sm_120 (101376 max), sm_70 (98304 max), sm_75 (65536 max)");
}

TEST(DoctorPortability, The99KiBBoundaryIsExact) {
  EXPECT_TRUE(kcap::replay::refusals(demand("k", 101376), arch(86)).empty());
  EXPECT_EQ(kcap::replay::refusals(demand("k", 101377), arch(86)).size(), 1u);
  EXPECT_EQ(kcap::replay::judge(demand("k", 101376)).refusedOn, (std::vector<int>{70, 75}));
  EXPECT_EQ(kcap::replay::judge(demand("k", 101377)).refusedOn, (std::vector<int>{70, 75, 86, 89, 120}));
}

TEST(DoctorPortability, TheRecordedAttributeCountsAsARequest) {
  auto d = demand("k", 1024);
  d.maxDynamicSharedAttribute = 200000;
  EXPECT_EQ(d.sharedNeeded(), 200000u);
  const auto v = kcap::replay::judge(d);
  EXPECT_EQ(v.refusedOn, (std::vector<int>{70, 75, 80, 86, 87, 89, 120}));
  EXPECT_NE(v.line.find("CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES; launches used up to 1024"), std::string::npos)
      << v.line;
}

TEST(DoctorPortability, BlockSizesUpTo1024AreFineEverywhere) {
  const auto fine = kcap::replay::judge(demand("k", 0, 1024));
  EXPECT_TRUE(fine.refusedOn.empty());
  EXPECT_EQ(fine.line, "");
  const auto tooMany = kcap::replay::judge(demand("k", 0, 1025));
  EXPECT_EQ(tooMany.refusedOn.size(), kcap::replay::knownArchitectures().size());
  EXPECT_EQ(tooMany.line, "k: 1025 threads per block: more than 1024, refused on every architecture");
}

TEST(DoctorPortability, ClustersNeedSm90) {
  auto d = demand("k", 0);
  d.cluster[0] = 2;
  d.cluster[1] = 1;
  d.cluster[2] = 1;
  EXPECT_EQ(d.clusterBlocks(), 2u);
  const auto v = kcap::replay::judge(d);
  EXPECT_EQ(v.refusedOn, (std::vector<int>{70, 75, 80, 86, 87, 89}));
  EXPECT_EQ(v.line,
            "k: thread block clusters of 2x1x1 blocks: need sm_90 or newer, refused on sm_70, sm_75, sm_80, "
            "sm_86, sm_87, sm_89");
}

// ---- the command ------------------------------------------------------------------

Outcome kcap(const std::vector<std::string>& args, std::map<std::string, std::string> env = {}) {
  return kcapOnDouble(args, std::move(env));
}

class Doctor : public RecordedTraces<Doctor> {};

TEST_F(Doctor, ATraceRecordedOnThisMachineMatches) {
  const std::string trace = directLaunch();
  const Outcome run = kcap({"doctor", trace});
  EXPECT_EQ(run.exitCode, kExitOk) << run.describe();
  EXPECT_NE(run.out.find("kcap driver double (sm_90)"), std::string::npos) << run.out;
  EXPECT_TRUE(std::regex_search(run.out, std::regex("\n +driver +13\\.0 +13\\.0\n"))) << run.out;
  EXPECT_NE(run.out.find("SM count"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("16.0 GiB"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("Images (4 recorded)"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("sm_80, sm_90 SASS; compute_80 PTX  SASS sm_90  SASS sm_90"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("axpy                 3         0      256        -  -"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("Nothing that can change results differs; every launch fits this GPU."), std::string::npos)
      << run.out;
  // the recorder's own variables are not compared
  EXPECT_EQ(run.out.find("KCAP_"), std::string::npos) << run.out;
  EXPECT_EQ(run.out.find("LD_PRELOAD"), std::string::npos) << run.out;

  const Outcome json = kcap({"doctor", trace, "--json"});
  EXPECT_EQ(json.exitCode, kExitOk) << json.describe();
  EXPECT_NE(
      json.out.find("{\"item\":\"driver\",\"recorded\":\"13.0\",\"here\":\"13.0\",\"note\":\"\",\"matters\":false}"),
      std::string::npos)
      << json.out;
  EXPECT_NE(json.out.find("{\"kernel\":\"reduce_sum\",\"launches\":1,\"sharedMemBytes\":0,"), std::string::npos)
      << json.out;
  EXPECT_EQ(json.out.find("\"matters\":true"), std::string::npos) << json.out;
  EXPECT_NE(json.out.find("\"exitCode\":0}"), std::string::npos) << json.out;
}

TEST_F(Doctor, WithoutADriverItStillComparesTheEnvironment) {
  const std::string trace = directLaunch();
  const Outcome run =
      kcap({"doctor", trace}, {{"KCAP_LIBCUDA", "/nonexistent/libcuda.so.1"}, {"CUDA_CACHE_MAXSIZE", "1234"}});
  EXPECT_EQ(run.exitCode, kExitDiffers) << run.describe();
  EXPECT_NE(run.out.find("no CUDA driver here"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("env CUDA_CACHE_MAXSIZE"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("(unset)"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("differs (not known to change results)"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("kcap "), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("0.1.0"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("no CUDA driver here: launches not checked against this machine"), std::string::npos)
      << run.out;
}

TEST_F(Doctor, ForcedPtxJitHereChangesResults) {
  const std::string trace = directLaunch();
  const Outcome run = kcap({"doctor", trace}, {{"CUDA_FORCE_PTX_JIT", "1"}});
  EXPECT_EQ(run.exitCode, kExitDiffers) << run.describe();
  EXPECT_NE(run.out.find("env CUDA_FORCE_PTX_JIT"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("forces PTX JIT instead of the recorded SASS: different code runs"), std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("1 difference that can change results: env CUDA_FORCE_PTX_JIT"), std::string::npos) << run.out;
  const Outcome json = kcap({"doctor", trace, "--json"}, {{"CUDA_FORCE_PTX_JIT", "1"}});
  EXPECT_EQ(json.exitCode, kExitDiffers) << json.describe();
  EXPECT_NE(json.out.find("{\"item\":\"env CUDA_FORCE_PTX_JIT\",\"recorded\":\"(unset)\",\"here\":\"1\","),
            std::string::npos)
      << json.out;
  EXPECT_NE(json.out.find("\"exitCode\":3}"), std::string::npos) << json.out;
}

TEST_F(Doctor, UsageAndTraceProblems) {
  const Outcome device = kcap({"doctor", directLaunch(), "--device", "5"});
  EXPECT_EQ(device.exitCode, kExitUsage) << device.describe();
  EXPECT_NE(device.err.find("--device 5: this machine has 1 CUDA device"), std::string::npos) << device.describe();
  const std::string junk = file("junk.kcap");
  kcap::test::writeFileBytes(junk, std::vector<uint8_t>(64, 'x'));
  const Outcome bad = kcap({"doctor", junk});
  EXPECT_EQ(bad.exitCode, 1) << bad.describe();
  EXPECT_EQ(bad.out, "");
}

}  // namespace
}  // namespace kcap_test
