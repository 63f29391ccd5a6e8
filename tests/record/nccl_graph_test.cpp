// An NCCL call captured into a CUDA graph (the decode graphs of
// tensor-parallel serving), recorded in checkpoint mode against the driver
// double and the stand-in for NCCL, and re-executed
// (tests/record/programs/nccl_graph.cpp). The captured call runs nothing;
// each launch of the graph runs its NCCL kernel, which adds what the other
// rank sent, from the communicator's own memory, which no checkpoint holds.
// The recorder captures a copy of what the call wrote right after its
// nodes, into memory of its own, and reads that back after each graph
// launch; re-execution writes those bytes in the copy's place and does not
// run the NCCL kernel.
#include "process_runner.h"

#include "trace_files.h"
#include "trace_reader.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace kcap_test {
namespace {

using kcap::schema::Event;
namespace schema = kcap::schema;

constexpr int kN = 1024;
constexpr int kLaunches = 3;

float peerValue(int i) { return static_cast<float>((i * 5) % 11); }
float programX(int i) { return static_cast<float>(i % 13); }

std::string ncclGraphProgram() { return ncclCollectivesProgram() + "_graph"; }

std::vector<float> floatsOf(const std::vector<uint8_t>& bytes) {
  std::vector<float> values(bytes.size() / sizeof(float));
  std::memcpy(values.data(), bytes.data(), values.size() * sizeof(float));
  return values;
}

// Records the program in checkpoint mode (a checkpoint at every launch, so
// that each interval holds a graph launch) after a plain run, and checks
// that its output did not change.
std::vector<kcap::test::OwnedEvent> recordGraph(const std::string& path, std::map<std::string, std::string> env = {},
                                                const std::vector<std::string>& args = {}) {
  const Outcome plain = run({ncclGraphProgram(), args, {}, false});
  EXPECT_EQ(plain.exitCode, 0) << plain.describe();
  EXPECT_NE(plain.out.find("result nccl_graph "), std::string::npos) << plain.describe();
  env["KCAP_OUTPUT"] = path;
  env["KCAP_MODE"] = "checkpoint";
  env["KCAP_CHECKPOINT_EVERY"] = "1launches";
  const Outcome shimmed = run({ncclGraphProgram(), args, env, true});
  EXPECT_EQ(shimmed.exitCode, 0) << shimmed.describe();
  EXPECT_EQ(shimmed.err, "") << shimmed.describe();
  EXPECT_EQ(shimmed.out, plain.out) << "the program's results under the shim";
  return kcap::test::readAllEvents(path);
}

TEST(NcclGraphRecord, EachGraphLaunchLogsWhatTheCapturedCallWrote) {
  kcap::test::TempDir dir("kcap-nccl-graph");
  const std::string path = dir.file("graph.kcap");
  const auto events = recordGraph(path);

  // The call: captured, with the slot its copy writes.
  const kcap::test::OwnedEvent* call = nullptr;
  for (const auto& e : events) {
    if (e.get().which() == Event::COLLECTIVE) {
      ASSERT_EQ(call, nullptr) << "one NCCL call";
      call = &e;
    }
  }
  ASSERT_NE(call, nullptr);
  const auto collective = call->get().getCollective();
  EXPECT_TRUE(collective.getCaptured());
  EXPECT_EQ(collective.getWritten(), kN * sizeof(float));
  EXPECT_EQ(collective.getData().getSize(), 0u);
  EXPECT_FALSE(collective.getDataDeferred());
  EXPECT_EQ(std::string(collective.getDataMissing().cStr()), "");
  const uint64_t slot = collective.getCapturedCopy();
  ASSERT_NE(slot, 0u);

  // The graph: axpy, the NCCL kernel, kcap's copy into the slot, axpy.
  const kcap::test::OwnedEvent* define = nullptr;
  for (const auto& e : events) {
    if (e.get().which() == Event::GRAPH_DEFINE) define = &e;
  }
  ASSERT_NE(define, nullptr);
  uint64_t copyNode = 0;
  int ncclKernels = 0;
  for (const auto node : define->get().getGraphDefine().getBody().getNodes()) {
    if (node.isKernel() && std::string(node.getKernel().getKernelName().cStr()) == "ncclDevKernel_StandInSum") {
      ++ncclKernels;
    }
    if (!node.getWrittenReadBack()) continue;
    ASSERT_TRUE(node.isMemcpy());
    EXPECT_EQ(copyNode, 0u) << "one copy node of kcap's";
    copyNode = node.getHandle();
    EXPECT_EQ(node.getMemcpy().getDst(), slot);
    EXPECT_EQ(node.getMemcpy().getSrc(), collective.getRecvBuffer());
    EXPECT_EQ(node.getMemcpy().getSize(), kN * sizeof(float));
  }
  EXPECT_EQ(ncclKernels, 1);
  ASSERT_NE(copyNode, 0u);

  // Each launch: the all-reduce's result at that launch, read back after it
  // (y before it is 1 + 4x + peer per earlier launch; the copy sees y after
  // the first axpy and the all-reduce, not the second axpy's).
  auto reader = kcap::format::TraceReader::open(path);
  int launch = 0;
  for (const auto& e : events) {
    if (e.get().which() != Event::GRAPH_LAUNCH) continue;
    const kcap::test::OwnedEvent* read = nullptr;
    for (const auto& w : events) {
      if (w.get().which() == Event::WRITTEN_DATA && w.get().getWrittenData().getOf() == e.get().getSeq()) {
        EXPECT_EQ(read, nullptr) << "one read-back per launch and node";
        read = &w;
      }
    }
    ASSERT_NE(read, nullptr) << "graph launch " << launch;
    const auto written = read->get().getWrittenData();
    EXPECT_GT(read->get().getSeq(), e.get().getSeq());
    EXPECT_EQ(written.getNode(), copyNode);
    EXPECT_EQ(std::string(written.getMissing().cStr()), "");
    const auto reduced = floatsOf(reader->readContent(written.getData()));
    ASSERT_EQ(reduced.size(), static_cast<size_t>(kN));
    for (int i = 0; i < kN; ++i) {
      const float before = 1 + static_cast<float>(launch) * (4 * programX(i) + peerValue(i));
      ASSERT_EQ(reduced[static_cast<size_t>(i)], before + 2 * programX(i) + peerValue(i))
          << "launch " << launch << ", element " << i;
    }
    ++launch;
  }
  EXPECT_EQ(launch, kLaunches);

  // The slot is kcap's: no checkpoint holds it.
  for (const auto& e : events) {
    if (e.get().which() != Event::CHECKPOINT) continue;
    for (const auto range : e.get().getCheckpoint().getRanges()) EXPECT_NE(range.getAddress(), slot);
  }

  const Outcome check = run({kcapBinary(), {"check", path}, {}, false});
  EXPECT_EQ(check.exitCode, 0) << check.describe();
  const Outcome info = run({kcapBinary(), {"info", path}, {}, false});
  EXPECT_NE(info.out.find("captured into graphs             1"), std::string::npos) << info.out;
  EXPECT_NE(info.out.find("read back at graph launches      3  12.0 KiB"), std::string::npos) << info.out;

  // Re-execution: every interval, graph launches included, reproduces; the
  // NCCL kernel is not run, and the captured call, inside the first
  // interval, is passed over (it ran nothing).
  size_t before = 0;
  for (const auto& e : events) {
    if (e.get().which() == Event::CHECKPOINT && e.get().getSeq() < call->get().getSeq()) ++before;
  }
  EXPECT_EQ(before, 1u) << "the capture lies inside the first interval";
  const Outcome replay = kcapOnDouble({"replay", path});
  EXPECT_EQ(replay.exitCode, 0) << replay.describe();
  EXPECT_NE(replay.out.find("intervals reproduced as recorded"), std::string::npos) << replay.describe();
  EXPECT_EQ(replay.out.find("NOT RE-EXECUTABLE"), std::string::npos) << replay.describe();
  EXPECT_EQ(replay.out.find("DIFFERS"), std::string::npos) << replay.describe();
  EXPECT_NE(replay.out.find("NCCL kernel nodes of graphs are not re-run"), std::string::npos) << replay.describe();
}

// Without its read-back memory (KCAP_READBACK=0) the recorder cannot read a
// graph launch's bytes after it: the call says why, and replay names the
// graph launches it cannot re-execute instead of running NCCL's kernel.
TEST(NcclGraphRecord, WithoutReadBackTheGraphIsNamedNotReexecutable) {
  kcap::test::TempDir dir("kcap-nccl-graph");
  const std::string path = dir.file("graph.kcap");
  const auto events = recordGraph(path, {{"KCAP_READBACK", "0"}});
  bool found = false;
  for (const auto& e : events) {
    if (e.get().which() != Event::COLLECTIVE) continue;
    found = true;
    EXPECT_EQ(e.get().getCollective().getCapturedCopy(), 0u);
    EXPECT_NE(std::string(e.get().getCollective().getDataMissing().cStr()).find("capturing into a CUDA graph"),
              std::string::npos);
  }
  EXPECT_TRUE(found);
  const Outcome replay = kcapOnDouble({"replay", path});
  EXPECT_NE(replay.out.find("NOT RE-EXECUTABLE"), std::string::npos) << replay.describe();
  EXPECT_NE(replay.out.find("an NCCL kernel (ncclDevKernel_StandInSum)"), std::string::npos) << replay.describe();
}

// Two graphs captured alike (a serving engine's decode graphs, one per
// batch size), launched by turns on two streams, the second with two calls
// half as large: its first call copies into the first graph's slot, its
// second into a slot of its own (both are live until the launch's
// read-back), and each launch logs each call's own result, as many bytes as
// that call wrote.
TEST(NcclGraphRecord, GraphsCapturedAlikeShareKcapsCopyMemory) {
  kcap::test::TempDir dir("kcap-nccl-graph");
  const std::string path = dir.file("two.kcap");
  const auto events = recordGraph(path, {}, {"two"});
  std::vector<uint64_t> slots;
  for (const auto& e : events) {
    if (e.get().which() != Event::COLLECTIVE) continue;
    EXPECT_TRUE(e.get().getCollective().getCaptured());
    slots.push_back(e.get().getCollective().getCapturedCopy());
  }
  ASSERT_EQ(slots.size(), 3u);
  EXPECT_NE(slots[0], 0u);
  EXPECT_EQ(slots[1], slots[0]) << "the second graph's first call reuses the first graph's slot";
  EXPECT_NE(slots[2], 0u);
  EXPECT_NE(slots[2], slots[1]) << "calls of one graph never share a slot";

  // Per launch of the half graph, w's first half gains 4x + 2 peer; its
  // first call's copy holds w after the first axpy and one all-reduce, the
  // second's after two. The full graph's one call: as in the test above.
  auto reader = kcap::format::TraceReader::open(path);
  std::map<uint64_t, int> launchesOf;  // graph exec -> launches so far
  std::vector<uint64_t> execs;         // in order of first launch: the full graph, then the half one
  for (const auto& e : events) {
    if (e.get().which() != Event::GRAPH_LAUNCH) continue;
    const uint64_t exec = e.get().getGraphLaunch().getGraphExec();
    if (launchesOf.count(exec) == 0) execs.push_back(exec);
    const int launch = launchesOf[exec]++;
    const bool full = exec == execs[0];
    const int n = full ? kN : kN / 2;
    const float calls = full ? 1.0f : 2.0f;
    int reads = 0;
    for (const auto& w : events) {
      if (w.get().which() != Event::WRITTEN_DATA || w.get().getWrittenData().getOf() != e.get().getSeq()) continue;
      ++reads;
      const auto reduced = floatsOf(reader->readContent(w.get().getWrittenData().getData()));
      ASSERT_EQ(reduced.size(), static_cast<size_t>(n)) << "the bytes its call wrote, not the slot's";
      const float reductions = static_cast<float>(reads);  // read-backs come in node order
      for (int i = 0; i < n; ++i) {
        const float before = 1 + static_cast<float>(launch) * (4 * programX(i) + calls * peerValue(i));
        ASSERT_EQ(reduced[static_cast<size_t>(i)], before + 2 * programX(i) + reductions * peerValue(i))
            << (full ? "full" : "half") << " graph, launch " << launch << ", read-back " << reads << ", element " << i;
      }
    }
    EXPECT_EQ(reads, full ? 1 : 2) << "graph launch #" << e.get().getSeq();
  }
  ASSERT_EQ(execs.size(), 2u);
  EXPECT_EQ(launchesOf[execs[0]], kLaunches);
  EXPECT_EQ(launchesOf[execs[1]], kLaunches);
  const Outcome info = run({kcapBinary(), {"info", path}, {}, false});
  EXPECT_NE(info.out.find("captured into graphs             3"), std::string::npos) << info.out;
  EXPECT_NE(info.out.find("through 2 copy slot(s)"), std::string::npos) << info.out;

  const Outcome replay = kcapOnDouble({"replay", path});
  EXPECT_EQ(replay.exitCode, 0) << replay.describe();
  EXPECT_NE(replay.out.find("intervals reproduced as recorded"), std::string::npos) << replay.describe();
  EXPECT_EQ(replay.out.find("NOT RE-EXECUTABLE"), std::string::npos) << replay.describe();
  EXPECT_EQ(replay.out.find("DIFFERS"), std::string::npos) << replay.describe();
}

// Two devices, each capturing an all-reduce into a graph of its own: a slot
// is device memory of the context that made it, so the second device's
// call gets a slot of its own although the first one's would fit.
TEST(NcclGraphRecord, SlotsAreNotSharedAcrossDevices) {
  kcap::test::TempDir dir("kcap-nccl-graph");
  const std::string path = dir.file("devices.kcap");
  const std::string program = ncclCollectivesProgram() + "_two_devices";
  const std::map<std::string, std::string> twoDevices = {{"KCAP_DOUBLE_DEVICES", "2"}};
  const Outcome plain = run({program, {"graphs"}, twoDevices, false});
  ASSERT_EQ(plain.exitCode, 0) << plain.describe();
  std::map<std::string, std::string> env = twoDevices;
  env["KCAP_OUTPUT"] = path;
  env["KCAP_MODE"] = "checkpoint";
  const Outcome shimmed = run({program, {"graphs"}, env, true});
  EXPECT_EQ(shimmed.exitCode, 0) << shimmed.describe();
  EXPECT_EQ(shimmed.out, plain.out);
  std::vector<uint64_t> slots;
  for (const auto& e : kcap::test::readAllEvents(path)) {
    if (e.get().which() != Event::COLLECTIVE) continue;
    EXPECT_TRUE(e.get().getCollective().getCaptured());
    slots.push_back(e.get().getCollective().getCapturedCopy());
  }
  ASSERT_EQ(slots.size(), 2u);
  EXPECT_NE(slots[0], 0u);
  EXPECT_NE(slots[1], 0u);
  EXPECT_NE(slots[1], slots[0]) << "device 1's call took device 0's slot";
}

}  // namespace
}  // namespace kcap_test
