// The fixture of the double's graph tests (driver_double_graph_test.cpp,
// driver_double_capture_test.cpp): axpy and the conditional kernels loaded,
// x = 0..63 and y = 0 in device memory, an empty graph, and helpers that add
// nodes and read graphs back.
#pragma once

#include "driver_exports.h"

#include <cuda.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace kcap_double_test {

inline std::string readKernel(const char* name) {
  const std::string path = std::string(KCAP_KERNELS_DIR) + "/" + name;
  std::string bytes;
  if (std::FILE* in = std::fopen(path.c_str(), "rb")) {
    char chunk[4096];
    std::size_t n = 0;
    while ((n = std::fread(chunk, 1, sizeof chunk, in)) > 0) {
      bytes.append(chunk, n);
    }
    std::fclose(in);
  }
  return bytes;
}

// The conditional kernels of host_kernels.cpp: driver-double test material,
// bodies empty (the double runs its host versions).
inline constexpr char kConditionPtx[] =
    "// graph conditions: driver-double test material (no GPU semantics)\n"
    ".version 8.0\n"
    ".target sm_90\n"
    ".address_size 64\n"
    ".visible .entry graph_countdown(.param .u64 p0, .param .u64 p1)\n{\n\tret;\n}\n"
    ".visible .entry graph_set_condition(.param .u64 p0, .param .u64 p1)\n{\n\tret;\n}\n";

inline constexpr int kN = 64;
inline constexpr unsigned kOne = 0x3f800000u;  // 1.0f

class DriverDoubleGraph : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
    ASSERT_EQ(cuDevicePrimaryCtxRetain(&context_, 0), CUDA_SUCCESS);
    ASSERT_EQ(cuCtxSetCurrent(context_), CUDA_SUCCESS);
    image_ = readKernel("axpy.fatbin");
    ASSERT_EQ(cuModuleLoadData(&module_, image_.data()), CUDA_SUCCESS);
    ASSERT_EQ(cuModuleGetFunction(&axpy_, module_, "axpy"), CUDA_SUCCESS);
    ASSERT_EQ(cuModuleLoadData(&conditions_, kConditionPtx), CUDA_SUCCESS);
    ASSERT_EQ(cuModuleGetFunction(&countdown_, conditions_, "graph_countdown"), CUDA_SUCCESS);
    ASSERT_EQ(cuModuleGetFunction(&setCondition_, conditions_, "graph_set_condition"), CUDA_SUCCESS);
    ASSERT_EQ(cuMemAlloc(&x_, kN * sizeof(float)), CUDA_SUCCESS);
    ASSERT_EQ(cuMemAlloc(&y_, kN * sizeof(float)), CUDA_SUCCESS);
    std::vector<float> x(kN);
    for (int i = 0; i < kN; ++i) {
      x[static_cast<std::size_t>(i)] = static_cast<float>(i);
    }
    ASSERT_EQ(cuMemcpyHtoD(x_, x.data(), kN * sizeof(float)), CUDA_SUCCESS);
    ASSERT_EQ(cuMemsetD32(y_, 0, kN), CUDA_SUCCESS);
    ASSERT_EQ(cuGraphCreate(&graph_, 0), CUDA_SUCCESS);
  }
  void TearDown() override {
    EXPECT_EQ(cuGraphDestroy(graph_), CUDA_SUCCESS);
    EXPECT_EQ(cuMemFree(x_), CUDA_SUCCESS);
    EXPECT_EQ(cuMemFree(y_), CUDA_SUCCESS);
    EXPECT_EQ(cuModuleUnload(module_), CUDA_SUCCESS);
    EXPECT_EQ(cuModuleUnload(conditions_), CUDA_SUCCESS);
    EXPECT_EQ(cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS);
  }

  // y = a * x + y, as a kernel node of `graph` after `deps`.
  CUgraphNode addAxpy(CUgraph graph, std::vector<CUgraphNode> deps, float a) {
    a_ = a;
    n_ = kN;
    void* params[] = {&a_, &x_, &y_, &n_};
    CUDA_KERNEL_NODE_PARAMS p{};
    p.func = axpy_;
    p.gridDimX = 1;
    p.gridDimY = 1;
    p.gridDimZ = 1;
    p.blockDimX = kN;
    p.blockDimY = 1;
    p.blockDimZ = 1;
    p.kernelParams = params;
    CUgraphNode node = nullptr;
    EXPECT_EQ(cuGraphAddKernelNode_v2(&node, graph, deps.data(), deps.size(), &p), CUDA_SUCCESS);
    return node;
  }
  CUgraphNode addCondKernel(CUgraph graph, CUfunction f, CUgraphConditionalHandle* handle, CUdeviceptr* arg) {
    void* params[] = {handle, arg};
    CUDA_KERNEL_NODE_PARAMS p{};
    p.func = f;
    p.gridDimX = p.gridDimY = p.gridDimZ = 1;
    p.blockDimX = p.blockDimY = p.blockDimZ = 1;
    p.kernelParams = params;
    CUgraphNode node = nullptr;
    EXPECT_EQ(cuGraphAddKernelNode_v2(&node, graph, nullptr, 0, &p), CUDA_SUCCESS);
    return node;
  }
  CUgraphNode addFill(CUgraph graph, std::vector<CUgraphNode> deps, CUdeviceptr dst, unsigned value) {
    CUDA_MEMSET_NODE_PARAMS p{dst, 0, value, 4, kN, 1};
    CUgraphNode node = nullptr;
    EXPECT_EQ(cuGraphAddMemsetNode(&node, graph, deps.data(), deps.size(), &p, context_), CUDA_SUCCESS);
    return node;
  }
  std::vector<float> y() {
    std::vector<float> out(kN);
    EXPECT_EQ(cuMemcpyDtoH(out.data(), y_, kN * sizeof(float)), CUDA_SUCCESS);
    return out;
  }
  void launch(CUgraph graph) {
    CUgraphExec exec = nullptr;
    ASSERT_EQ(cuGraphInstantiateWithFlags(&exec, graph, 0), CUDA_SUCCESS);
    ASSERT_EQ(cuGraphLaunch(exec, nullptr), CUDA_SUCCESS);
    ASSERT_EQ(cuGraphExecDestroy(exec), CUDA_SUCCESS);
  }
  std::vector<CUgraphNode> nodesOf(CUgraph graph) {
    std::size_t count = 0;
    EXPECT_EQ(cuGraphGetNodes(graph, nullptr, &count), CUDA_SUCCESS);
    std::vector<CUgraphNode> nodes(count);
    EXPECT_EQ(cuGraphGetNodes(graph, nodes.data(), &count), CUDA_SUCCESS);
    return nodes;
  }
  CUgraphNodeType typeOf(CUgraphNode node) {
    CUgraphNodeType type{};
    EXPECT_EQ(cuGraphNodeGetType(node, &type), CUDA_SUCCESS);
    return type;
  }
  std::vector<std::pair<CUgraphNode, CUgraphNode>> edgesOf(CUgraph graph) {
    std::size_t count = 0;
    EXPECT_EQ(cuGraphGetEdges_v2(graph, nullptr, nullptr, nullptr, &count), CUDA_SUCCESS);
    std::vector<CUgraphNode> from(count), to(count);
    std::vector<CUgraphEdgeData> data(count);
    EXPECT_EQ(cuGraphGetEdges_v2(graph, from.data(), to.data(), data.data(), &count), CUDA_SUCCESS);
    std::vector<std::pair<CUgraphNode, CUgraphNode>> out;
    for (std::size_t i = 0; i < count; ++i) {
      out.emplace_back(from[i], to[i]);
    }
    return out;
  }

  CUcontext context_ = nullptr;
  std::string image_;
  CUmodule module_ = nullptr;
  CUmodule conditions_ = nullptr;
  CUfunction axpy_ = nullptr;
  CUfunction countdown_ = nullptr;
  CUfunction setCondition_ = nullptr;
  CUdeviceptr x_ = 0;
  CUdeviceptr y_ = 0;
  CUgraph graph_ = nullptr;
  float a_ = 0;
  int n_ = 0;
};

}  // namespace kcap_double_test
