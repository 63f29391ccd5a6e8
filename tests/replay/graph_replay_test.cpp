// kcap replay of graph launches against the driver double: the scenarios of
// tests/record/programs/graph_scenarios.cpp recorded in full mode with
// `kcap record`, each graph launch's graph rebuilt and launched from its
// recorded memory and compared (or run node by node, --graph-nodes); a
// changed kernel build DIFFERS; damaged graphs are trace errors naming what
// is wrong; kcap info counts the graphs.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "recorded_traces.h"

namespace kcap_test {
namespace {

namespace schema = kcap::schema;

constexpr int kExitOk = 0;
constexpr int kExitTrace = 1;
constexpr int kExitUsage = 2;
constexpr int kExitDiffers = 3;

class GraphReplay : public RecordedTraces<GraphReplay> {
 protected:
  // graph_scenarios SCENARIO, recorded in full mode (kcap record's default).
  static std::string graph(const std::string& scenario) {
    return recorded("graph-" + scenario + ".kcap", graphProgram(), {scenario});
  }
  // The same, with every event passed to `change` first.
  static std::string damaged(const std::string& scenario, const std::string& name,
                             const std::function<bool(schema::Event::Builder)>& change) {
    const std::string path = file(name + ".kcap");
    EXPECT_NE(kcap::test::rewriteEvents(graph(scenario), path, change), 0u) << "nothing changed in " << scenario;
    return path;
  }
};

Outcome replay(const std::vector<std::string>& args) {
  std::vector<std::string> all{"replay"};
  all.insert(all.end(), args.begin(), args.end());
  return kcapOnDouble(all);
}

// The verdict line of graph launch N ("graph launch N (exec ...): VERDICT...").
std::string lineOf(const Outcome& run, uint64_t index) {
  const std::string start = "graph launch " + std::to_string(index) + " (exec 0x";
  const size_t at = run.out.find(start);
  if (at == std::string::npos) return "";
  return run.out.substr(at, run.out.find('\n', at) - at);
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST_F(GraphReplay, EveryNodeTypeIsRebuiltAndTheLaunchesReproduce) {
  const Outcome run = replay({graph("explicit")});
  // The fourth launch runs the definition cuGraphExecUpdate made from a
  // clone, whose conditional node the shim cannot read: not replayable, and
  // the verdict names the node (or, once it can, reproduced).
  const bool lastReplayable = has(lineOf(run, 3), "REPRODUCED");
  EXPECT_EQ(run.exitCode, lastReplayable ? kExitOk : kExitTrace) << run.describe();
  for (uint64_t i = 0; i < 3; ++i) {
    const std::string line = lineOf(run, i);
    EXPECT_TRUE(has(line,
                    "13 nodes: 3 kernels, 1 child graph, 1 conditional, 1 empty, 1 event record, "
                    "1 event wait, 1 host, 1 memAlloc, 1 memFree, 1 memcpy, 1 memset): REPRODUCED, 3 ranges "
                    "compared: node 7: a host function, not called"))
        << line << "\n"
        << run.describe();
  }
  const std::string last = lineOf(run, 3);
  EXPECT_TRUE(has(last, "REPRODUCED") || has(last, "ERROR: NOT REPLAYABLE: node 10 was not recorded")) << last;
  EXPECT_TRUE(has(run.out, "4 graph launches:")) << run.describe();
}

TEST_F(GraphReplay, CapturedUpdatedAndConditionalGraphsReproduce) {
  for (const std::string scenario : {"captured", "updated", "while"}) {
    const Outcome run = replay({graph(scenario)});
    EXPECT_EQ(run.exitCode, kExitOk) << scenario << "\n" << run.describe();
    EXPECT_TRUE(has(run.out, "Verdict: all 2 graph launches reproduced bit-exactly as recorded.")) << scenario << "\n"
                                                                                                   << run.describe();
  }
  // After cuGraphExecUpdate the kernel node was changed through the first
  // graph's handle: the second launch runs a = 4 (y += 40i), which only the
  // update applied to the updated definition reproduces.
  const Outcome updated = replay({graph("updated"), "--graph-launch", "1", "-v"});
  EXPECT_TRUE(has(lineOf(updated, 1), "3 nodes: 1 kernel, 1 memcpy, 1 memset): REPRODUCED, 2 ranges compared"))
      << updated.describe();
  EXPECT_TRUE(has(updated.out, "node 2 (axpy) param 2 (0x")) << updated.describe();
}

TEST_F(GraphReplay, AChangedKernelBuildDiffers) {
  const Outcome run =
      replay({graph("explicit"), "--graph-launch", "1", "--override", "axpy=" + kernelFile("axpy_changed.fatbin")});
  EXPECT_EQ(run.exitCode, kExitDiffers) << run.describe();
  EXPECT_TRUE(has(lineOf(run, 1), "DIFFERS, 3 ranges compared, 1 differ")) << run.describe();
  EXPECT_TRUE(has(run.out, "node 2 (axpy) param 2 (0x")) << run.describe();
  EXPECT_TRUE(has(run.out, "alone: kcap replay " + graph("explicit") + " --graph-launch 1")) << run.describe();
}

TEST_F(GraphReplay, RelocatedMemoryReproduces) {
  const Outcome run = replay({graph("explicit"), "--graph-launch", "0", "--no-fixed-va", "--json"});
  EXPECT_EQ(run.exitCode, kExitOk) << run.describe();
  EXPECT_TRUE(has(run.out, "\"memory\":\"relocated\"")) << run.describe();
  EXPECT_TRUE(has(run.out, "\"graphLaunchIndex\":0")) << run.describe();
  EXPECT_TRUE(has(run.out, "\"verdict\":\"REPRODUCED\"")) << run.describe();
  EXPECT_TRUE(has(run.out, "\"launches\":[]")) << run.describe();
}

TEST_F(GraphReplay, NodeByNode) {
  const Outcome run = replay({graph("explicit"), "--graph-launch", "0", "--graph-nodes"});
  EXPECT_EQ(run.exitCode, kExitOk) << run.describe();
  for (const std::string line : {"  node 0 (memset): ran\n", "  node 1 (memcpy): ran\n", "  node 2 (axpy): ran\n",
                                 "  node 3 (child graph): its nodes:\n", "  node 3 > node 0 (axpy): ran\n",
                                 "  node 7 (host function): a host function, not called\n",
                                 "  node 8 (memAlloc): ran\n", "  node 9 (memFree): ran\n",
                                 "  node 10 (conditional): condition 1 (its default, which no kernel sets): body 0:\n",
                                 "  node 10 > body 0 > node 0 (axpy): ran\n"}) {
    EXPECT_TRUE(has(run.out, line)) << line << run.describe();
  }
  EXPECT_TRUE(has(lineOf(run, 0), "REPRODUCED, 3 ranges compared")) << run.describe();

  // The memset node disabled at the third launch is not run.
  const Outcome disabled = replay({graph("explicit"), "--graph-launch", "2", "--graph-nodes"});
  EXPECT_TRUE(has(disabled.out, "  node 0 (memset): disabled, not run\n")) << disabled.describe();
  EXPECT_TRUE(has(lineOf(disabled, 2), "REPRODUCED")) << disabled.describe();

  // A condition a kernel sets on the GPU cannot be followed node by node.
  const Outcome loop = replay({graph("while"), "--graph-launch", "0", "--graph-nodes"});
  EXPECT_EQ(loop.exitCode, kExitTrace) << loop.describe();
  EXPECT_TRUE(has(lineOf(loop, 0),
                  "ERROR: NOT REPLAYABLE: node 0 is a conditional node whose condition is set on "
                  "the GPU"))
      << loop.describe();
}

TEST_F(GraphReplay, SelectionUsage) {
  const Outcome missing = replay({graph("captured"), "--graph-launch", "9"});
  EXPECT_EQ(missing.exitCode, kExitUsage) << missing.describe();
  EXPECT_TRUE(has(missing.err, "graph launch 9 is not in")) << missing.describe();
  const Outcome both = replay({graph("captured"), "--graph-nodes", "--launch", "0"});
  EXPECT_EQ(both.exitCode, kExitUsage) << both.describe();
  EXPECT_TRUE(has(both.err, "--graph-nodes runs graph launches node by node")) << both.describe();
}

TEST_F(GraphReplay, AHostSourceCopyWithoutItsBytesIsNotReplayable) {
  const std::string path = damaged("captured", "no-host-copies", [](schema::Event::Builder e) {
    if (!e.isGraphLaunch() || e.getGraphLaunch().getHostCopies().size() == 0) return false;
    e.getGraphLaunch().initHostCopies(0);
    return true;
  });
  const Outcome run = replay({path, "--graph-launch", "0"});
  EXPECT_EQ(run.exitCode, kExitTrace) << run.describe();
  EXPECT_TRUE(has(lineOf(run, 0),
                  "ERROR: NOT REPLAYABLE: node 1 (memcpy) copies from host memory, and the trace "
                  "holds no bytes of it for this launch"))
      << run.describe();
}

TEST_F(GraphReplay, AGraphLaunchWithoutItsEndIsNotVerified) {
  const std::string path = damaged("captured", "no-end", [](schema::Event::Builder e) {
    if (!e.isGraphLaunchEnd()) return false;
    e.initMessage().setText("the end of a graph launch, removed");
    return true;
  });
  const Outcome run = replay({path});
  EXPECT_EQ(run.exitCode, kExitOk) << run.describe();
  EXPECT_TRUE(has(lineOf(run, 0), "RAN (not verified): the trace has no end of this graph launch")) << run.describe();
  EXPECT_FALSE(has(run.out, "REPRODUCED")) << run.describe();
}

// Damaged definitions: each a trace error naming what is wrong, no crash.
TEST_F(GraphReplay, DamagedDefinitionsAreTraceErrors) {
  struct Case {
    std::string name;
    std::function<void(schema::GraphBody::Builder)> damage;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"edge-past-the-nodes", [](schema::GraphBody::Builder b) { b.getEdges()[0].setTo(200); },
       "edge 0 joins node 0 to node 200, of 3 nodes"},
      {"cycle",
       [](schema::GraphBody::Builder b) {
         b.getEdges()[0].setFrom(2);
         b.getEdges()[0].setTo(1);
       },
       "the graph: its edges make a cycle"},
      {"too-deep",
       [](schema::GraphBody::Builder b) {
         auto nested = b.getNodes()[0].initChildGraph();
         for (int depth = 0; depth < 16; ++depth) nested = nested.initNodes(1)[0].initChildGraph();
       },
       "graphs nested deeper than 16"},
      {"if-with-three-bodies", [](schema::GraphBody::Builder b) { b.getNodes()[0].initConditional().initBodies(3); },
       "node 0: a conditional node of type 0 with 3 bodies (if: 1 or 2, while: 1, switch: at least 1)"},
  };
  for (const Case& c : cases) {
    const std::string path = damaged("captured", c.name, [&](schema::Event::Builder e) {
      if (!e.isGraphDefine()) return false;
      c.damage(e.getGraphDefine().getBody());
      return true;
    });
    const Outcome run = replay({path});
    EXPECT_EQ(run.signal, 0) << c.name << "\n" << run.describe();
    EXPECT_EQ(run.exitCode, kExitTrace) << c.name << "\n" << run.describe();
    EXPECT_TRUE(has(lineOf(run, 0), "ERROR: graph launch 0 (graphDefine #")) << c.name << "\n" << run.describe();
    EXPECT_TRUE(has(lineOf(run, 0), c.expected)) << c.name << "\n" << run.describe();
  }
}

// Checkpoint mode: an interval's graph launches are re-executed, their
// graphs rebuilt at the recorded addresses with the host copies logged with
// each launch, and the interval verified at the next checkpoint.
TEST_F(GraphReplay, CheckpointIntervalsReexecuteTheirGraphLaunches) {
  const auto checkpointTrace = [&](const std::string& scenario) {
    const std::string path = file("checkpoint-" + scenario + ".kcap");
    const Outcome recording =
        run({graphProgram(), {scenario}, {{"KCAP_OUTPUT", path}, {"KCAP_MODE", "checkpoint"}}, true});
    EXPECT_EQ(recording.exitCode, 0) << recording.describe();
    return path;
  };
  for (const std::string scenario : {"updated", "while"}) {
    const Outcome run = replay({checkpointTrace(scenario)});
    EXPECT_EQ(run.exitCode, kExitOk) << scenario << "\n" << run.describe();
    EXPECT_TRUE(has(run.out, "interval 0 (no launches, checkpoint 0 -> 1): REPRODUCED (")) << run.describe();
    EXPECT_TRUE(has(run.out, "Verdict: all 1 intervals reproduced as recorded.")) << run.describe();
  }
  // The cloned graph's conditional node was not recorded: the interval says
  // which graph launch and node stop it.
  const Outcome explicitRun = replay({checkpointTrace("explicit")});
  EXPECT_TRUE(has(explicitRun.out, "REPRODUCED (") ||
              (has(explicitRun.out, "NOT RE-EXECUTABLE (graph launch at event #") &&
               has(explicitRun.out, ": node 10 was not recorded")))
      << explicitRun.describe();
}

TEST_F(GraphReplay, InfoCountsTheGraphs) {
  const Outcome text = kcapOnDouble({"info", graph("explicit")});
  EXPECT_EQ(text.exitCode, kExitOk) << text.describe();
  EXPECT_TRUE(has(text.out, "Graphs (1 executables, 4 graph launches, 4 with their memory)")) << text.describe();
  const Outcome json = kcapOnDouble({"info", "--json", graph("while")});
  EXPECT_TRUE(has(json.out, "\"nodesByKind\":{\"conditional\":1,\"kernel\":2}")) << json.describe();
  EXPECT_TRUE(has(json.out, "\"launches\":2,\"launchesWithMemory\":2")) << json.describe();
}

}  // namespace
}  // namespace kcap_test
