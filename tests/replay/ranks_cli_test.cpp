// `kcap ranks` end to end, without a GPU (ctest label "ranks"): the replay
// and record scenario programs recorded against the driver double as the
// ranks of a job (RANK and WORLD_SIZE, or Slurm's variables, in their
// environment), and the set compared: ranks in order, the same launches
// (captured into a graph or not) or the first launch that differs, a rank
// claimed twice, ranks missing, world sizes that disagree, a truncated trace
// and a file that cannot be read.
#include "process_runner.h"
#include "recorded_traces.h"
#include "trace_files.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <vector>

namespace kcap_test {
namespace {

using nlohmann::json;

constexpr int kExitOk = 0, kExitTrace = 1;

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

class RanksCli : public RecordedTraces<RanksCli> {
 protected:
  // replay_scenarios SCENARIO recorded with `env`, as NAME, once per suite.
  static std::string recordedWith(const std::string& name, const std::string& scenario,
                                  const std::map<std::string, std::string>& env) {
    const std::string path = file(name);
    if (access(path.c_str(), F_OK) != 0) {
      recordWithKcap(path, KCAP_TEST_REPLAY_PROGRAM, {scenario}, env);
    }
    return path;
  }
  // SCENARIO as rank RANK of a job of WORLD ranks (torchrun's variables).
  static std::string asRank(const std::string& scenario, int rank, int world, const std::string& tag = "") {
    return recordedWith(scenario + "-" + std::to_string(rank) + "-of-" + std::to_string(world) + tag + ".kcap",
                        scenario, {{"RANK", std::to_string(rank)}, {"WORLD_SIZE", std::to_string(world)}});
  }

  static Outcome ranks(std::vector<std::string> args) {
    args.insert(args.begin(), "ranks");
    return kcapOnDouble(args);
  }
  static json ranksJson(std::vector<std::string> args, int expectedExit = kExitOk) {
    args.insert(args.begin(), "--json");
    const Outcome run = ranks(args);
    EXPECT_EQ(run.exitCode, expectedExit) << run.describe();
    return json::parse(run.out);
  }
  static std::vector<std::string> kinds(const json& document) {
    std::vector<std::string> out;
    for (const auto& p : document["problems"]) out.push_back(p["kind"]);
    return out;
  }
};

TEST_F(RanksCli, TheSameProgramOnTwoRanksLaunchesTheSameKernelsInTheSameOrder) {
  const std::string rank0 = asRank("sequence", 0, 2), rank1 = asRank("sequence", 1, 2);
  // Given in the wrong order: rows come by rank.
  const json j = ranksJson({rank1, rank0});
  ASSERT_EQ(j["traces"].size(), 2u) << j;
  for (int rank = 0; rank < 2; ++rank) {
    const json& row = j["traces"][static_cast<size_t>(rank)];
    EXPECT_EQ(row["rank"], rank) << row;
    EXPECT_EQ(row["file"], rank == 0 ? rank0 : rank1) << row;
    EXPECT_EQ(row["worldSize"], 2) << row;
    EXPECT_EQ(row["rankFrom"]["variable"], "RANK") << row;
    EXPECT_EQ(row["worldSizeFrom"]["variable"], "WORLD_SIZE") << row;
    EXPECT_EQ(row["launches"], 5) << row;
    EXPECT_EQ(row["distinctKernels"], 2) << row;  // axpy, reduce_sum
    EXPECT_EQ(row["ncclLaunches"], 0) << row;
    EXPECT_EQ(row["ncclVersion"], "unknown") << row;  // the recorder lists no libraries
    EXPECT_EQ(row["complete"], true) << row;
    EXPECT_EQ(row["captureMode"], "full") << row;
    ASSERT_EQ(row["devices"].size(), 1u) << row;
    EXPECT_EQ(row["devices"][0]["ordinal"], 0) << row;
    EXPECT_GT(row["pid"].get<int64_t>(), 0) << row;
  }
  EXPECT_TRUE(j["problems"].empty()) << j;
  EXPECT_TRUE(j["errors"].empty()) << j;
  EXPECT_EQ(j["divergence"]["differs"], false) << j;
  EXPECT_EQ(j["divergence"]["agreed"], 5) << j;
  EXPECT_TRUE(j["divergence"]["first"].is_null()) << j;

  const Outcome text = ranks({rank1, rank0});
  ASSERT_EQ(text.exitCode, kExitOk) << text.describe();
  EXPECT_TRUE(has(text.out, "all 2 ranks launched the same 5 kernels in the same order")) << text.out;
  EXPECT_TRUE(has(text.out, "Problems: none")) << text.out;
  EXPECT_LT(text.out.find(rank0), text.out.find(rank1)) << text.out;
}

TEST_F(RanksCli, NamesTheFirstLaunchWhereTheRanksDiffer) {
  // sequence: axpy x4, reduce_sum; checks: axpy, racy_sum, ...
  const std::string rank0 = asRank("sequence", 0, 2), rank1 = asRank("checks", 1, 2);
  const json j = ranksJson({rank0, rank1});
  const json& d = j["divergence"];
  EXPECT_EQ(d["differs"], true) << d;
  EXPECT_EQ(d["agreed"], 1) << d;
  ASSERT_EQ(d["first"].size(), 2u) << d;
  EXPECT_EQ(d["first"][0]["rank"], 0) << d;
  EXPECT_EQ(d["first"][0]["launchIndex"], 1) << d;
  EXPECT_EQ(d["first"][0]["kernel"], "axpy") << d;
  EXPECT_EQ(d["first"][1]["rank"], 1) << d;
  EXPECT_EQ(d["first"][1]["launchIndex"], 1) << d;
  EXPECT_EQ(d["first"][1]["kernel"], "racy_sum") << d;
  EXPECT_TRUE(j["problems"].empty()) << j;

  const Outcome text = ranks({rank0, rank1});
  ASSERT_EQ(text.exitCode, kExitOk) << text.describe();
  EXPECT_TRUE(has(text.out, "the ranks agree on the first 1 launch; then they differ:")) << text.out;
  EXPECT_TRUE(has(text.out, "axpy      " + rank0)) << text.out;
  EXPECT_TRUE(has(text.out, "racy_sum  " + rank1)) << text.out;

  // Different programs from the first launch on: nothing agreed.
  const json first = ranksJson({rank0, asRank("sequence-middle", 1, 2)});
  EXPECT_EQ(first["divergence"]["agreed"], 0) << first;
  EXPECT_EQ(first["divergence"]["first"][0]["kernel"], "axpy") << first;
  EXPECT_EQ(first["divergence"]["first"][1]["kernel"], "skip_rows") << first;
}

TEST_F(RanksCli, ARankThatLaunchedFewerKernelsHasEnded) {
  // pdl: three launches of axpy, the first three of sequence's.
  const std::string rank0 = asRank("sequence", 0, 2), rank1 = asRank("pdl", 1, 2);
  const json j = ranksJson({rank0, rank1});
  const json& d = j["divergence"];
  EXPECT_EQ(d["differs"], true) << d;
  EXPECT_EQ(d["agreed"], 3) << d;
  EXPECT_EQ(d["first"][0]["kernel"], "axpy") << d;
  EXPECT_EQ(d["first"][0]["launchIndex"], 3) << d;
  EXPECT_EQ(d["first"][1]["ended"], true) << d;
  EXPECT_TRUE(d["first"][1]["kernel"].is_null()) << d;

  const Outcome text = ranks({rank0, rank1});
  EXPECT_TRUE(has(text.out, "ended (3 launches)")) << text.out;
}

TEST_F(RanksCli, LaunchesCapturedIntoAGraphAreCompared) {
  // record_scenarios capture: four launches of one kernel, two of them into a
  // stream capturing into a graph.
  std::vector<std::string> paths;
  for (const int rank : {0, 1}) {
    const std::string path = file("capture-" + std::to_string(rank) + ".kcap");
    recordWithKcap(path, scenarioProgram(), {"capture"}, {{"RANK", std::to_string(rank)}, {"WORLD_SIZE", "2"}});
    paths.push_back(path);
  }
  const json j = ranksJson(paths);
  EXPECT_EQ(j["traces"][0]["launches"], 4) << j;
  EXPECT_EQ(j["divergence"]["differs"], false) << j;
  EXPECT_EQ(j["divergence"]["agreed"], 4) << j;
  EXPECT_EQ(j["divergence"]["capturedIncluded"], true) << j;
}

TEST_F(RanksCli, ARankClaimedTwiceAndARankMissing) {
  const std::string first = asRank("sequence", 0, 2), second = asRank("sequence", 0, 2, "-again");
  const json j = ranksJson({first, second});
  EXPECT_EQ(kinds(j), (std::vector<std::string>{"duplicateRank", "missingRanks"})) << j;
  EXPECT_EQ(j["problems"][0]["files"], (json{first, second})) << j;
  EXPECT_EQ(j["problems"][0]["message"], "rank 0 is claimed by 2 traces") << j;
  EXPECT_EQ(j["problems"][1]["message"], "world size 2, 1 rank present: missing rank 1") << j;

  const Outcome text = ranks({first, second});
  EXPECT_EQ(text.exitCode, kExitOk) << text.describe();
  EXPECT_TRUE(has(text.out, "rank 0 is claimed by 2 traces: " + first + ", " + second)) << text.out;
  EXPECT_TRUE(has(text.out, "world size 2, 1 rank present: missing rank 1")) << text.out;
}

TEST_F(RanksCli, FewerTracesThanTheWorldSizeAndWorldSizesThatDisagree) {
  const std::string rank0 = asRank("sequence", 0, 4), rank1 = asRank("sequence", 1, 4);
  const json fewer = ranksJson({rank0, rank1});
  EXPECT_EQ(kinds(fewer), (std::vector<std::string>{"missingRanks"})) << fewer;
  EXPECT_EQ(fewer["problems"][0]["message"], "world size 4, 2 ranks present: missing ranks 2, 3") << fewer;

  const json disagree = ranksJson({rank0, asRank("sequence", 1, 2)});
  EXPECT_EQ(kinds(disagree), (std::vector<std::string>{"worldSizeDisagrees"})) << disagree;
  EXPECT_EQ(disagree["problems"][0]["message"], "the traces disagree on the world size: 2 (1 trace), 4 (1 trace)")
      << disagree;
}

TEST_F(RanksCli, SlurmVariablesNameTheRankAndTheWorldSize) {
  const std::string rank0 = asRank("sequence", 0, 2);
  const std::string slurm = recordedWith("slurm-1.kcap", "sequence", {{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}});
  const json j = ranksJson({slurm, rank0});
  ASSERT_EQ(j["traces"].size(), 2u) << j;
  EXPECT_EQ(j["traces"][1]["rank"], 1) << j;
  EXPECT_EQ(j["traces"][1]["rankFrom"]["variable"], "SLURM_PROCID") << j;
  EXPECT_EQ(j["traces"][1]["worldSize"], 2) << j;
  EXPECT_EQ(j["traces"][1]["worldSizeFrom"]["variable"], "SLURM_NTASKS") << j;
  EXPECT_TRUE(j["problems"].empty()) << j;
}

TEST_F(RanksCli, ATruncatedTraceStillReportsAndAnUnreadableFileIsNamed) {
  const std::string rank0 = asRank("sequence", 0, 2);
  const std::vector<uint8_t> whole = kcap::test::readFileBytes(asRank("sequence", 1, 2));
  // Cut inside a record chunk, the latest that leaves some of the five
  // launches intact but not all (each launch is flushed on its own): the
  // trace has no traceEnd and ends inside a chunk.
  const std::string cut = file("cut-1.kcap");
  uint64_t intactLaunches = 0;
  for (const auto& chunk : kcap::test::walkChunks(whole).chunks) {
    if (chunk.kind != kcap::format::ChunkKind::kRecords) continue;
    const std::vector<uint8_t> bytes(whole.begin(),
                                     whole.begin() + static_cast<ptrdiff_t>((chunk.offset + chunk.end()) / 2));
    const std::string candidate = file("candidate.kcap");
    kcap::test::writeFileBytes(candidate, bytes);
    uint64_t launches = 0;
    for (const auto& owned : kcap::test::readAllEvents(candidate)) launches += owned.get().isLaunch() ? 1 : 0;
    if (launches > 0 && launches < 5) {
      kcap::test::writeFileBytes(cut, bytes);
      intactLaunches = launches;
    }
  }
  ASSERT_GT(intactLaunches, 0u);

  const std::string missing = file("no-such.kcap");
  const json j = ranksJson({cut, missing, rank0}, kExitTrace);
  ASSERT_EQ(j["traces"].size(), 2u) << j;
  const json& row = j["traces"][1];
  EXPECT_EQ(row["file"], cut) << row;
  EXPECT_EQ(row["rank"], 1) << row;
  EXPECT_EQ(row["launches"], intactLaunches) << row;
  EXPECT_EQ(row["complete"], false) << row;
  EXPECT_EQ(row["damaged"], true) << row;
  EXPECT_EQ(j["traces"][0]["complete"], true) << j;
  ASSERT_EQ(j["errors"].size(), 1u) << j;
  EXPECT_EQ(j["errors"][0]["file"], missing) << j;
  EXPECT_EQ(kinds(j), (std::vector<std::string>{"unreadable", "incomplete"})) << j;
  EXPECT_EQ(j["divergence"]["agreed"], intactLaunches) << j;

  const Outcome text = ranks({cut, missing, rank0});
  EXPECT_EQ(text.exitCode, kExitTrace) << text.describe();
  EXPECT_TRUE(has(text.err, "kcap ranks: " + missing + ": ")) << text.describe();
  EXPECT_TRUE(has(text.out, "no (damaged)")) << text.out;
  EXPECT_TRUE(has(text.out, cut + ": incomplete: no traceEnd")) << text.out;
}

}  // namespace
}  // namespace kcap_test
