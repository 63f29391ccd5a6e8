// `kcap bisect` end to end, without a GPU (ctest label "bisect"): programs
// recorded against the driver double, bisected with KCAP_LIBCUDA naming the
// double. The double runs a changed host implementation of axpy for images
// built from kernels/axpy_changed.cu (y[100]'s lowest bit flipped), which is
// what the override searches must find.
#include "process_runner.h"
#include "recorded_traces.h"
#include "trace_files.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <map>
#include <string>
#include <vector>

namespace kcap_test {
namespace {

constexpr int kExitOk = 0, kExitTrace = 1, kExitUsage = 2, kExitDiverges = 3;

Outcome kcap(const std::vector<std::string>& args) { return kcapOnDouble(args); }

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

class Bisect : public RecordedTraces<Bisect> {
 protected:
  // replay_scenarios sequence: axpy x4, reduce_sum, each reading the last one's output.
  static std::string sequence() { return scenario("sequence"); }
  static std::string changedAxpy() { return "override:axpy=" + kernelFile("axpy_changed.fatbin"); }
  // graph_scenarios decode: launch 0 axpy over 100 elements; graph launch 0
  // (that axpy); graph launch 1 (that axpy -> axpy over all 1024).
  static std::string decode() { return recorded("graph-decode.kcap", graphProgram(), {"decode"}); }
};

TEST_F(Bisect, AgainstTheRecordingEveryLaunchAgrees) {
  const Outcome run = kcap({"bisect", directLaunch(), "--json"});
  EXPECT_EQ(run.exitCode, kExitOk) << run.describe();
  EXPECT_TRUE(has(run.out, "\"first\":null")) << run.out;
  EXPECT_TRUE(has(run.out, "\"examined\":6,")) << run.out;
  const Outcome text = kcap({"bisect", directLaunch()});
  EXPECT_TRUE(has(text.out, "No launch diverges: all 6 compared launches agree.")) << text.describe();
}

TEST_F(Bisect, AChangedBuildDivergesAtTheFirstAxpyWithTheChangedByte) {
  const Outcome run = kcap({"bisect", directLaunch(), "--against", changedAxpy(), "--json"});
  ASSERT_EQ(run.exitCode, kExitDiverges) << run.describe();
  EXPECT_TRUE(has(run.out, "\"first\":{\"launchIndex\":0,\"kernel\":\"axpy\",\"verdict\":\"DIFFERS\"")) << run.out;
  // y (param 2) differs in exactly one byte, at element 100.
  EXPECT_TRUE(has(run.out, "\"label\":\"param 2\",")) << run.out;
  EXPECT_TRUE(has(run.out, "\"differingBytes\":1,\"firstDifferingOffset\":400")) << run.out;
  EXPECT_TRUE(has(run.out, "\"examined\":1,")) << run.out;  // found in the first launch compared
  EXPECT_TRUE(has(run.out, "--launch 0 --override 'axpy=" + kernelFile("axpy_changed.fatbin") + "'")) << run.out;

  const Outcome text = kcap({"bisect", directLaunch(), "--against", changedAxpy(), "--dtype", "f32"});
  EXPECT_EQ(text.exitCode, kExitDiverges);
  EXPECT_TRUE(has(text.out, "First divergent launch: 0 (axpy), grid (4,1,1), block (256,1,1)")) << text.out;
  EXPECT_TRUE(has(text.out, "param 3: offset 24, 4 bytes = 0x3e8 (int 1000")) << text.out;  // n
  EXPECT_TRUE(has(text.out, "1 of 4,000 bytes differ, first at offset 400 (0x190); as f32: 1 of 1000 elements differ"))
      << text.out;
  EXPECT_TRUE(has(text.out, "max ulp 1")) << text.out;
}

TEST_F(Bisect, KernelSelectionLimitsTheSearch) {
  // Only reduce_sum: the axpy override never applies, nothing diverges.
  const Outcome run =
      kcap({"bisect", directLaunch(), "--against", changedAxpy(), "--kernel", "^reduce_sum$", "--json"});
  EXPECT_EQ(run.exitCode, kExitOk) << run.describe();
  EXPECT_TRUE(has(run.out, "\"first\":null")) << run.out;
  EXPECT_TRUE(has(run.out, "\"examined\":1,")) << run.out;
  // From launch 1 on, the first axpy compared is launch 1.
  const Outcome later = kcap({"bisect", directLaunch(), "--against", changedAxpy(), "--range", "1..5", "--json"});
  EXPECT_EQ(later.exitCode, kExitDiverges) << later.describe();
  EXPECT_TRUE(has(later.out, "\"first\":{\"launchIndex\":1,")) << later.out;
}

TEST_F(Bisect, ASequenceIsBisectedOverPrefixes) {
  // Against the recording, one pass: every launch reproduces.
  const Outcome same = kcap({"bisect", sequence(), "--sequence", "--json"});
  EXPECT_EQ(same.exitCode, kExitOk) << same.describe();
  EXPECT_TRUE(has(same.out, "\"first\":null")) << same.out;

  // Between two builds: bisection over prefixes finds the first axpy of the range.
  const Outcome run = kcap({"bisect", sequence(), "--sequence", "--against", changedAxpy(), "--json"});
  ASSERT_EQ(run.exitCode, kExitDiverges) << run.describe();
  EXPECT_TRUE(has(run.out, "\"first\":{\"launchIndex\":0,\"kernel\":\"axpy\"")) << run.out;
  EXPECT_TRUE(has(run.out, "--range 0..0 --override")) << run.out;
  // 5 launches: the whole sequence, then log2 steps down to the first.
  EXPECT_TRUE(has(run.out, "\"probes\":4,")) << run.out;

  const Outcome later =
      kcap({"bisect", sequence(), "--sequence", "--range", "2..4", "--against", changedAxpy(), "--json"});
  EXPECT_EQ(later.exitCode, kExitDiverges) << later.describe();
  EXPECT_TRUE(has(later.out, "\"first\":{\"launchIndex\":2,")) << later.out;
  EXPECT_TRUE(has(later.out, "--range 2..2 --override")) << later.out;

  // A side that cannot replay a launch of the sequence stops the search with a reason.
  const Outcome broken = kcap(
      {"bisect", sequence(), "--sequence", "--against", "override:reduce_sum=" + kernelFile("axpy_changed.fatbin")});
  EXPECT_EQ(broken.exitCode, kExitTrace) << broken.describe();
  EXPECT_TRUE(has(broken.err, "cannot be replayed with the override build")) << broken.err;
  EXPECT_TRUE(has(broken.err, "kernel reduce_sum not found")) << broken.err;
}

// The first divergence in the middle of the range: a search that does not
// halve toward it (or stops at the range's ends) names another launch.
TEST_F(Bisect, ASequenceDivergingInTheMiddleIsBisectedToIt) {
  const std::string trace = scenario("sequence-middle");
  const Outcome same = kcap({"bisect", trace, "--sequence", "--json"});
  EXPECT_EQ(same.exitCode, kExitOk) << same.describe();
  const Outcome run = kcap({"bisect", trace, "--sequence", "--against", changedAxpy(), "--json"});
  ASSERT_EQ(run.exitCode, kExitDiverges) << run.describe();
  EXPECT_TRUE(has(run.out, "\"first\":{\"launchIndex\":2,\"kernel\":\"axpy\"")) << run.out;
  EXPECT_TRUE(has(run.out, "--range 0..2 --override")) << run.out;
  // 5 launches: the whole sequence, then halving (the prefixes 0..2, 0..1, or as the search goes).
  EXPECT_TRUE(has(run.out, "\"probes\":")) << run.out;
}

TEST_F(Bisect, PerfListsLaunchesPastTheThreshold) {
  // Any time counts as slower than -1000%: every launch both sides ran is listed.
  const Outcome run = kcap({"bisect", directLaunch(), "--against", "force-ptx", "--perf", "--repeat", "2",
                            "--threshold", "-1000", "--json"});
  EXPECT_EQ(run.exitCode, kExitDiverges) << run.describe();
  // reduce_sum was loaded as a cubin: no PTX to force, so 5 of 6 are timed.
  EXPECT_TRUE(has(run.out, "\"timed\":5,")) << run.out;
  EXPECT_TRUE(has(run.out, "\"slower\":[{\"launchIndex\":0,\"kernel\":\"axpy\"")) << run.out;
  // Against the recording there is nothing to time with: no recorded durations.
  const Outcome recorded = kcap({"bisect", directLaunch(), "--perf", "--repeat", "2"});
  EXPECT_EQ(recorded.exitCode, kExitTrace) << recorded.describe();
  EXPECT_TRUE(has(recorded.out, "record with `kcap record --timing`")) << recorded.out;
}

// A divergent graph launch is descended into: its nodes run one by one on
// each side, and the first kernel node whose outputs differ is named. The
// launch and the graph launch before it, and the node before it, agree (the
// changed axpy differs from element 100 on, which they do not reach).
TEST_F(Bisect, ADivergentGraphLaunchNamesItsFirstDivergentNode) {
  const Outcome same = kcap({"bisect", decode(), "--json"});
  EXPECT_EQ(same.exitCode, kExitOk) << same.describe();
  EXPECT_TRUE(has(same.out, "\"examined\":3,")) << same.out;
  EXPECT_TRUE(has(same.out, "\"graphLaunchesExamined\":2")) << same.out;

  const Outcome run = kcap({"bisect", decode(), "--against", changedAxpy(), "--json"});
  ASSERT_EQ(run.exitCode, kExitDiverges) << run.describe();
  EXPECT_TRUE(has(run.out, "\"first\":{\"launchIndex\":null,\"graphLaunchIndex\":1,\"kernel\":\"axpy\"")) << run.out;
  EXPECT_TRUE(has(run.out, "\"nodesAgreeing\":[\"node 0 (axpy)\"]")) << run.out;
  EXPECT_TRUE(has(run.out, "\"node\":{\"index\":1,\"path\":\"node 1\",\"ordinal\":1,\"kernel\":\"axpy\"")) << run.out;
  // y (param 2) differs in one byte, at element 100; launch 0 and graph launch 0 agreed first.
  EXPECT_TRUE(has(run.out, "\"label\":\"param 2\",")) << run.out;
  EXPECT_TRUE(has(run.out, "\"differingBytes\":1,\"firstDifferingOffset\":400")) << run.out;
  EXPECT_TRUE(has(run.out, "\"examined\":3,")) << run.out;
  EXPECT_TRUE(has(run.out, "\"graphLaunchesExamined\":2")) << run.out;
  EXPECT_TRUE(has(run.out, "\"descent\":\"\"")) << run.out;
  EXPECT_TRUE(
      has(run.out, "--graph-launch 1 --override 'axpy=" + kernelFile("axpy_changed.fatbin") + "' --graph-nodes"))
      << run.out;

  const Outcome text = kcap({"bisect", decode(), "--against", changedAxpy()});
  EXPECT_EQ(text.exitCode, kExitDiverges) << text.describe();
  EXPECT_TRUE(has(text.out, "1 launches and 2 graph launches, each from its recorded pre-state")) << text.out;
  EXPECT_TRUE(has(text.out, "First divergent launch: graph launch 1 node 1 (kernel axpy)\n")) << text.out;
  EXPECT_TRUE(has(text.out, "    node 0 (axpy): outputs agree\n    node 1 (axpy): DIFFERS\n")) << text.out;
  EXPECT_TRUE(has(text.out, "  node 1: grid (4,1,1), block (256,1,1)")) << text.out;
  EXPECT_TRUE(has(text.out, "param 3: offset 24, 4 bytes = 0x400 (int 1024")) << text.out;  // n
  EXPECT_TRUE(has(text.out, "1 of 4,096 bytes differ, first at offset 400")) << text.out;
  EXPECT_TRUE(has(text.out, "3 of 3 launches (graph launches included) compared before it was found.")) << text.out;

  // Against the recording the graph launch is named, not descended into:
  // the trace holds no memory between its nodes. (Graph launch 1 damaged
  // to say it was refused: here it runs, which differs.)
  const std::string refused = file("graph-decode-refused.kcap");
  ASSERT_NE(kcap::test::rewriteEvents(decode(), refused,
                                      [](kcap::schema::Event::Builder e) {
                                        if (!e.isGraphLaunchEnd() || e.getGraphLaunchEnd().getGraphLaunchIndex() != 1)
                                          return false;
                                        e.getGraphLaunchEnd().setResult(700);
                                        return true;
                                      }),
            0u);
  const Outcome againstRecording = kcap({"bisect", refused, "--json"});
  EXPECT_EQ(againstRecording.exitCode, kExitDiverges) << againstRecording.describe();
  EXPECT_TRUE(has(againstRecording.out, "\"first\":{\"launchIndex\":null,\"graphLaunchIndex\":1,\"kernel\":null"))
      << againstRecording.out;
  EXPECT_TRUE(has(againstRecording.out,
                  "\"descent\":\"the recording holds the graph launch's memory before and after it, not "
                  "after each node"))
      << againstRecording.out;
  EXPECT_TRUE(has(againstRecording.out, "\"examined\":3,")) << againstRecording.out;

  // --kernel selects plain launches only: launch 0 agrees.
  const Outcome kernels = kcap({"bisect", decode(), "--against", changedAxpy(), "--kernel", "axpy", "--json"});
  EXPECT_EQ(kernels.exitCode, kExitOk) << kernels.describe();
  EXPECT_TRUE(has(kernels.out, "\"graphLaunchesExamined\":0")) << kernels.out;

  // A loop whose condition a kernel sets cannot run node by node: the graph
  // launch is named, with why no node is.
  const std::string loop = recorded("graph-while.kcap", graphProgram(), {"while"});
  const Outcome unnamed = kcap({"bisect", loop, "--against", changedAxpy(), "--json"});
  EXPECT_EQ(unnamed.exitCode, kExitDiverges) << unnamed.describe();
  EXPECT_TRUE(has(unnamed.out, "\"first\":{\"launchIndex\":null,\"graphLaunchIndex\":0,\"kernel\":null"))
      << unnamed.out;
  EXPECT_TRUE(has(unnamed.out, "\"node\":null")) << unnamed.out;
  EXPECT_TRUE(has(unnamed.out,
                  "its nodes cannot be run one by one, so no node is named: NOT REPLAYABLE: node 0 is a "
                  "conditional node whose condition is set on the GPU"))
      << unnamed.out;
}

TEST_F(Bisect, UsageErrorsAndMissingDevices) {
  const std::string trace = directLaunch();
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"--against", "sideways"},
           {"--against", "override:axpy"},
           {"--devices", "0,0"},
           {"--devices", "0"},
           {"--devices", "0,1", "--against", "force-ptx"},  // side B's other build: an override only
           {"--range", "5..2"},
           {"--kernel", "no_such_kernel"},
           {"--tolerance", "1e-3"},
       }) {
    std::vector<std::string> all = {"bisect", trace};
    all.insert(all.end(), args.begin(), args.end());
    const Outcome run = kcap(all);
    EXPECT_EQ(run.exitCode, kExitUsage) << run.describe();
    EXPECT_TRUE(has(run.err, "kcap bisect: ")) << run.err;
  }
  // The double has one GPU.
  const Outcome two = kcap({"bisect", trace, "--devices", "0,1"});
  EXPECT_EQ(two.exitCode, kExitTrace) << two.describe();
  EXPECT_TRUE(has(two.err, "--device 1: this machine has 1 GPU(s)")) << two.err;
}

// Two devices (the double told to have two): each side's replay process
// says which device its context was on, and the report says so per side;
// a build that differs on side B must diverge, or a test of two GPUs
// could pass by comparing a device with itself.
TEST_F(Bisect, TwoDevicesRunOneSideEachAndAnOverrideOnOneSideDiverges) {
  const std::string trace = directLaunch();
  const std::map<std::string, std::string> two = {{"KCAP_DOUBLE_DEVICES", "2"}};
  const Outcome same = kcapOnDouble({"bisect", trace, "--devices", "0,1", "--json"}, two);
  EXPECT_EQ(same.exitCode, kExitOk) << same.describe();
  EXPECT_TRUE(has(same.out, R"("devices":{"sideA":{"ordinal":0,"name":"kcap driver double","pciBusId":"0000:3b:00.0"},)"
                            R"("sideB":{"ordinal":1,"name":"kcap driver double","pciBusId":"0000:3c:00.0"}})"))
      << same.out;
  EXPECT_TRUE(has(same.out, "\"examined\":6,\"notComparable\":0,")) << same.out;
  EXPECT_TRUE(has(same.out, "\"first\":null")) << same.out;

  const Outcome text = kcapOnDouble({"bisect", trace, "--devices", "1,0"}, two);
  EXPECT_EQ(text.exitCode, kExitOk) << text.describe();
  EXPECT_TRUE(has(text.out,
                  "side A ran on GPU 1 (kcap driver double, PCI 0000:3c:00.0), side B on GPU 0 "
                  "(kcap driver double, PCI 0000:3b:00.0)"))
      << text.out;

  const Outcome differs =
      kcapOnDouble({"bisect", trace, "--devices", "0,1", "--against", changedAxpy(), "--json"}, two);
  EXPECT_EQ(differs.exitCode, kExitDiverges) << differs.describe();
  EXPECT_TRUE(has(differs.out, R"("first":{"launchIndex":0,"kernel":"axpy","verdict":"DIFFERS")")) << differs.out;
  EXPECT_TRUE(has(differs.out, "\"sideB\":\"GPU 1 with the override build ")) << differs.out;
  EXPECT_TRUE(has(differs.out, "--device 1 --override 'axpy=")) << differs.out;
}

// A bisect in which no launch replayed on both sides compared nothing: it
// must not say that no launch diverges, nor exit 0.
TEST_F(Bisect, NothingComparedIsNotAnAgreement) {
  const std::string trace = file("metadata.kcap");
  recordWithKcap(trace, interposeProgram("direct_launch"), {}, {{"KCAP_MODE", "metadata"}});
  const Outcome run = kcapOnDouble({"bisect", trace, "--devices", "0,1"}, {{"KCAP_DOUBLE_DEVICES", "2"}});
  EXPECT_EQ(run.exitCode, kExitTrace) << run.describe();
  EXPECT_TRUE(has(run.out, "Nothing compared: no launch replayed on both sides")) << run.out;
  EXPECT_FALSE(has(run.out, "No launch diverges")) << run.out;
}

}  // namespace
}  // namespace kcap_test
