// What a graph launch runs (TraceModel::graphRun) and the graph made again
// from it (RebuiltGraph), on traces written by the test: the newest
// definition with the updates since, handles paired after cuGraphExecUpdate,
// and a rebuilt graph run in this process against the driver double, whose
// conditional handle and allocation node get values other than the recorded
// ones.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "driver.h"
#include "graph_rebuild.h"
#include "process_runner.h"
#include "trace_files.h"
#include "trace_model.h"

namespace kcap_test {
namespace {

namespace schema = kcap::schema;
using kcap::replay::GraphRun;
using kcap::replay::TraceModel;

constexpr uint64_t kExec = 0xe0;

// A trace written event by event, then read back as replay reads it.
class Trace {
 public:
  Trace() {
    add([](schema::Event::Builder e) { e.initTraceBegin().setCaptureMode(schema::CaptureMode::FULL); });
  }
  // Adds an event; returns its seq.
  uint64_t add(const std::function<void(schema::Event::Builder)>& fill) {
    capnp::MallocMessageBuilder message;
    auto event = message.initRoot<schema::Event>();
    event.setSeq(events_.size());
    fill(event);
    events_.push_back(kcap::test::eventBytes(event.asReader()));
    return events_.size() - 1;
  }
  const TraceModel& load() {
    const std::string path = dir_.file("graph.kcap");
    kcap::test::writeFileBytes(path, kcap::test::buildUncompressedTrace(events_, {}, 4, true));
    reader_ = kcap::format::TraceReader::open(path);
    model_ = std::make_unique<TraceModel>(TraceModel::load(*reader_));
    return *model_;
  }
  kcap::format::TraceReader& reader() { return *reader_; }

 private:
  kcap::test::TempDir dir_{"kcap-graph-rebuild"};
  std::vector<std::vector<uint8_t>> events_;
  std::unique_ptr<kcap::format::TraceReader> reader_;
  std::unique_ptr<TraceModel> model_;
};

// A kernel node named `name` whose first parameter byte is `tag`.
void kernelNode(schema::GraphNode::Builder node, uint64_t handle, uint8_t tag) {
  node.setHandle(handle);
  auto kernel = node.initKernel();
  kernel.setKernelName("tagged");
  const uint8_t params[8] = {tag};
  kernel.setParams(capnp::Data::Reader(params, sizeof params));
}

uint8_t tagOf(const kcap::replay::GraphNodeRun& node) { return node.params.getKernel().getParams()[0]; }

void graphLaunch(schema::Event::Builder e, uint64_t index) {
  auto launch = e.initGraphLaunch();
  launch.setGraphExec(kExec);
  launch.setGraphLaunchIndex(index);
}

TEST(GraphModel, TheNewestDefinitionWithTheUpdatesSince) {
  Trace t;
  t.add([](schema::Event::Builder e) {
    auto d = e.initGraphDefine();
    d.setGraphExec(kExec);
    d.setComplete(true);
    auto nodes = d.initBody().initNodes(2);
    kernelNode(nodes[0], 0x10, 1);
    nodes[1].setHandle(0x11);
    nodes[1].setEmpty();
    auto edge = d.getBody().initEdges(1)[0];
    edge.setFrom(0);
    edge.setTo(1);
  });
  const uint64_t update = t.add([](schema::Event::Builder e) {
    auto u = e.initGraphNodeUpdate();
    u.setGraphExec(kExec);
    u.setNode(0x10);
    u.setApi(schema::GraphUpdateApi::KERNEL_PARAMS);
    kernelNode(u.initParams(), 0x10, 2);
  });
  t.add([](schema::Event::Builder e) { graphLaunch(e, 0); });
  t.add([](schema::Event::Builder e) {
    auto u = e.initGraphNodeUpdate();
    u.setGraphExec(kExec);
    u.setNode(0x11);
    u.setApi(schema::GraphUpdateApi::ENABLE);
    u.initParams().setEnabled(false);
  });
  t.add([](schema::Event::Builder e) {  // a failed update changes nothing
    auto u = e.initGraphNodeUpdate();
    u.setGraphExec(kExec);
    u.setNode(0x10);
    u.setResult(1);
    kernelNode(u.initParams(), 0x10, 9);
  });
  t.add([](schema::Event::Builder e) { graphLaunch(e, 1); });
  const TraceModel& model = t.load();
  ASSERT_EQ(model.graphLaunchRecords().size(), 2u);

  const GraphRun first = model.graphRun(*model.graphLaunch(0));
  ASSERT_EQ(first.root.nodes.size(), 2u);
  EXPECT_EQ(tagOf(first.root.nodes[0]), 2);
  EXPECT_EQ(first.root.nodes[0].source->seq(), update);
  EXPECT_TRUE(first.root.nodes[1].enabled);
  EXPECT_EQ(first.updates, 1u);
  EXPECT_EQ(kcap::replay::topologicalOrder(first.root, "the graph"), (std::vector<size_t>{0, 1}));

  const GraphRun second = model.graphRun(*model.graphLaunch(1));
  EXPECT_EQ(tagOf(second.root.nodes[0]), 2);
  EXPECT_FALSE(second.root.nodes[1].enabled);
  EXPECT_EQ(second.updates, 2u);
  // The kernel node resolves as a launch, named by its place in the graph.
  const auto launch = kcap::replay::graphNodeLaunch(second.root.nodes[0], 1);
  EXPECT_EQ(launch.event().getParams()[0], 2);
  EXPECT_EQ(launch.label, "graph launch 1, node 0");
}

// After cuGraphExecUpdate a later update may name a node by the handle of
// the graph first instantiated: nodes pair by position, nested ones too.
TEST(GraphModel, AnUpdateAfterExecUpdateNamesANodeByTheFirstGraphsHandle) {
  Trace t;
  const auto define = [&](schema::GraphDefineApi api, uint64_t base) {
    t.add([&](schema::Event::Builder e) {
      auto d = e.initGraphDefine();
      d.setGraphExec(kExec);
      d.setApi(api);
      d.setComplete(true);
      auto node = d.initBody().initNodes(1)[0];
      node.setHandle(base);
      auto child = node.initChildGraph().initNodes(1);
      kernelNode(child[0], base + 1, static_cast<uint8_t>(base));
    });
  };
  define(schema::GraphDefineApi::INSTANTIATE, 0x20);
  define(schema::GraphDefineApi::EXEC_UPDATE, 0x40);
  t.add([](schema::Event::Builder e) {
    auto u = e.initGraphNodeUpdate();
    u.setGraphExec(kExec);
    u.setNode(0x21);  // the first graph's nested kernel node
    u.setApi(schema::GraphUpdateApi::KERNEL_PARAMS);
    kernelNode(u.initParams(), 0x21, 7);
  });
  t.add([](schema::Event::Builder e) { graphLaunch(e, 0); });
  t.add([](schema::Event::Builder e) {
    auto u = e.initGraphNodeUpdate();
    u.setGraphExec(kExec);
    u.setNode(0x99);
    u.setApi(schema::GraphUpdateApi::KERNEL_PARAMS);
  });
  t.add([](schema::Event::Builder e) { graphLaunch(e, 1); });
  const TraceModel& model = t.load();

  const GraphRun run = model.graphRun(*model.graphLaunch(0));
  const auto& nested = run.root.nodes.at(0).bodies.at(0).nodes.at(0);
  EXPECT_EQ(nested.path, "node 0 > node 0");
  EXPECT_EQ(tagOf(nested), 7);
  EXPECT_EQ(nested.handles, (std::vector<uint64_t>{0x41, 0x21}));

  try {
    model.graphRun(*model.graphLaunch(1));
    FAIL() << "an update of a node the definition lacks was applied";
  } catch (const kcap::replay::ReplayError& e) {
    EXPECT_NE(std::string(e.what()).find("graph launch 1: graphNodeUpdate #5 changes node 0x99, which graphDefine #2 "
                                         "does not hold"),
              std::string::npos)
        << e.what();
  }
}

TEST(GraphModel, ALaunchWithoutADefinitionSaysSo) {
  Trace t;
  t.add([](schema::Event::Builder e) { graphLaunch(e, 0); });
  const TraceModel& model = t.load();
  EXPECT_THROW(
      {
        try {
          model.graphRun(*model.graphLaunch(0));
        } catch (const kcap::replay::ReplayError& e) {
          EXPECT_NE(std::string(e.what()).find("graph launch 0: no graphDefine of executable 0xe0 before it"),
                    std::string::npos)
              << e.what();
          throw;
        }
      },
      kcap::replay::ReplayError);
}

// ---- the rebuild, run by the driver double in this process ----------------------------

// graph_set_condition(handle, const unsigned* value): the double's host
// version sets the handle to *value.
constexpr char kConditionPtx[] =
    ".version 8.0\n.target sm_90\n.address_size 64\n"
    ".visible .entry graph_set_condition(.param .u64 p0, .param .u64 p1)\n{\n\tret;\n}\n";

class GraphRebuild : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("KCAP_LIBCUDA", (doubleDir() + "/libcuda.so.1").c_str(), 1);
    d_ = &kcap::replay::driver();
    CUdevice device = 0;
    ASSERT_EQ(d_->cuDeviceGet(&device, 0), CUDA_SUCCESS);
    ASSERT_EQ(d_->cuDevicePrimaryCtxRetain(&context_, device), CUDA_SUCCESS);
    ASSERT_EQ(d_->cuCtxSetCurrent(context_), CUDA_SUCCESS);
    ASSERT_EQ(d_->cuModuleLoadDataEx(&module_, kConditionPtx, 0, nullptr, nullptr), CUDA_SUCCESS);
    ASSERT_EQ(d_->cuModuleGetFunction(&setCondition_, module_, "graph_set_condition"), CUDA_SUCCESS);
  }
  void TearDown() override {
    for (const CUdeviceptr p : buffers_) d_->cuMemFree(p);
    if (module_ != nullptr) d_->cuModuleUnload(module_);
  }
  // Device memory holding `value`.
  CUdeviceptr buffer(unsigned value) {
    CUdeviceptr p = 0;
    EXPECT_EQ(d_->cuMemAlloc(&p, 256), CUDA_SUCCESS);
    EXPECT_EQ(d_->cuMemsetD32Async(p, value, 64, nullptr), CUDA_SUCCESS);
    EXPECT_EQ(d_->cuCtxSynchronize(), CUDA_SUCCESS);
    buffers_.push_back(p);
    return p;
  }
  unsigned read(CUdeviceptr p) {
    unsigned value = 0;
    EXPECT_EQ(d_->cuMemcpyDtoHAsync(&value, p, sizeof value, nullptr), CUDA_SUCCESS);
    EXPECT_EQ(d_->cuCtxSynchronize(), CUDA_SUCCESS);
    return value;
  }
  kcap::replay::GraphRebuildContext context(Trace& t, std::map<uint64_t, CUdeviceptr> placed) {
    kcap::replay::GraphRebuildContext c;
    c.driver = d_;
    c.context = context_;
    c.reader = &t.reader();
    c.translate = [placed](uint64_t recorded) -> std::optional<uint64_t> {
      for (const auto& [at, p] : placed) {
        if (recorded >= at && recorded - at < 256) return p + (recorded - at);
      }
      return std::nullopt;
    };
    c.kernel = [this](const kcap::replay::GraphNodeRun& node) {
      const auto params = node.params.getKernel().getParams();
      return kcap::replay::KernelNodeCode{setCondition_, std::vector<uint8_t>(params.begin(), params.end())};
    };
    return c;
  }

  kcap::replay::Driver* d_ = nullptr;
  CUcontext context_ = nullptr;
  CUmodule module_ = nullptr;
  CUfunction setCondition_ = nullptr;
  std::vector<CUdeviceptr> buffers_;
};

// Recorded addresses of the trace below.
constexpr uint64_t kOne = 0x100000;        // placed: holds 1
constexpr uint64_t kOut = 0x200000;        // placed: the output
constexpr uint64_t kOut2 = 0x300000;       // placed: a disabled memset's target
constexpr uint64_t kHandle = 0x4242;       // the recorded conditional handle
constexpr uint64_t kGraphMemory = 0x5000;  // where the allocation node's memory was

void memsetNode(schema::GraphNode::Builder node, uint64_t handle, uint64_t dst, uint32_t value) {
  node.setHandle(handle);
  auto set = node.initMemset();
  set.setDst(dst);
  set.setValue(value);
  set.setElementSize(4);
  set.setCount(1);
  set.setHeight(1);
}

// allocation (kGraphMemory) -> copy kOne into it -> graph_set_condition(kHandle,
// kGraphMemory) -> if (kHandle, default 0): memset kOut = 7 -> free; a host
// node; a disabled memset of kOut2 = 5.
uint64_t conditionalGraph(Trace& t, uint64_t decoy) {
  return t.add([&](schema::Event::Builder e) {
    auto d = e.initGraphDefine();
    d.setGraphExec(kExec);
    d.setComplete(true);
    auto body = d.initBody();
    auto nodes = body.initNodes(7);
    nodes[0].setHandle(0x1);
    auto alloc = nodes[0].initMemAlloc();
    alloc.setAddress(decoy != 0 ? decoy : kGraphMemory);
    alloc.setSize(256);
    nodes[1].setHandle(0x2);
    auto copy = nodes[1].initMemcpy();
    copy.setDirection(schema::CopyDirection::DEVICE_TO_DEVICE);
    copy.setSrc(kOne);
    copy.setDst(alloc.getAddress());
    copy.setSize(4);
    nodes[2].setHandle(0x3);
    auto kernel = nodes[2].initKernel();
    kernel.setKernelName("graph_set_condition");
    kernel.setGridX(1), kernel.setGridY(1), kernel.setGridZ(1);
    kernel.setBlockX(1), kernel.setBlockY(1), kernel.setBlockZ(1);
    uint64_t params[2] = {kHandle, alloc.getAddress()};
    kernel.setParams(capnp::Data::Reader(reinterpret_cast<const uint8_t*>(params), sizeof params));
    auto layout = kernel.initParamLayout(2);
    layout[0].setOffset(0), layout[0].setSize(8);
    layout[1].setOffset(8), layout[1].setSize(8);
    auto word = kernel.initPointers(1)[0];
    word.setOffset(8);
    word.setValue(alloc.getAddress());
    nodes[3].setHandle(0x4);
    auto conditional = nodes[3].initConditional();
    conditional.setHandle(kHandle);
    conditional.setType(0);
    conditional.setSetDefault(true);
    memsetNode(conditional.initBodies(1)[0].initNodes(1)[0], 0x41, kOut, 7);
    nodes[4].setHandle(0x5);
    nodes[4].setMemFree(alloc.getAddress());
    nodes[5].setHandle(0x6);
    nodes[5].initHost();
    memsetNode(nodes[6], 0x7, kOut2, 5);
    nodes[6].setEnabled(false);
    auto edges = body.initEdges(4);
    for (uint32_t i = 0; i < 4; ++i) {
      edges[i].setFrom(i);
      edges[i].setTo(i + 1);
    }
  });
}

TEST_F(GraphRebuild, ConditionalHandlesAndGraphMemoryAreMadeAgain) {
  const CUdeviceptr one = buffer(1), out = buffer(0), out2 = buffer(0);
  // The recorded allocation's address is real memory holding 0 here: a
  // pointer word not moved to the new allocation reads 0, and the if
  // node's body does not run.
  const CUdeviceptr decoy = buffer(0);
  Trace t;
  conditionalGraph(t, decoy);
  t.add([](schema::Event::Builder e) { graphLaunch(e, 0); });
  const TraceModel& model = t.load();
  const GraphRun run = model.graphRun(*model.graphLaunch(0));
  EXPECT_EQ(kcap::replay::graphNodeSummary(run.root),
            "8 nodes: 1 kernel, 1 conditional, 1 host, 1 memAlloc, 1 memFree, 1 memcpy, 2 memsets");
  const auto c = context(t, {{kOne, one}, {kOut, out}, {kOut2, out2}});
  kcap::replay::RebuiltGraph graph(c, run);
  ASSERT_EQ(graph.notes().size(), 1u);
  EXPECT_EQ(graph.notes()[0], "node 5: a host function, not called (an empty node here)");
  ASSERT_EQ(d_->cuGraphLaunch(graph.exec(), nullptr), CUDA_SUCCESS);
  ASSERT_EQ(d_->cuCtxSynchronize(), CUDA_SUCCESS);
  EXPECT_EQ(read(out), 7u);   // the condition was set through the handle made here
  EXPECT_EQ(read(out2), 0u);  // the disabled node did nothing
  EXPECT_EQ(read(decoy), 0u);
}

TEST_F(GraphRebuild, WhatCannotBeMadeAgainIsNamed) {
  Trace t;
  t.add([](schema::Event::Builder e) {
    auto d = e.initGraphDefine();
    d.setGraphExec(kExec);
    d.setComplete(true);
    auto node = d.initBody().initNodes(1)[0];
    node.setHandle(0x1);
    auto copy = node.initMemcpy();
    copy.setDirection(schema::CopyDirection::HOST_TO_DEVICE);
    copy.setDst(kOut);
    copy.setSize(4);
  });
  t.add([](schema::Event::Builder e) { graphLaunch(e, 0); });
  t.add([](schema::Event::Builder e) {
    auto d = e.initGraphDefine();
    d.setGraphExec(kExec);
    auto nodes = d.initBody().initNodes(2);
    nodes[0].setEmpty();
    auto unreadable = nodes[1].initUnreadable();
    unreadable.setType(11);
    unreadable.setWhy("a node type kcap does not record");
  });
  t.add([](schema::Event::Builder e) { graphLaunch(e, 1); });
  const TraceModel& model = t.load();
  const CUdeviceptr out = buffer(0);
  const auto c = context(t, {{kOut, out}});
  const auto refused = [&](uint64_t index, const std::string& expected) {
    const GraphRun run = model.graphRun(*model.graphLaunch(index));
    try {
      kcap::replay::RebuiltGraph graph(c, run);
      ADD_FAILURE() << "graph launch " << index << " was rebuilt";
    } catch (const kcap::replay::NotReplayable& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
  };
  refused(0, "node 0 (memcpy) copies from host memory, and the trace holds no bytes of it for this launch");
  refused(1, "node 1 was not recorded (node type 11: a node type kcap does not record)");
}

}  // namespace
}  // namespace kcap_test
