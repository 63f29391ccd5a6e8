// Recording CUDA graphs against the driver double: an executable's nodes,
// edges and parameters when it is made (graphDefine), each change made to
// it (graphNodeUpdate), for a graph built node by node with every node type
// and for one made by stream capture; the program's output unchanged.
#include "process_runner.h"

#include "trace_files.h"
#include "trace_reader.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace kcap_test {
namespace {

using kcap::schema::Event;
namespace schema = kcap::schema;

constexpr unsigned kN = 1024;  // graph_scenarios' element count

class Recorded {
 public:
  Recorded(const std::string& scenario, const std::string& mode, std::map<std::string, std::string> env = {}) {
    path_ = dir_.file(scenario + ".kcap");
    env["KCAP_OUTPUT"] = path_;
    env["KCAP_MODE"] = mode;
    // The double linked as the real driver is (-Bsymbolic-functions): the
    // addresses cuGetProcAddress hands out are its own functions, not the
    // shim's exports.
    RunSpec plainSpec{graphProgram(), {scenario}, {}, false};
    plainSpec.libraryPath = symbolicDoubleDir();
    RunSpec shimmedSpec{graphProgram(), {scenario}, std::move(env), true};
    shimmedSpec.libraryPath = symbolicDoubleDir();
    const Outcome plain = run(plainSpec);
    const Outcome shimmed = run(shimmedSpec);
    EXPECT_EQ(plain.exitCode, 0) << plain.describe();
    EXPECT_EQ(shimmed.exitCode, 0) << shimmed.describe();
    EXPECT_EQ(shimmed.err, "") << shimmed.describe();
    EXPECT_EQ(shimmed.out, plain.out);
    EXPECT_NE(plain.out.find("result "), std::string::npos) << plain.describe();
    events_ = kcap::test::readAllEvents(path_);
    reader_ = kcap::format::TraceReader::open(path_);
  }
  std::vector<float> floats(schema::Content::Reader content) const {
    const std::vector<uint8_t> bytes = reader_->readContent(content);
    std::vector<float> out(bytes.size() / sizeof(float));
    std::memcpy(out.data(), bytes.data(), out.size() * sizeof(float));
    return out;
  }
  // The floats of the range of `ranges` at `address`; empty when none is.
  std::vector<float> floatsAt(capnp::List<schema::MemoryRange>::Reader ranges, uint64_t address) const {
    for (const auto range : ranges) {
      if (range.getAddress() == address) return floats(range.getContent());
    }
    return {};
  }
  std::vector<Event::Reader> of(Event::Which which) const {
    std::vector<Event::Reader> out;
    for (const auto& e : events_) {
      if (e.get().which() == which) out.push_back(e.get());
    }
    return out;
  }
  // Allocations in the order the program made them.
  uint64_t allocation(size_t i) const { return of(Event::ALLOC).at(i).getAlloc().getAddress(); }
  const std::string& path() const { return path_; }

 private:
  kcap::test::TempDir dir_{"kcap-graph"};
  std::string path_;
  std::vector<kcap::test::OwnedEvent> events_;
  std::unique_ptr<kcap::format::TraceReader> reader_;
};

std::vector<float> ramp(float scale) {
  std::vector<float> v(kN);
  for (unsigned i = 0; i < kN; ++i) v[i] = scale * static_cast<float>(i);
  return v;
}

float firstFloat(schema::Launch::Reader kernel) {
  float value = 0;
  const auto params = kernel.getParams();
  if (params.size() >= sizeof value) std::memcpy(&value, params.begin(), sizeof value);
  return value;
}

std::vector<uint64_t> pointerValues(schema::Launch::Reader kernel) {
  std::vector<uint64_t> out;
  for (const auto word : kernel.getPointers()) out.push_back(word.getValue());
  return out;
}

std::set<std::pair<uint32_t, uint32_t>> edgesOf(schema::GraphBody::Reader body) {
  std::set<std::pair<uint32_t, uint32_t>> out;
  for (const auto edge : body.getEdges()) out.emplace(edge.getFrom(), edge.getTo());
  return out;
}

// axpy(a, from, y, kN) as a kernel node: a, the pointer words, the shape.
void expectAxpy(schema::GraphNode::Reader node, float a, uint64_t from, uint64_t y) {
  ASSERT_EQ(node.which(), schema::GraphNode::KERNEL);
  const auto kernel = node.getKernel();
  EXPECT_EQ(std::string(kernel.getKernelName().cStr()), "axpy");
  EXPECT_EQ(kernel.getApi(), schema::LaunchApi::GRAPH_KERNEL_NODE);
  EXPECT_EQ(kernel.getGridX(), kN / 256);
  EXPECT_EQ(kernel.getBlockX(), 256u);
  EXPECT_EQ(firstFloat(kernel), a);
  EXPECT_EQ(pointerValues(kernel), (std::vector<uint64_t>{from, y}));
  for (const auto word : kernel.getPointers()) EXPECT_EQ(word.getAllocationBase(), word.getValue());
  EXPECT_EQ(kernel.getParamLayout().size(), 4u);
}

// `kcap replay` of a checkpoint trace on the driver double: every interval
// re-executed and reproduced, none differing.
void expectEveryIntervalReproduces(const std::string& trace) {
  const Outcome replay = kcapOnDouble({"replay", trace});
  EXPECT_EQ(replay.exitCode, 0) << replay.describe();
  EXPECT_NE(replay.out.find("intervals reproduced as recorded"), std::string::npos) << replay.describe();
  EXPECT_EQ(replay.out.find("DIFFER"), std::string::npos) << replay.describe();
}

// One executable of every node type the shim records, then changed.
class ExplicitGraph : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { recorded_ = new Recorded("explicit", "full"); }
  static void TearDownTestSuite() { delete recorded_; }
  static Recorded* recorded_;
};
Recorded* ExplicitGraph::recorded_ = nullptr;

TEST_F(ExplicitGraph, EveryNodeIsDescribedWithItsParameters) {
  const Recorded& r = *recorded_;
  const uint64_t x = r.allocation(0);
  const uint64_t y = r.allocation(1);
  const uint64_t z = r.allocation(2);
  const auto defines = r.of(Event::GRAPH_DEFINE);
  ASSERT_EQ(defines.size(), 2u);
  const auto define = defines[0].getGraphDefine();
  EXPECT_EQ(define.getApi(), schema::GraphDefineApi::INSTANTIATE);
  EXPECT_EQ(define.getResult(), 0);
  EXPECT_TRUE(define.getComplete());
  EXPECT_NE(define.getGraphExec(), 0u);
  EXPECT_NE(define.getGraph(), 0u);
  EXPECT_GE(define.getDevice(), 0);

  const auto nodes = define.getBody().getNodes();
  const std::vector<schema::GraphNode::Which> kinds = {
      schema::GraphNode::MEMSET,      schema::GraphNode::MEMCPY,     schema::GraphNode::KERNEL,
      schema::GraphNode::CHILD_GRAPH, schema::GraphNode::EMPTY,      schema::GraphNode::EVENT_RECORD,
      schema::GraphNode::EVENT_WAIT,  schema::GraphNode::HOST,       schema::GraphNode::MEM_ALLOC,
      schema::GraphNode::MEM_FREE,    schema::GraphNode::CONDITIONAL};
  ASSERT_EQ(nodes.size(), kinds.size());
  std::set<uint64_t> handles;
  for (unsigned i = 0; i < nodes.size(); ++i) {
    EXPECT_EQ(nodes[i].which(), kinds[i]) << "node " << i;
    EXPECT_TRUE(nodes[i].getEnabled());
    handles.insert(nodes[i].getHandle());
  }
  EXPECT_EQ(handles.size(), nodes.size());
  EXPECT_FALSE(handles.contains(0));

  const auto memset = nodes[0].getMemset();
  EXPECT_EQ(memset.getDst(), z);
  EXPECT_EQ(memset.getElementSize(), 4u);
  EXPECT_EQ(memset.getCount(), kN);
  EXPECT_EQ(memset.getHeight(), 1u);
  const auto copy = nodes[1].getMemcpy();
  EXPECT_EQ(copy.getDirection(), schema::CopyDirection::HOST_TO_DEVICE);
  EXPECT_EQ(copy.getDst(), z);
  EXPECT_EQ(copy.getSrc(), 0u);  // a host side is not an address replay can use
  EXPECT_EQ(copy.getSize(), kN * sizeof(float));
  EXPECT_FALSE(copy.hasData());
  expectAxpy(nodes[2], 1.0f, z, y);
  const auto child = nodes[3].getChildGraph();
  ASSERT_EQ(child.getNodes().size(), 1u);
  expectAxpy(child.getNodes()[0], 1.0f, x, y);

  const auto created = r.of(Event::SYNC);
  uint64_t event = 0;
  for (const auto e : created) {
    if (e.getSync().getOp() == schema::SyncKind::EVENT_CREATE) event = e.getSync().getEvent();
  }
  ASSERT_NE(event, 0u);
  EXPECT_EQ(nodes[5].getEventRecord(), event);
  EXPECT_EQ(nodes[6].getEventWait(), event);
  EXPECT_NE(nodes[7].getHost().getFunction(), 0u);
  EXPECT_EQ(nodes[8].getMemAlloc().getSize(), 4096u);
  EXPECT_NE(nodes[8].getMemAlloc().getAddress(), 0u);
  EXPECT_EQ(nodes[8].getMemAlloc().getDevice(), 0);
  EXPECT_EQ(nodes[9].getMemFree(), nodes[8].getMemAlloc().getAddress());

  const auto conditional = nodes[10].getConditional();
  EXPECT_NE(conditional.getHandle(), 0u);
  EXPECT_EQ(conditional.getType(), 0u);  // if
  EXPECT_EQ(conditional.getDefaultValue(), 1u);
  EXPECT_TRUE(conditional.getSetDefault());
  ASSERT_EQ(conditional.getBodies().size(), 1u);
  ASSERT_EQ(conditional.getBodies()[0].getNodes().size(), 1u);
  expectAxpy(conditional.getBodies()[0].getNodes()[0], 1.0f, x, y);

  std::set<std::pair<uint32_t, uint32_t>> chain;
  for (uint32_t i = 0; i + 1 < kinds.size(); ++i) chain.emplace(i, i + 1);
  EXPECT_EQ(edgesOf(define.getBody()), chain);
}

TEST_F(ExplicitGraph, ChangesToTheExecutableAreRecordedInOrder) {
  const Recorded& r = *recorded_;
  const uint64_t y = r.allocation(1);
  const uint64_t z = r.allocation(2);
  const auto defines = r.of(Event::GRAPH_DEFINE);
  ASSERT_EQ(defines.size(), 2u);
  const auto first = defines[0].getGraphDefine();
  const auto nodes = first.getBody().getNodes();
  ASSERT_EQ(nodes.size(), 11u);
  const uint64_t exec = first.getGraphExec();

  const auto updates = r.of(Event::GRAPH_NODE_UPDATE);
  ASSERT_EQ(updates.size(), 2u);
  const auto setParams = updates[0].getGraphNodeUpdate();
  EXPECT_EQ(setParams.getGraphExec(), exec);
  EXPECT_EQ(setParams.getApi(), schema::GraphUpdateApi::KERNEL_PARAMS);
  EXPECT_EQ(setParams.getResult(), 0);
  EXPECT_EQ(setParams.getNode(), nodes[2].getHandle());
  expectAxpy(setParams.getParams(), 2.0f, z, y);
  const auto enable = updates[1].getGraphNodeUpdate();
  EXPECT_EQ(enable.getApi(), schema::GraphUpdateApi::ENABLE);
  EXPECT_EQ(enable.getNode(), nodes[0].getHandle());
  EXPECT_FALSE(enable.getParams().getEnabled());

  const auto updated = defines[1].getGraphDefine();
  EXPECT_EQ(updated.getApi(), schema::GraphDefineApi::EXEC_UPDATE);
  EXPECT_EQ(updated.getGraphExec(), exec);
  EXPECT_NE(updated.getGraph(), first.getGraph());
  ASSERT_EQ(updated.getBody().getNodes().size(), 11u);
  expectAxpy(updated.getBody().getNodes()[2], 3.0f, z, y);
  // The copy's conditional node was made by cuGraphClone, not by a call the
  // shim saw: written unreadable, the definition incomplete, nothing guessed.
  EXPECT_FALSE(updated.getComplete());
  const auto copied = updated.getBody().getNodes()[10];
  ASSERT_EQ(copied.which(), schema::GraphNode::UNREADABLE);
  EXPECT_EQ(copied.getUnreadable().getType(), 13);  // CU_GRAPH_NODE_TYPE_CONDITIONAL
  EXPECT_NE(std::string(copied.getUnreadable().getWhy().cStr()).find("conditional"), std::string::npos);

  // Launches name the executable, each after what it runs was recorded.
  const auto launches = r.of(Event::GRAPH_LAUNCH);
  ASSERT_EQ(launches.size(), 4u);
  for (const auto launch : launches) EXPECT_EQ(launch.getGraphLaunch().getGraphExec(), exec);
  EXPECT_LT(defines[0].getSeq(), launches[0].getSeq());
  EXPECT_LT(updates[0].getSeq(), launches[1].getSeq());
  EXPECT_GT(updates[0].getSeq(), launches[0].getSeq());
  EXPECT_LT(updates[1].getSeq(), launches[2].getSeq());
  EXPECT_LT(defines[1].getSeq(), launches[3].getSeq());
  EXPECT_GT(defines[1].getSeq(), launches[2].getSeq());
}

// Full mode: the memory the nodes reach before each graph launch, after it,
// and what its host-source copy read.
TEST_F(ExplicitGraph, EachLaunchHoldsItsMemoryBeforeAndAfterAndItsHostCopy) {
  const Recorded& r = *recorded_;
  const uint64_t x = r.allocation(0);
  const uint64_t y = r.allocation(1);
  const uint64_t z = r.allocation(2);
  const uint64_t copyNode = r.of(Event::GRAPH_DEFINE)[0].getGraphDefine().getBody().getNodes()[1].getHandle();
  const auto launches = r.of(Event::GRAPH_LAUNCH);
  const auto ends = r.of(Event::GRAPH_LAUNCH_END);
  ASSERT_EQ(launches.size(), 4u);
  ASSERT_EQ(ends.size(), 4u);
  const float before[] = {2.0f, 14.0f, 36.0f, 58.0f};
  const float after[] = {14.0f, 36.0f, 58.0f, 90.0f};
  for (unsigned i = 0; i < 4; ++i) {
    const auto launch = launches[i].getGraphLaunch();
    const auto end = ends[i].getGraphLaunchEnd();
    EXPECT_EQ(launch.getGraphLaunchIndex(), i);
    EXPECT_EQ(end.getGraphLaunchIndex(), i);
    EXPECT_LT(launches[i].getSeq(), ends[i].getSeq());
    EXPECT_EQ(launch.getSyncResult(), 0);
    EXPECT_EQ(end.getResult(), 0);
    std::set<uint64_t> taken;
    for (const auto range : launch.getPre()) taken.insert(range.getAddress());
    EXPECT_TRUE(taken.contains(x) && taken.contains(y) && taken.contains(z)) << "launch " << i;
    EXPECT_EQ(r.floatsAt(launch.getPre(), y), ramp(before[i])) << "launch " << i;
    EXPECT_EQ(r.floatsAt(end.getPost(), y), ramp(after[i])) << "launch " << i;
    EXPECT_EQ(r.floatsAt(end.getPost(), z), ramp(10.0f)) << "launch " << i;
    ASSERT_EQ(launch.getHostCopies().size(), 1u);
    const auto copy = launch.getHostCopies()[0];
    // After the update the copy node is the copy graph's (its handle pairs).
    if (i < 3) {
      EXPECT_EQ(copy.getNode(), copyNode);
    }
    EXPECT_EQ(r.floats(copy.getData()), ramp(10.0f));
  }
}

TEST_F(ExplicitGraph, DumpShowsTheNodes) {
  const Outcome dump = kcapOnDouble({"dump", recorded_->path(), "--type", "graphDefine"});
  ASSERT_EQ(dump.exitCode, 0) << dump.describe();
  for (const char* text : {"graphDefine", "instantiate", "(11 nodes, 10 edges)", "2: kernel", "axpy", "conditional",
                           "memAlloc", "edges 0->1", "execUpdate"}) {
    EXPECT_NE(dump.out.find(text), std::string::npos) << text << "\n" << dump.out;
  }
}

// A graph made by stream capture: its nodes are the captured calls.
TEST(CapturedGraph, TheCapturedCallsAreItsNodes) {
  const Recorded r("captured", "metadata");
  const uint64_t y = r.allocation(1);
  const uint64_t z = r.allocation(2);
  const auto defines = r.of(Event::GRAPH_DEFINE);
  ASSERT_EQ(defines.size(), 1u);
  const auto define = defines[0].getGraphDefine();
  EXPECT_EQ(define.getApi(), schema::GraphDefineApi::INSTANTIATE_WITH_PARAMS);
  EXPECT_TRUE(define.getComplete());
  const auto nodes = define.getBody().getNodes();
  ASSERT_EQ(nodes.size(), 3u);
  EXPECT_EQ(nodes[0].which(), schema::GraphNode::MEMSET);
  EXPECT_EQ(nodes[1].which(), schema::GraphNode::MEMCPY);
  expectAxpy(nodes[2], 1.0f, z, y);
  EXPECT_EQ(edgesOf(define.getBody()), (std::set<std::pair<uint32_t, uint32_t>>{{0, 1}, {1, 2}}));
  const auto launches = r.of(Event::GRAPH_LAUNCH);
  ASSERT_EQ(launches.size(), 2u);
  for (const auto launch : launches) {  // metadata mode: after the call, with its result, nothing else
    EXPECT_EQ(launch.getGraphLaunch().getResult(), 0);
    EXPECT_EQ(launch.getGraphLaunch().getPre().size(), 0u);
    EXPECT_EQ(launch.getGraphLaunch().getHostCopies().size(), 0u);
  }
  EXPECT_EQ(r.of(Event::GRAPH_LAUNCH_END).size(), 0u);
}

// Checkpoint mode: no snapshots, but what host-source copies read, which
// re-execution cannot recompute.
TEST(CapturedGraph, CheckpointModeKeepsWhatItsHostCopyRead) {
  const Recorded r("captured", "checkpoint");
  const auto define = r.of(Event::GRAPH_DEFINE).at(0).getGraphDefine();
  const uint64_t copyNode = define.getBody().getNodes()[1].getHandle();
  const auto launches = r.of(Event::GRAPH_LAUNCH);
  ASSERT_EQ(launches.size(), 2u);
  for (const auto event : launches) {
    const auto launch = event.getGraphLaunch();
    EXPECT_EQ(launch.getPre().size(), 0u);
    ASSERT_EQ(launch.getHostCopies().size(), 1u);
    EXPECT_EQ(launch.getHostCopies()[0].getNode(), copyNode);
    EXPECT_EQ(r.floats(launch.getHostCopies()[0].getData()), ramp(10.0f));
  }
  EXPECT_EQ(r.of(Event::GRAPH_LAUNCH_END).size(), 0u);
}

// Copies and memsets made while their stream captures become nodes of the
// graph and write nothing then: the trace marks them captured, and
// re-execution leaves them to the graph's launch. A checkpoint between the
// capture and the launch (at the plain axpy) holds z as it was before the
// capture; running the captured memset and copy there made it differ.
TEST(CapturedGraph, CapturedCopiesAndMemsetsAreLeftToTheGraphsLaunch) {
  const Recorded r("captured-copy", "checkpoint", {{"KCAP_CHECKPOINT_EVERY", "1launches"}});
  const uint64_t z = r.allocation(2);
  size_t capturedOps = 0;
  for (const auto e : r.of(Event::MEMSET)) {
    EXPECT_EQ(e.getMemset().getDst(), z);
    EXPECT_TRUE(e.getMemset().getCaptured());
    ++capturedOps;
  }
  for (const auto e : r.of(Event::MEMCPY)) {
    const auto copy = e.getMemcpy();
    const bool inCapture = copy.getDirection() == schema::CopyDirection::DEVICE_TO_DEVICE;
    EXPECT_EQ(copy.getCaptured(), inCapture) << "event #" << e.getSeq();
    capturedOps += inCapture ? 1 : 0;
  }
  EXPECT_EQ(capturedOps, 2u);
  expectEveryIntervalReproduces(r.path());
}

// Stream-ordered allocations captured into a graph are the graph's memory:
// nothing exists until a launch makes it. The trace marks the allocation
// and the free captured (the graph's kernel node still finds its pointer
// into temp); each launch adds to the map what it leaves allocated (kept),
// so that a checkpoint between the two axpys that read it holds it and
// their pointer words find it, and the stream's free outside the graph
// names its size. Re-execution places the graph's memory
// at its recorded addresses and every interval reproduces.
TEST(CapturedGraph, AGraphsOwnMemoryIsTheProgramsWhileALaunchLeavesItAllocated) {
  const Recorded r("graph-memory", "checkpoint", {{"KCAP_CHECKPOINT_EVERY", "1launches"}});
  std::vector<uint64_t> graphMemory;
  for (const auto e : r.of(Event::ALLOC)) {
    if (e.getAlloc().getKind() != schema::AllocKind::ASYNC) continue;
    EXPECT_TRUE(e.getAlloc().getCaptured());
    EXPECT_EQ(e.getAlloc().getInitial().size(), 0u);
    EXPECT_FALSE(e.getAlloc().getInitialDeferred());
    graphMemory.push_back(e.getAlloc().getAddress());
  }
  ASSERT_EQ(graphMemory.size(), 2u);  // temp, kept
  const uint64_t temp = graphMemory[0];
  const uint64_t kept = graphMemory[1];
  size_t capturedFrees = 0, keptFrees = 0;
  for (const auto e : r.of(Event::FREE)) {
    const auto free = e.getFree();
    if (free.getCaptured()) {
      EXPECT_EQ(free.getAddress(), temp);
      ++capturedFrees;
    } else if (free.getAddress() == kept) {
      EXPECT_EQ(free.getSize(), 4096u) << "event #" << e.getSeq();  // the launch made it: the map knows it
      ++keptFrees;
    }
  }
  EXPECT_EQ(capturedFrees, 1u);
  EXPECT_EQ(keptFrees, 3u);
  // The graph's kernel node reads temp: its definition names the word.
  const auto nodes = r.of(Event::GRAPH_DEFINE).at(0).getGraphDefine().getBody().getNodes();
  std::set<uint64_t> kernelReads;
  for (const auto node : nodes) {
    if (!node.isKernel()) continue;
    for (const auto pointer : node.getKernel().getPointers()) kernelReads.insert(pointer.getAllocationBase());
  }
  EXPECT_EQ(kernelReads.count(temp), 1u);
  size_t readingKept = 0;
  for (const auto e : r.of(Event::LAUNCH)) {
    const auto launch = e.getLaunch();
    if (launch.getCapturing()) continue;
    ++readingKept;
    bool found = false;
    for (const auto pointer : launch.getPointers()) found = found || pointer.getAllocationBase() == kept;
    EXPECT_TRUE(found) << "launch #" << launch.getLaunchIndex() << " reads kept";
  }
  EXPECT_EQ(readingKept, 6u);
  size_t holdingKept = 0;
  for (const auto e : r.of(Event::CHECKPOINT)) {
    for (const auto range : e.getCheckpoint().getRanges()) holdingKept += range.getAddress() == kept ? 1 : 0;
  }
  EXPECT_GE(holdingKept, 3u);  // one between the two axpys of each launch
  expectEveryIntervalReproduces(r.path());
}

// A graph that frees memory allocated outside it: the captured free is
// marked and leaves the map alone, so that the checkpoint between the
// capture and the launch still holds buf; the launch's free node takes it
// out, so that the checkpoint after it does not. Every interval reproduces.
TEST(CapturedGraph, MemoryAGraphFreesIsTheProgramsUntilTheGraphRuns) {
  const Recorded r("graph-frees", "checkpoint", {{"KCAP_CHECKPOINT_EVERY", "1launches"}});
  std::optional<uint64_t> buf;
  for (const auto e : r.of(Event::ALLOC)) {
    if (e.getAlloc().getKind() == schema::AllocKind::ASYNC) buf = e.getAlloc().getAddress();
  }
  ASSERT_TRUE(buf.has_value());
  const auto frees = r.of(Event::FREE);
  ASSERT_EQ(frees.size(), 1u);
  EXPECT_TRUE(frees[0].getFree().getCaptured());
  EXPECT_EQ(frees[0].getFree().getAddress(), *buf);
  const auto graphLaunches = r.of(Event::GRAPH_LAUNCH);
  ASSERT_EQ(graphLaunches.size(), 1u);
  size_t before = 0, after = 0;
  for (const auto e : r.of(Event::CHECKPOINT)) {
    if (e.getSeq() < frees[0].getSeq()) continue;
    bool holdsBuf = false;
    for (const auto range : e.getCheckpoint().getRanges()) holdsBuf = holdsBuf || range.getAddress() == *buf;
    if (e.getSeq() < graphLaunches[0].getSeq()) {
      EXPECT_TRUE(holdsBuf) << "checkpoint at event #" << e.getSeq() << ", before the graph ran";
      ++before;
    } else {
      EXPECT_FALSE(holdsBuf) << "checkpoint at event #" << e.getSeq() << ", after the graph freed buf";
      ++after;
    }
  }
  EXPECT_GE(before, 1u);
  EXPECT_GE(after, 1u);
  expectEveryIntervalReproduces(r.path());
}

// A graph launched in full mode while another stream captures: the
// recorder synchronizes the graph's stream only (a context synchronization
// would invalidate the capture, and the program's cuStreamEndCapture fail).
TEST(GraphDuringCapture, AFullModeGraphLaunchLeavesACaptureElsewhereValid) {
  const Recorded r("during-capture", "full");
  const auto launches = r.of(Event::GRAPH_LAUNCH);
  const auto ends = r.of(Event::GRAPH_LAUNCH_END);
  ASSERT_EQ(launches.size(), 2u);
  ASSERT_EQ(ends.size(), 2u);
  const uint64_t y = r.allocation(1);
  EXPECT_EQ(r.floatsAt(launches[0].getGraphLaunch().getPre(), y), ramp(2.0f));
  EXPECT_EQ(r.floatsAt(ends[0].getGraphLaunchEnd().getPost(), y), ramp(3.0f));
  EXPECT_EQ(r.floatsAt(ends[1].getGraphLaunchEnd().getPost(), y), ramp(4.0f));
  EXPECT_EQ(r.of(Event::GRAPH_DEFINE).size(), 2u);
}

// A capture in each mode stays valid while full mode records, on another
// stream, a graph launch and a plain launch (each with its memory): the
// program's captures end and run as without the shim (Recorded compares).
TEST(GraphDuringCapture, EveryCaptureModeSurvivesFullModeRecording) {
  const Recorded r("capture-modes", "full");
  ASSERT_EQ(r.of(Event::GRAPH_LAUNCH).size(), 6u);  // per mode: the graph, then the captured one
  ASSERT_EQ(r.of(Event::GRAPH_LAUNCH_END).size(), 6u);
  size_t captured = 0, snapshotted = 0;
  for (const auto launch : r.of(Event::LAUNCH)) {
    if (launch.getLaunch().getCapturing()) {
      ++captured;
    } else if (launch.getLaunch().getPre().size() != 0) {
      ++snapshotted;
    }
  }
  EXPECT_EQ(captured, 3u);
  EXPECT_EQ(snapshotted, 3u);
}

// A graph instantiated for device launch: a kernel may launch it, which no
// host call shows, and the trace says so (once).
TEST(DeviceLaunchableGraph, TheTraceSaysItsLaunchesFromKernelsAreNotSeen) {
  const Recorded r("decode", "full");
  const auto defines = r.of(Event::GRAPH_DEFINE);
  ASSERT_EQ(defines.size(), 2u);
  EXPECT_EQ(defines[0].getGraphDefine().getFlags(), 4u);  // CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH
  EXPECT_EQ(defines[1].getGraphDefine().getFlags(), 0u);
  size_t notes = 0;
  for (const auto message : r.of(Event::MESSAGE)) {
    const std::string text = message.getMessage().getText().cStr();
    if (text.find("instantiated for device launch") != std::string::npos) ++notes;
  }
  EXPECT_EQ(notes, 1u);
  EXPECT_EQ(r.of(Event::GRAPH_LAUNCH).size(), 2u);
}

}  // namespace
}  // namespace kcap_test
