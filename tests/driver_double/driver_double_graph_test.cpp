// The double's CUDA graphs, without the shim: every node type built
// explicitly, read back through the query API, instantiated and launched
// with the expected effect on memory; order by edges; child graphs,
// allocation nodes, conditional nodes; clones, executable updates, disabled
// nodes. Capture: driver_double_capture_test.cpp.
#include "driver_double_graph_fixture.h"

#include <cuda.h>
#include <gtest/gtest.h>

#include <cstring>
#include <utility>
#include <vector>

namespace {

using namespace kcap_double_test;

struct HostLog {
  std::vector<int> calls;
};
void logCall(void* data) {
  auto* entry = static_cast<std::pair<HostLog*, int>*>(data);
  entry->first->calls.push_back(entry->second);
}

TEST_F(DriverDoubleGraph, EveryBasicNodeTypeIsBuiltQueriedAndRun) {
  std::vector<float> host(kN, 0.5f);
  CUDA_MEMCPY3D up{};
  up.srcMemoryType = CU_MEMORYTYPE_HOST;
  up.srcHost = host.data();
  up.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  up.dstDevice = y_;
  up.WidthInBytes = kN * sizeof(float);
  up.Height = 1;
  up.Depth = 1;
  CUgraphNode copy = nullptr;
  ASSERT_EQ(cuGraphAddMemcpyNode(&copy, graph_, nullptr, 0, &up, context_), CUDA_SUCCESS);
  const CUgraphNode kernel = addAxpy(graph_, {copy}, 2.0f);
  a_ = 100.0f;  // the node copied its parameters when made
  HostLog log;
  std::pair<HostLog*, int> entry{&log, 7};
  CUDA_HOST_NODE_PARAMS hostParams{logCall, &entry};
  CUgraphNode hostNode = nullptr;
  ASSERT_EQ(cuGraphAddHostNode(&hostNode, graph_, &kernel, 1, &hostParams), CUDA_SUCCESS);
  CUevent event = nullptr;
  ASSERT_EQ(cuEventCreate(&event, 0), CUDA_SUCCESS);
  CUgraphNode record = nullptr, wait = nullptr, empty = nullptr;
  ASSERT_EQ(cuGraphAddEventRecordNode(&record, graph_, &hostNode, 1, event), CUDA_SUCCESS);
  ASSERT_EQ(cuGraphAddEventWaitNode(&wait, graph_, nullptr, 0, event), CUDA_SUCCESS);
  const CUgraphNode joins[] = {record, wait};
  ASSERT_EQ(cuGraphAddEmptyNode(&empty, graph_, joins, 2), CUDA_SUCCESS);
  const CUgraphNode memset = addFill(graph_, {empty}, x_, kOne);

  // Queries: types, edges, roots, neighbours, parameters.
  const std::vector<CUgraphNode> nodes = nodesOf(graph_);
  ASSERT_EQ(nodes.size(), 7u);
  const CUgraphNodeType types[] = {CU_GRAPH_NODE_TYPE_MEMCPY,     CU_GRAPH_NODE_TYPE_KERNEL,
                                   CU_GRAPH_NODE_TYPE_HOST,       CU_GRAPH_NODE_TYPE_EVENT_RECORD,
                                   CU_GRAPH_NODE_TYPE_WAIT_EVENT, CU_GRAPH_NODE_TYPE_EMPTY,
                                   CU_GRAPH_NODE_TYPE_MEMSET};
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    EXPECT_EQ(typeOf(nodes[i]), types[i]) << i;
  }
  const std::vector<std::pair<CUgraphNode, CUgraphNode>> edges = {
      {copy, kernel}, {kernel, hostNode}, {hostNode, record}, {record, empty}, {wait, empty}, {empty, memset}};
  EXPECT_EQ(edgesOf(graph_), edges);
  std::size_t count = 0;
  ASSERT_EQ(cuGraphGetEdges(graph_, nullptr, nullptr, &count), CUDA_SUCCESS);  // the older form
  EXPECT_EQ(count, 6u);
  CUgraphNode roots[3] = {};
  count = 3;
  ASSERT_EQ(cuGraphGetRootNodes(graph_, roots, &count), CUDA_SUCCESS);
  EXPECT_EQ(count, 2u);
  EXPECT_EQ(roots[0], copy);
  EXPECT_EQ(roots[1], wait);
  EXPECT_EQ(roots[2], nullptr);
  CUgraphNode deps[2] = {};
  count = 2;
  ASSERT_EQ(cuGraphNodeGetDependencies_v2(empty, deps, nullptr, &count), CUDA_SUCCESS);
  EXPECT_EQ(deps[0], record);
  EXPECT_EQ(deps[1], wait);
  count = 2;
  ASSERT_EQ(cuGraphNodeGetDependentNodes(copy, deps, &count), CUDA_SUCCESS);
  EXPECT_EQ(count, 1u);
  EXPECT_EQ(deps[0], kernel);

  CUDA_KERNEL_NODE_PARAMS k{};
  ASSERT_EQ(cuGraphKernelNodeGetParams_v2(kernel, &k), CUDA_SUCCESS);
  EXPECT_EQ(k.func, axpy_);
  EXPECT_EQ(k.blockDimX, static_cast<unsigned>(kN));
  ASSERT_NE(k.kernelParams, nullptr);
  EXPECT_EQ(*static_cast<float*>(k.kernelParams[0]), 2.0f);
  EXPECT_EQ(*static_cast<CUdeviceptr*>(k.kernelParams[2]), y_);
  EXPECT_EQ(*static_cast<int*>(k.kernelParams[3]), kN);
  CUDA_KERNEL_NODE_PARAMS_v1 old{};
  ASSERT_EQ(cuGraphKernelNodeGetParams(kernel, &old), CUDA_SUCCESS);
  EXPECT_EQ(old.func, axpy_);
  CUDA_MEMCPY3D gotCopy{};
  ASSERT_EQ(cuGraphMemcpyNodeGetParams(copy, &gotCopy), CUDA_SUCCESS);
  EXPECT_EQ(gotCopy.srcHost, host.data());
  EXPECT_EQ(gotCopy.dstDevice, y_);
  EXPECT_EQ(gotCopy.WidthInBytes, kN * sizeof(float));
  CUDA_MEMSET_NODE_PARAMS gotSet{};
  ASSERT_EQ(cuGraphMemsetNodeGetParams(memset, &gotSet), CUDA_SUCCESS);
  EXPECT_EQ(gotSet.dst, x_);
  EXPECT_EQ(gotSet.value, kOne);
  EXPECT_EQ(gotSet.elementSize, 4u);
  CUDA_HOST_NODE_PARAMS gotHost{};
  ASSERT_EQ(cuGraphHostNodeGetParams(hostNode, &gotHost), CUDA_SUCCESS);
  EXPECT_EQ(gotHost.fn, &logCall);
  EXPECT_EQ(gotHost.userData, &entry);
  CUevent gotEvent = nullptr;
  ASSERT_EQ(cuGraphEventRecordNodeGetEvent(record, &gotEvent), CUDA_SUCCESS);
  EXPECT_EQ(gotEvent, event);
  ASSERT_EQ(cuGraphEventWaitNodeGetEvent(wait, &gotEvent), CUDA_SUCCESS);
  EXPECT_EQ(gotEvent, event);
  EXPECT_EQ(cuGraphMemsetNodeGetParams(kernel, &gotSet), CUDA_ERROR_INVALID_VALUE);  // wrong type

  // Run: y = 2 * x + 0.5, the host node called once, then x = 1.
  float ms = 0;
  EXPECT_EQ(cuEventElapsedTime(&ms, event, event), CUDA_ERROR_INVALID_HANDLE);  // not recorded yet
  launch(graph_);
  const std::vector<float> got = y();
  for (int i = 0; i < kN; ++i) {
    ASSERT_EQ(got[static_cast<std::size_t>(i)], 2.0f * static_cast<float>(i) + 0.5f) << i;
  }
  EXPECT_EQ(log.calls, std::vector<int>{7});
  EXPECT_EQ(cuEventElapsedTime(&ms, event, event), CUDA_SUCCESS);  // the record node ran
  float x0 = 0;
  ASSERT_EQ(cuMemcpyDtoH(&x0, x_ + 4, sizeof x0), CUDA_SUCCESS);
  EXPECT_EQ(x0, 1.0f);
  EXPECT_EQ(cuEventDestroy(event), CUDA_SUCCESS);
}

// Made first, the kernel still runs after the memset it depends on: the
// order follows the edges, not creation.
TEST_F(DriverDoubleGraph, NodesRunInAnOrderThatRespectsEdges) {
  const CUgraphNode kernel = addAxpy(graph_, {}, 3.0f);
  const CUgraphNode fill = addFill(graph_, {}, y_, kOne);
  ASSERT_EQ(cuGraphAddDependencies(graph_, &fill, &kernel, 1), CUDA_SUCCESS);
  EXPECT_EQ(cuGraphAddDependencies(graph_, &fill, &kernel, 1), CUDA_ERROR_INVALID_VALUE);  // twice
  launch(graph_);
  std::vector<float> got = y();
  EXPECT_EQ(got[5], 16.0f);  // 3 * 5 + 1, not 1
  // Without the edge, creation order: the fill overwrites the kernel's result.
  ASSERT_EQ(cuGraphRemoveDependencies_v2(graph_, &fill, &kernel, nullptr, 1), CUDA_SUCCESS);
  launch(graph_);
  EXPECT_EQ(y()[5], 1.0f);
  // A cycle cannot be instantiated.
  ASSERT_EQ(cuGraphAddDependencies(graph_, &fill, &kernel, 1), CUDA_SUCCESS);
  ASSERT_EQ(cuGraphAddDependencies_v2(graph_, &kernel, &fill, nullptr, 1), CUDA_SUCCESS);
  CUgraphExec exec = nullptr;
  EXPECT_EQ(cuGraphInstantiateWithFlags(&exec, graph_, 0), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(DriverDoubleGraph, ChildGraphsAreDeepCopies) {
  CUgraph child = nullptr;
  ASSERT_EQ(cuGraphCreate(&child, 0), CUDA_SUCCESS);
  addAxpy(child, {}, 1.0f);
  CUgraphNode fill = addFill(graph_, {}, y_, kOne);
  CUgraphNode node = nullptr;
  ASSERT_EQ(cuGraphAddChildGraphNode(&node, graph_, &fill, 1, child), CUDA_SUCCESS);
  addAxpy(child, {}, 1.0f);  // after the copy: not in the parent
  CUgraph inside = nullptr;
  ASSERT_EQ(cuGraphChildGraphNodeGetGraph(node, &inside), CUDA_SUCCESS);
  EXPECT_NE(inside, child);
  ASSERT_EQ(nodesOf(inside).size(), 1u);
  EXPECT_EQ(typeOf(nodesOf(inside)[0]), CU_GRAPH_NODE_TYPE_KERNEL);
  EXPECT_EQ(typeOf(node), CU_GRAPH_NODE_TYPE_GRAPH);
  EXPECT_EQ(cuGraphDestroy(inside), CUDA_ERROR_INVALID_VALUE);  // the node owns it
  EXPECT_EQ(cuGraphDestroy(child), CUDA_SUCCESS);
  launch(graph_);
  EXPECT_EQ(y()[3], 4.0f);  // 1 + 3, one axpy
}

TEST_F(DriverDoubleGraph, AllocationNodesAllocateOnLaunchAndFreeAtTheFreeNode) {
  CUDA_MEM_ALLOC_NODE_PARAMS alloc{};
  alloc.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  alloc.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  alloc.bytesize = kN * sizeof(float);
  CUgraphNode allocNode = nullptr;
  ASSERT_EQ(cuGraphAddMemAllocNode(&allocNode, graph_, nullptr, 0, &alloc), CUDA_SUCCESS);
  const CUdeviceptr temp = alloc.dptr;
  ASSERT_NE(temp, 0u);
  CUdeviceptr base = 0;
  std::size_t size = 0;
  EXPECT_EQ(cuMemGetAddressRange(&base, &size, temp), CUDA_ERROR_NOT_FOUND);  // not yet allocated
  const CUgraphNode fill = addFill(graph_, {allocNode}, temp, kOne);
  CUDA_MEMCPY3D across{};
  across.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  across.srcDevice = temp;
  across.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  across.dstDevice = y_;
  across.WidthInBytes = kN * sizeof(float);
  across.Height = 1;
  across.Depth = 1;
  CUgraphNode copy = nullptr;
  ASSERT_EQ(cuGraphAddMemcpyNode(&copy, graph_, &fill, 1, &across, context_), CUDA_SUCCESS);

  CUDA_MEM_ALLOC_NODE_PARAMS got{};
  ASSERT_EQ(cuGraphMemAllocNodeGetParams(allocNode, &got), CUDA_SUCCESS);
  EXPECT_EQ(got.dptr, temp);
  EXPECT_EQ(got.bytesize, kN * sizeof(float));
  EXPECT_EQ(got.poolProps.location.type, CU_MEM_LOCATION_TYPE_DEVICE);

  // Without a free node the allocation outlives the launch; a second launch
  // of the graph while it lives is refused.
  CUgraphExec exec = nullptr;
  ASSERT_EQ(cuGraphInstantiateWithFlags(&exec, graph_, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuGraphLaunch(exec, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(y()[9], 1.0f);
  EXPECT_EQ(cuMemGetAddressRange(&base, &size, temp), CUDA_SUCCESS);
  EXPECT_EQ(size, kN * sizeof(float));
  EXPECT_EQ(cuGraphLaunch(exec, nullptr), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemFree(temp), CUDA_SUCCESS);
  EXPECT_EQ(cuGraphLaunch(exec, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(cuMemFreeAsync(temp, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(cuGraphExecDestroy(exec), CUDA_SUCCESS);

  CUgraphNode freeNode = nullptr;
  ASSERT_EQ(cuGraphAddMemFreeNode(&freeNode, graph_, &copy, 1, temp), CUDA_SUCCESS);
  CUdeviceptr freed = 0;
  ASSERT_EQ(cuGraphMemFreeNodeGetParams(freeNode, &freed), CUDA_SUCCESS);
  EXPECT_EQ(freed, temp);
  EXPECT_EQ(typeOf(freeNode), CU_GRAPH_NODE_TYPE_MEM_FREE);
  ASSERT_EQ(cuGraphInstantiateWithFlags(&exec, graph_, 0), CUDA_SUCCESS);
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(cuGraphLaunch(exec, nullptr), CUDA_SUCCESS) << i;
    EXPECT_EQ(cuMemGetAddressRange(&base, &size, temp), CUDA_ERROR_NOT_FOUND) << i;
  }
  ASSERT_EQ(cuGraphExecDestroy(exec), CUDA_SUCCESS);
  CUgraphNode bad = nullptr;
  EXPECT_EQ(cuGraphAddMemFreeNode(&bad, graph_, nullptr, 0, y_ + 4), CUDA_ERROR_INVALID_VALUE);
}

// A while node whose body counts down from 5: the body runs 5 times.
TEST_F(DriverDoubleGraph, WhileNodeRunsItsBodyUntilTheKernelClearsTheCondition) {
  CUdeviceptr counter = 0;
  ASSERT_EQ(cuMemAlloc(&counter, sizeof(int)), CUDA_SUCCESS);
  CUgraphConditionalHandle handle = 0;
  ASSERT_EQ(cuGraphConditionalHandleCreate(&handle, graph_, context_, 1, CU_GRAPH_COND_ASSIGN_DEFAULT), CUDA_SUCCESS);
  CUgraphNodeParams params{};
  params.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
  params.conditional.handle = handle;
  params.conditional.type = CU_GRAPH_COND_TYPE_WHILE;
  params.conditional.size = 1;
  params.conditional.ctx = context_;
  CUgraphNode loop = nullptr;
  ASSERT_EQ(cuGraphAddNode_v2(&loop, graph_, nullptr, nullptr, 0, &params), CUDA_SUCCESS);
  ASSERT_NE(params.conditional.phGraph_out, nullptr);
  CUgraph body = params.conditional.phGraph_out[0];
  const CUgraphNode step = addAxpy(body, {}, 1.0f);
  const CUgraphNode count = addCondKernel(body, countdown_, &handle, &counter);
  ASSERT_EQ(cuGraphAddDependencies(body, &step, &count, 1), CUDA_SUCCESS);
  EXPECT_EQ(typeOf(loop), CU_GRAPH_NODE_TYPE_CONDITIONAL);

  CUgraphExec exec = nullptr;
  ASSERT_EQ(cuGraphInstantiateWithFlags(&exec, graph_, 0), CUDA_SUCCESS);
  for (const int times : {5, 2}) {
    ASSERT_EQ(cuMemsetD32(y_, 0, kN), CUDA_SUCCESS);
    ASSERT_EQ(cuMemsetD32(counter, static_cast<unsigned>(times), 1), CUDA_SUCCESS);
    ASSERT_EQ(cuGraphLaunch(exec, nullptr), CUDA_SUCCESS);
    EXPECT_EQ(y()[3], 3.0f * static_cast<float>(times)) << times;
  }
  ASSERT_EQ(cuGraphExecDestroy(exec), CUDA_SUCCESS);

  // Default 0: the condition is checked before the first pass.
  CUgraph other = nullptr;
  ASSERT_EQ(cuGraphCreate(&other, 0), CUDA_SUCCESS);
  CUgraphConditionalHandle never = 0;
  ASSERT_EQ(cuGraphConditionalHandleCreate(&never, other, context_, 0, CU_GRAPH_COND_ASSIGN_DEFAULT), CUDA_SUCCESS);
  params.conditional.handle = never;
  ASSERT_EQ(cuGraphAddNode(&loop, other, nullptr, 0, &params), CUDA_SUCCESS);
  addAxpy(params.conditional.phGraph_out[0], {}, 1.0f);
  ASSERT_EQ(cuMemsetD32(y_, 0, kN), CUDA_SUCCESS);
  launch(other);
  EXPECT_EQ(y()[3], 0.0f);
  EXPECT_EQ(cuGraphDestroy(other), CUDA_SUCCESS);
  EXPECT_EQ(cuMemFree(counter), CUDA_SUCCESS);
}

// If (with an else body) and switch nodes choose by the value a kernel set.
TEST_F(DriverDoubleGraph, IfAndSwitchNodesChooseTheirBodyByTheCondition) {
  CUdeviceptr value = 0;
  ASSERT_EQ(cuMemAlloc(&value, sizeof(unsigned)), CUDA_SUCCESS);
  CUgraphConditionalHandle handle = 0;
  ASSERT_EQ(cuGraphConditionalHandleCreate(&handle, graph_, context_, 0, 0), CUDA_SUCCESS);
  const CUgraphNode set = addCondKernel(graph_, setCondition_, &handle, &value);
  CUgraphNodeParams params{};
  params.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
  params.conditional.handle = handle;
  params.conditional.type = CU_GRAPH_COND_TYPE_IF;
  params.conditional.size = 2;
  CUgraphNode branch = nullptr;
  ASSERT_EQ(cuGraphAddNode(&branch, graph_, &set, 1, &params), CUDA_SUCCESS);
  addFill(params.conditional.phGraph_out[0], {}, y_, kOne);         // then: 1
  addFill(params.conditional.phGraph_out[1], {}, y_, 0x40000000u);  // else: 2
  params.conditional.type = CU_GRAPH_COND_TYPE_SWITCH;
  params.conditional.size = 3;
  CUgraphNode choice = nullptr;
  ASSERT_EQ(cuGraphAddNode(&choice, graph_, &branch, 1, &params), CUDA_SUCCESS);
  for (unsigned i = 0; i < 3; ++i) {
    addAxpy(params.conditional.phGraph_out[i], {}, static_cast<float>(10 * (i + 1)));
  }
  params.conditional.type = CU_GRAPH_COND_TYPE_WHILE;
  params.conditional.size = 2;
  EXPECT_EQ(cuGraphAddNode(&choice, graph_, nullptr, 0, &params), CUDA_ERROR_INVALID_VALUE);

  CUgraphExec exec = nullptr;
  ASSERT_EQ(cuGraphInstantiateWithFlags(&exec, graph_, 0), CUDA_SUCCESS);
  // y[1] after each value: if (then 1, else 2), plus switch body v's 10 * (v + 1) * x[1].
  const float expected[] = {2.0f + 10.0f, 1.0f + 20.0f, 1.0f + 30.0f, 1.0f};
  for (unsigned v = 0; v < 4; ++v) {
    ASSERT_EQ(cuMemcpyHtoD(value, &v, sizeof v), CUDA_SUCCESS);
    ASSERT_EQ(cuGraphLaunch(exec, nullptr), CUDA_SUCCESS);
    EXPECT_EQ(y()[1], expected[v]) << v;
  }
  ASSERT_EQ(cuGraphExecDestroy(exec), CUDA_SUCCESS);
  EXPECT_EQ(cuMemFree(value), CUDA_SUCCESS);
}

TEST_F(DriverDoubleGraph, ClonesAreIndependentAndFindTheirNodes) {
  const CUgraphNode fill = addFill(graph_, {}, y_, kOne);
  const CUgraphNode kernel = addAxpy(graph_, {fill}, 2.0f);
  CUgraph clone = nullptr;
  ASSERT_EQ(cuGraphClone(&clone, graph_), CUDA_SUCCESS);
  CUgraphNode found = nullptr;
  ASSERT_EQ(cuGraphNodeFindInClone(&found, kernel, clone), CUDA_SUCCESS);
  EXPECT_NE(found, kernel);
  EXPECT_EQ(typeOf(found), CU_GRAPH_NODE_TYPE_KERNEL);
  CUgraphNode clonedFill = nullptr;
  ASSERT_EQ(cuGraphNodeFindInClone(&clonedFill, fill, clone), CUDA_SUCCESS);
  const std::vector<std::pair<CUgraphNode, CUgraphNode>> edges = {{clonedFill, found}};
  EXPECT_EQ(edgesOf(clone), edges);
  EXPECT_EQ(cuGraphNodeFindInClone(&found, kernel, graph_), CUDA_ERROR_INVALID_VALUE);
  // Changing the original leaves the clone as it was.
  ASSERT_EQ(cuGraphDestroyNode(kernel), CUDA_SUCCESS);
  EXPECT_EQ(nodesOf(graph_).size(), 1u);
  EXPECT_TRUE(edgesOf(graph_).empty());
  launch(clone);
  EXPECT_EQ(y()[4], 9.0f);
  EXPECT_EQ(cuGraphDestroy(clone), CUDA_SUCCESS);
}

TEST_F(DriverDoubleGraph, ExecutablesAreCopiesThatUpdatesChange) {
  const CUgraphNode fill = addFill(graph_, {}, y_, 0);
  const CUgraphNode kernel = addAxpy(graph_, {fill}, 2.0f);
  CUgraphExec exec = nullptr;
  ASSERT_EQ(cuGraphInstantiateWithFlags(&exec, graph_, 0), CUDA_SUCCESS);
  // A change to the graph after instantiation does not reach the executable.
  float three = 3.0f;
  int n = kN;
  void* params[] = {&three, &x_, &y_, &n};
  CUDA_KERNEL_NODE_PARAMS p{};
  ASSERT_EQ(cuGraphKernelNodeGetParams_v2(kernel, &p), CUDA_SUCCESS);
  p.kernelParams = params;
  ASSERT_EQ(cuGraphKernelNodeSetParams_v2(kernel, &p), CUDA_SUCCESS);
  ASSERT_EQ(cuGraphLaunch(exec, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(y()[2], 4.0f);
  // Kernel parameters set on the executable change its result.
  float five = 5.0f;
  params[0] = &five;
  ASSERT_EQ(cuGraphExecKernelNodeSetParams_v2(exec, kernel, &p), CUDA_SUCCESS);
  five = 50.0f;  // copied when set
  ASSERT_EQ(cuGraphLaunch(exec, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(y()[2], 10.0f);
  // Disabled nodes are skipped (the fill: y accumulates).
  unsigned enabled = 2;
  ASSERT_EQ(cuGraphNodeSetEnabled(exec, fill, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuGraphNodeGetEnabled(exec, fill, &enabled), CUDA_SUCCESS);
  EXPECT_EQ(enabled, 0u);
  ASSERT_EQ(cuGraphLaunch(exec, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(y()[2], 20.0f);
  ASSERT_EQ(cuGraphNodeSetEnabled(exec, fill, 1), CUDA_SUCCESS);
  // cuGraphExecUpdate: the same topology takes the graph's parameters (3 now).
  CUgraphExecUpdateResultInfo info{};
  ASSERT_EQ(cuGraphExecUpdate_v2(exec, graph_, &info), CUDA_SUCCESS);
  EXPECT_EQ(info.result, CU_GRAPH_EXEC_UPDATE_SUCCESS);
  ASSERT_EQ(cuGraphLaunch(exec, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(y()[2], 6.0f);
  // Another topology (one more node) or another node type is refused.
  CUgraph bigger = nullptr;
  ASSERT_EQ(cuGraphClone(&bigger, graph_), CUDA_SUCCESS);
  addAxpy(bigger, {}, 1.0f);
  ASSERT_EQ(cuGraphExecUpdate_v2(exec, bigger, &info), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
  EXPECT_EQ(info.result, CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED);
  CUgraph retyped = nullptr;
  ASSERT_EQ(cuGraphCreate(&retyped, 0), CUDA_SUCCESS);
  const CUgraphNode first = addAxpy(retyped, {}, 1.0f);
  const CUgraphNode second = addAxpy(retyped, {first}, 1.0f);
  CUgraphNode errorNode = nullptr;
  CUgraphExecUpdateResult result{};
  ASSERT_EQ(cuGraphExecUpdate(exec, retyped, &errorNode, &result), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
  EXPECT_EQ(result, CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED);
  EXPECT_EQ(errorNode, first);
  (void)second;
  ASSERT_EQ(cuGraphLaunch(exec, nullptr), CUDA_SUCCESS);  // unchanged by the failures
  EXPECT_EQ(y()[2], 6.0f);
  EXPECT_EQ(cuGraphDestroy(bigger), CUDA_SUCCESS);
  EXPECT_EQ(cuGraphDestroy(retyped), CUDA_SUCCESS);
  ASSERT_EQ(cuGraphExecDestroy(exec), CUDA_SUCCESS);
}

TEST_F(DriverDoubleGraph, ProcAddressKnowsBothAbisOfTheGraphCalls) {
  const auto lookup = [](const char* name, int version) {
    void* fn = nullptr;
    CUdriverProcAddressQueryResult status{};
    EXPECT_EQ(cuGetProcAddress_v2(name, &fn, version, 0, &status), CUDA_SUCCESS);
    return fn;
  };
  EXPECT_EQ(lookup("cuGraphAddKernelNode", 11080), reinterpret_cast<void*>(&cuGraphAddKernelNode));
  EXPECT_EQ(lookup("cuGraphAddKernelNode", 13000), reinterpret_cast<void*>(&cuGraphAddKernelNode_v2));
  EXPECT_EQ(lookup("cuGraphGetEdges", 12020), reinterpret_cast<void*>(&cuGraphGetEdges));
  EXPECT_EQ(lookup("cuGraphGetEdges", 12030), reinterpret_cast<void*>(&cuGraphGetEdges_v2));
  EXPECT_EQ(lookup("cuGraphExecUpdate", 12000), reinterpret_cast<void*>(&cuGraphExecUpdate_v2));
  EXPECT_EQ(lookup("cuGraphConditionalHandleCreate", 12030), reinterpret_cast<void*>(&cuGraphConditionalHandleCreate));
  EXPECT_EQ(lookup("cuGraphConditionalHandleCreate", 12020), nullptr);
}

// The per-node updates of an executable, and the generic forms.
TEST_F(DriverDoubleGraph, ExecutableNodesTakeNewParameters) {
  const CUgraphNode fill = addFill(graph_, {}, y_, kOne);
  HostLog log;
  std::pair<HostLog*, int> first{&log, 1}, second{&log, 2};
  CUDA_HOST_NODE_PARAMS hostParams{logCall, &first};
  CUgraphNode hostNode = nullptr;
  ASSERT_EQ(cuGraphAddHostNode(&hostNode, graph_, &fill, 1, &hostParams), CUDA_SUCCESS);
  CUgraph child = nullptr;
  ASSERT_EQ(cuGraphCreate(&child, 0), CUDA_SUCCESS);
  addAxpy(child, {}, 1.0f);
  CUgraphNode childNode = nullptr;
  ASSERT_EQ(cuGraphAddChildGraphNode(&childNode, graph_, &hostNode, 1, child), CUDA_SUCCESS);
  std::vector<float> out(kN);
  CUDA_MEMCPY3D down{};
  down.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  down.srcDevice = y_;
  down.dstMemoryType = CU_MEMORYTYPE_HOST;
  down.dstHost = out.data();
  down.WidthInBytes = kN * sizeof(float);
  down.Height = 1;
  down.Depth = 1;
  CUgraphNode copy = nullptr;
  ASSERT_EQ(cuGraphAddMemcpyNode(&copy, graph_, &childNode, 1, &down, context_), CUDA_SUCCESS);
  CUgraphExec exec = nullptr;
  ASSERT_EQ(cuGraphInstantiateWithFlags(&exec, graph_, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuGraphLaunch(exec, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(out[2], 3.0f);  // 1 + x

  // Memset value 2, the second host entry, a child with a = 4, another host buffer.
  CUDA_MEMSET_NODE_PARAMS twos{y_, 0, 0x40000000u, 4, kN, 1};
  ASSERT_EQ(cuGraphExecMemsetNodeSetParams(exec, fill, &twos, context_), CUDA_SUCCESS);
  hostParams.userData = &second;
  ASSERT_EQ(cuGraphExecHostNodeSetParams(exec, hostNode, &hostParams), CUDA_SUCCESS);
  CUgraph child4 = nullptr;
  ASSERT_EQ(cuGraphCreate(&child4, 0), CUDA_SUCCESS);
  addAxpy(child4, {}, 4.0f);
  ASSERT_EQ(cuGraphExecChildGraphNodeSetParams(exec, childNode, child4), CUDA_SUCCESS);
  std::vector<float> other(kN);
  down.dstHost = other.data();
  ASSERT_EQ(cuGraphExecMemcpyNodeSetParams(exec, copy, &down, context_), CUDA_SUCCESS);
  ASSERT_EQ(cuGraphLaunch(exec, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(other[2], 10.0f);  // 2 + 4 * 2
  EXPECT_EQ(out[2], 3.0f);
  EXPECT_EQ(log.calls, (std::vector<int>{1, 2}));

  // What CUDA refuses: a memcpy changing its memory types, a child of another shape.
  down.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  down.dstDevice = x_;
  EXPECT_EQ(cuGraphExecMemcpyNodeSetParams(exec, copy, &down, context_), CUDA_ERROR_INVALID_VALUE);
  addAxpy(child4, {}, 4.0f);
  EXPECT_EQ(cuGraphExecChildGraphNodeSetParams(exec, childNode, child4), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuGraphExecMemsetNodeSetParams(exec, hostNode, &twos, context_), CUDA_ERROR_INVALID_VALUE);

  // The generic forms: cuGraphExecNodeSetParams (memset 0) and cuGraphNodeSetParams.
  CUgraphNodeParams generic{};
  generic.type = CU_GRAPH_NODE_TYPE_MEMSET;
  generic.memset = {y_, 0, 0, 4, kN, 1, context_};
  ASSERT_EQ(cuGraphExecNodeSetParams(exec, fill, &generic), CUDA_SUCCESS);
  ASSERT_EQ(cuGraphLaunch(exec, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(other[2], 8.0f);
  ASSERT_EQ(cuGraphNodeSetParams(fill, &generic), CUDA_SUCCESS);
  CUDA_MEMSET_NODE_PARAMS got{};
  ASSERT_EQ(cuGraphMemsetNodeGetParams(fill, &got), CUDA_SUCCESS);
  EXPECT_EQ(got.value, 0u);
  generic.type = CU_GRAPH_NODE_TYPE_KERNEL;
  EXPECT_EQ(cuGraphNodeSetParams(fill, &generic), CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(cuGraphExecDestroy(exec), CUDA_SUCCESS);
  EXPECT_EQ(cuGraphDestroy(child), CUDA_SUCCESS);
  EXPECT_EQ(cuGraphDestroy(child4), CUDA_SUCCESS);
}

// A kernel node from a CUkernel with its parameters in an `extra` buffer
// (laid out as cuFuncGetParamInfo reports them), copied when the node is made.
TEST_F(DriverDoubleGraph, KernelNodesTakeLibraryKernelsAndExtraBuffers) {
  CUlibrary library = nullptr;
  ASSERT_EQ(cuLibraryLoadData(&library, image_.data(), nullptr, nullptr, 0, nullptr, nullptr, 0), CUDA_SUCCESS);
  CUkernel kernel = nullptr;
  ASSERT_EQ(cuLibraryGetKernel(&kernel, library, "axpy"), CUDA_SUCCESS);
  unsigned char buffer[28] = {};
  const float a = 3.0f;
  const int n = kN;
  std::memcpy(buffer, &a, sizeof a);
  std::memcpy(buffer + 8, &x_, sizeof x_);
  std::memcpy(buffer + 16, &y_, sizeof y_);
  std::memcpy(buffer + 24, &n, sizeof n);
  std::size_t size = sizeof buffer;
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buffer, CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END};
  CUDA_KERNEL_NODE_PARAMS p{};
  p.kern = kernel;
  p.gridDimX = p.gridDimY = p.gridDimZ = 1;
  p.blockDimX = kN;
  p.blockDimY = p.blockDimZ = 1;
  p.extra = extra;
  p.ctx = context_;
  CUgraphNode node = nullptr;
  ASSERT_EQ(cuGraphAddKernelNode_v2(&node, graph_, nullptr, 0, &p), CUDA_SUCCESS);
  std::memset(buffer, 0, sizeof buffer);  // copied when the node was made
  CUDA_KERNEL_NODE_PARAMS got{};
  ASSERT_EQ(cuGraphKernelNodeGetParams_v2(node, &got), CUDA_SUCCESS);
  EXPECT_EQ(got.func, nullptr);
  EXPECT_EQ(got.kern, kernel);
  EXPECT_EQ(got.ctx, context_);
  EXPECT_EQ(got.extra, nullptr);  // handed back as kernelParams
  ASSERT_NE(got.kernelParams, nullptr);
  EXPECT_EQ(*static_cast<float*>(got.kernelParams[0]), 3.0f);
  launch(graph_);
  EXPECT_EQ(y()[4], 12.0f);
  // Both kinds of parameters, or a buffer of the wrong size, are refused.
  p.kernelParams = extra;
  EXPECT_NE(cuGraphAddKernelNode_v2(&node, graph_, nullptr, 0, &p), CUDA_SUCCESS);
  p.kernelParams = nullptr;
  size = 32;
  EXPECT_NE(cuGraphAddKernelNode_v2(&node, graph_, nullptr, 0, &p), CUDA_SUCCESS);
  EXPECT_EQ(nodesOf(graph_).size(), 1u);
  p.kern = nullptr;
  EXPECT_EQ(cuGraphAddKernelNode_v2(&node, graph_, nullptr, 0, &p), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuLibraryUnload(library), CUDA_SUCCESS);
}

}  // namespace
