// Stream capture in the double: captured work becomes the same node model as
// explicit construction (kernel, memcpy, memset, allocation, free and child
// graph nodes, edges in stream order, across streams joined by events), and
// cuStreamGetCaptureInfo / cuStreamUpdateCaptureDependencies read and change
// a capture's dependencies.
#include "driver_double_graph_fixture.h"

#include <cuda.h>
#include <gtest/gtest.h>

#include <utility>
#include <vector>

namespace {

using namespace kcap_double_test;

// Captured work becomes kernel, memcpy and memset nodes chained in stream
// order; a second stream forked and joined through events adds a branch.
TEST_F(DriverDoubleGraph, CaptureMakesQueryableNodesInStreamOrder) {
  CUstream stream = nullptr, side = nullptr;
  ASSERT_EQ(cuStreamCreate(&stream, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamCreate(&side, 0), CUDA_SUCCESS);
  CUevent fork = nullptr, join = nullptr;
  ASSERT_EQ(cuEventCreate(&fork, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuEventCreate(&join, 0), CUDA_SUCCESS);
  std::vector<float> out(kN, -1.0f);
  float a = 2.0f;
  int n = kN;
  void* params[] = {&a, &x_, &y_, &n};

  ASSERT_EQ(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
  ASSERT_EQ(cuMemsetD32Async(y_, kOne, kN, stream), CUDA_SUCCESS);
  ASSERT_EQ(cuEventRecord(fork, stream), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamWaitEvent(side, fork, 0), CUDA_SUCCESS);  // side joins the capture
  ASSERT_EQ(cuLaunchKernel(axpy_, 1, 1, 1, kN, 1, 1, 0, side, params, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(cuEventRecord(join, side), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamWaitEvent(stream, join, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyDtoHAsync(out.data(), y_, kN * sizeof(float), stream), CUDA_SUCCESS);
  EXPECT_EQ(out[0], -1.0f);  // captured, not run
  CUgraph captured = nullptr;
  ASSERT_EQ(cuStreamEndCapture(stream, &captured), CUDA_SUCCESS);
  CUstreamCaptureStatus status{};
  ASSERT_EQ(cuStreamIsCapturing(side, &status), CUDA_SUCCESS);
  EXPECT_EQ(status, CU_STREAM_CAPTURE_STATUS_NONE);

  const std::vector<CUgraphNode> nodes = nodesOf(captured);
  ASSERT_EQ(nodes.size(), 3u);
  EXPECT_EQ(typeOf(nodes[0]), CU_GRAPH_NODE_TYPE_MEMSET);
  EXPECT_EQ(typeOf(nodes[1]), CU_GRAPH_NODE_TYPE_KERNEL);
  EXPECT_EQ(typeOf(nodes[2]), CU_GRAPH_NODE_TYPE_MEMCPY);
  // The copy follows both the memset (its stream's last work) and the
  // kernel (joined through the event).
  const std::vector<std::pair<CUgraphNode, CUgraphNode>> edges = {
      {nodes[0], nodes[1]}, {nodes[0], nodes[2]}, {nodes[1], nodes[2]}};
  EXPECT_EQ(edgesOf(captured), edges);
  CUDA_MEMSET_NODE_PARAMS memset{};
  ASSERT_EQ(cuGraphMemsetNodeGetParams(nodes[0], &memset), CUDA_SUCCESS);
  EXPECT_EQ(memset.dst, y_);
  EXPECT_EQ(memset.value, kOne);
  EXPECT_EQ(memset.width, static_cast<std::size_t>(kN));
  CUDA_MEMCPY3D copy{};
  ASSERT_EQ(cuGraphMemcpyNodeGetParams(nodes[2], &copy), CUDA_SUCCESS);
  EXPECT_EQ(copy.srcMemoryType, CU_MEMORYTYPE_DEVICE);
  EXPECT_EQ(copy.srcDevice, y_);
  EXPECT_EQ(copy.dstMemoryType, CU_MEMORYTYPE_HOST);
  EXPECT_EQ(copy.dstHost, out.data());
  CUDA_KERNEL_NODE_PARAMS k{};
  ASSERT_EQ(cuGraphKernelNodeGetParams_v2(nodes[1], &k), CUDA_SUCCESS);
  EXPECT_EQ(k.func, axpy_);
  EXPECT_EQ(*static_cast<float*>(k.kernelParams[0]), 2.0f);

  launch(captured);
  EXPECT_EQ(out[6], 13.0f);
  EXPECT_EQ(cuGraphDestroy(captured), CUDA_SUCCESS);

  // A forked stream that never joins back: the capture fails.
  ASSERT_EQ(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
  ASSERT_EQ(cuEventRecord(fork, stream), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamWaitEvent(side, fork, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuLaunchKernel(axpy_, 1, 1, 1, kN, 1, 1, 0, side, params, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(cuStreamEndCapture(side, &captured), CUDA_ERROR_STREAM_CAPTURE_UNMATCHED);
  EXPECT_EQ(cuStreamEndCapture(stream, &captured), CUDA_ERROR_STREAM_CAPTURE_UNJOINED);
  EXPECT_EQ(captured, nullptr);

  for (CUevent e : {fork, join}) {
    EXPECT_EQ(cuEventDestroy(e), CUDA_SUCCESS);
  }
  EXPECT_EQ(cuStreamDestroy(stream), CUDA_SUCCESS);
  EXPECT_EQ(cuStreamDestroy(side), CUDA_SUCCESS);
}

// Stream-ordered allocations and a graph launch inside a capture become
// allocation, free and child graph nodes.
TEST_F(DriverDoubleGraph, CaptureTurnsAllocationsAndGraphLaunchesIntoNodes) {
  addAxpy(graph_, {}, 1.0f);
  CUgraphExec inner = nullptr;
  ASSERT_EQ(cuGraphInstantiateWithFlags(&inner, graph_, 0), CUDA_SUCCESS);
  CUstream stream = nullptr;
  ASSERT_EQ(cuStreamCreate(&stream, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
  CUdeviceptr temp = 0;
  ASSERT_EQ(cuMemAllocAsync(&temp, kN * sizeof(float), stream), CUDA_SUCCESS);
  ASSERT_NE(temp, 0u);
  ASSERT_EQ(cuMemsetD32Async(temp, kOne, kN, stream), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyDtoDAsync(y_, temp, kN * sizeof(float), stream), CUDA_SUCCESS);
  ASSERT_EQ(cuMemFreeAsync(temp, stream), CUDA_SUCCESS);
  ASSERT_EQ(cuGraphLaunch(inner, stream), CUDA_SUCCESS);
  CUgraph captured = nullptr;
  ASSERT_EQ(cuStreamEndCapture(stream, &captured), CUDA_SUCCESS);
  const std::vector<CUgraphNode> nodes = nodesOf(captured);
  ASSERT_EQ(nodes.size(), 5u);
  const CUgraphNodeType types[] = {CU_GRAPH_NODE_TYPE_MEM_ALLOC, CU_GRAPH_NODE_TYPE_MEMSET, CU_GRAPH_NODE_TYPE_MEMCPY,
                                   CU_GRAPH_NODE_TYPE_MEM_FREE, CU_GRAPH_NODE_TYPE_GRAPH};
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    EXPECT_EQ(typeOf(nodes[i]), types[i]) << i;
  }
  CUDA_MEM_ALLOC_NODE_PARAMS alloc{};
  ASSERT_EQ(cuGraphMemAllocNodeGetParams(nodes[0], &alloc), CUDA_SUCCESS);
  EXPECT_EQ(alloc.dptr, temp);
  EXPECT_EQ(alloc.bytesize, kN * sizeof(float));
  CUdeviceptr freed = 0;
  ASSERT_EQ(cuGraphMemFreeNodeGetParams(nodes[3], &freed), CUDA_SUCCESS);
  EXPECT_EQ(freed, temp);
  launch(captured);
  EXPECT_EQ(y()[5], 6.0f);  // 1, then + x by the inner graph
  CUdeviceptr base = 0;
  std::size_t size = 0;
  EXPECT_EQ(cuMemGetAddressRange(&base, &size, temp), CUDA_ERROR_NOT_FOUND);  // freed by the graph
  EXPECT_EQ(cuGraphDestroy(captured), CUDA_SUCCESS);
  EXPECT_EQ(cuGraphExecDestroy(inner), CUDA_SUCCESS);
  EXPECT_EQ(cuStreamDestroy(stream), CUDA_SUCCESS);
}

// cuStreamGetCaptureInfo reports the capture and the stream's next
// dependencies; cuStreamUpdateCaptureDependencies replaces them.
TEST_F(DriverDoubleGraph, CaptureInfoAndDependencyUpdates) {
  CUstream stream = nullptr;
  ASSERT_EQ(cuStreamCreate(&stream, 0), CUDA_SUCCESS);
  CUstreamCaptureStatus status{};
  ASSERT_EQ(cuStreamGetCaptureInfo_v3(stream, &status, nullptr, nullptr, nullptr, nullptr, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(status, CU_STREAM_CAPTURE_STATUS_NONE);
  ASSERT_EQ(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), CUDA_SUCCESS);
  ASSERT_EQ(cuMemsetD32Async(y_, kOne, kN, stream), CUDA_SUCCESS);
  cuuint64_t id = 0;
  CUgraph graph = nullptr;
  const CUgraphNode* deps = nullptr;
  const CUgraphEdgeData* edges = nullptr;
  std::size_t count = 0;
  ASSERT_EQ(cuStreamGetCaptureInfo_v3(stream, &status, &id, &graph, &deps, &edges, &count), CUDA_SUCCESS);
  EXPECT_EQ(status, CU_STREAM_CAPTURE_STATUS_ACTIVE);
  EXPECT_NE(id, 0u);
  ASSERT_EQ(count, 1u);
  const CUgraphNode fill = deps[0];
  EXPECT_EQ(typeOf(fill), CU_GRAPH_NODE_TYPE_MEMSET);
  ASSERT_NE(edges, nullptr);
  EXPECT_EQ(edges[0].type, CU_GRAPH_DEPENDENCY_TYPE_DEFAULT);
  float a = 2.0f;
  int n = kN;
  void* params[] = {&a, &x_, &y_, &n};
  ASSERT_EQ(cuLaunchKernel(axpy_, 1, 1, 1, kN, 1, 1, 0, stream, params, nullptr), CUDA_SUCCESS);
  // The next work depends on the memset only, not on the kernel.
  CUgraphNode only[] = {fill};
  ASSERT_EQ(cuStreamUpdateCaptureDependencies_v2(stream, only, nullptr, 1, CU_STREAM_SET_CAPTURE_DEPENDENCIES),
            CUDA_SUCCESS);
  ASSERT_EQ(cuMemsetD32Async(x_, 0, kN, stream), CUDA_SUCCESS);
  CUgraph captured = nullptr;
  ASSERT_EQ(cuStreamEndCapture(stream, &captured), CUDA_SUCCESS);
  EXPECT_EQ(captured, graph);
  const std::vector<CUgraphNode> nodes = nodesOf(captured);
  ASSERT_EQ(nodes.size(), 3u);
  const std::vector<std::pair<CUgraphNode, CUgraphNode>> expected = {{nodes[0], nodes[1]}, {nodes[0], nodes[2]}};
  EXPECT_EQ(edgesOf(captured), expected);
  EXPECT_EQ(cuStreamUpdateCaptureDependencies_v2(stream, only, nullptr, 1, 0), CUDA_ERROR_ILLEGAL_STATE);
  EXPECT_EQ(cuGraphDestroy(captured), CUDA_SUCCESS);
  EXPECT_EQ(cuStreamDestroy(stream), CUDA_SUCCESS);
}

// Work on the legacy stream waits for blocking streams: while one of them
// captures, a synchronous copy or a launch there fails and invalidates that
// capture; a non-blocking stream's capture is left alone.
TEST_F(DriverDoubleGraph, LegacyStreamWorkInvalidatesABlockingStreamsCapture) {
  CUstream blocking = nullptr, nonBlocking = nullptr;
  ASSERT_EQ(cuStreamCreate(&blocking, CU_STREAM_DEFAULT), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamCreate(&nonBlocking, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  std::vector<float> out(kN);
  CUgraph captured = nullptr;

  ASSERT_EQ(cuStreamBeginCapture(nonBlocking, CU_STREAM_CAPTURE_MODE_RELAXED), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyDtoH(out.data(), y_, kN * sizeof(float)), CUDA_SUCCESS);
  ASSERT_EQ(cuMemsetD32Async(y_, kOne, kN, nonBlocking), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamEndCapture(nonBlocking, &captured), CUDA_SUCCESS);
  EXPECT_EQ(cuGraphDestroy(captured), CUDA_SUCCESS);

  float a = 2.0f;
  int n = kN;
  void* params[] = {&a, &x_, &y_, &n};
  for (const bool launch : {false, true}) {
    ASSERT_EQ(cuStreamBeginCapture(blocking, CU_STREAM_CAPTURE_MODE_RELAXED), CUDA_SUCCESS);
    ASSERT_EQ(cuMemsetD32Async(y_, kOne, kN, blocking), CUDA_SUCCESS);
    EXPECT_EQ(launch ? cuLaunchKernel(axpy_, 1, 1, 1, kN, 1, 1, 0, nullptr, params, nullptr)
                     : cuMemcpyDtoH(out.data(), y_, kN * sizeof(float)),
              CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
    captured = nullptr;
    EXPECT_EQ(cuStreamEndCapture(blocking, &captured), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    EXPECT_EQ(captured, nullptr);
  }
  // No capture in progress: the legacy stream runs work again.
  EXPECT_EQ(cuMemcpyDtoH(out.data(), y_, kN * sizeof(float)), CUDA_SUCCESS);
  EXPECT_EQ(cuStreamDestroy(blocking), CUDA_SUCCESS);
  EXPECT_EQ(cuStreamDestroy(nonBlocking), CUDA_SUCCESS);
}

}  // namespace
