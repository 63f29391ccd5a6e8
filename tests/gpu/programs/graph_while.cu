// A CUDA graph with a while node whose condition a kernel sets on the GPU
// (cudaGraphSetConditional): each iteration of the body adds x into y, then
// counts a counter down and sets the condition to whether any count is
// left. The graph is launched three times, the counter set to a different
// count before each (a copy on the stream), so the loop runs 3, 1 and 5
// times: y ends as 9 x, checked on the host.
#include "runtime_program.h"

#include <cuda_runtime.h>

#include <vector>

namespace {

constexpr int kN = 4096;
constexpr int kThreads = 256;

}  // namespace

extern "C" __global__ void fill_x(float* x, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) x[i] = 0.5f * static_cast<float>(i % 7);
}

extern "C" __global__ void add_into(float* y, const float* x, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) y[i] += x[i];
}

extern "C" __global__ void count_down(int* counter, cudaGraphConditionalHandle loop) {
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    const int left = --*counter;
    cudaGraphSetConditional(loop, left > 0 ? 1U : 0U);
  }
}

int main() {
  test::Made made;
  float* x = nullptr;
  float* y = nullptr;
  int* counter = nullptr;
  CUDA_CHECK(cudaMalloc(&x, kN * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&y, kN * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&counter, sizeof(int)));
  CUDA_CHECK(cudaMemset(y, 0, kN * sizeof(float)));
  int n = kN;
  fill_x<<<kN / kThreads, kThreads>>>(x, n);
  LAUNCH_CHECK();
  made.launch("fill_x");

  cudaGraph_t graph = nullptr;
  CUDA_CHECK(cudaGraphCreate(&graph, 0));
  cudaGraphConditionalHandle loop = 0;
  CUDA_CHECK(cudaGraphConditionalHandleCreate(&loop, graph, 1, cudaGraphCondAssignDefault));
  cudaGraphNodeParams whileNode{};
  whileNode.type = cudaGraphNodeTypeConditional;
  whileNode.conditional.handle = loop;
  whileNode.conditional.type = cudaGraphCondTypeWhile;
  whileNode.conditional.size = 1;
  cudaGraphNode_t whileHandle = nullptr;
  CUDA_CHECK(cudaGraphAddNode(&whileHandle, graph, nullptr, nullptr, 0, &whileNode));
  cudaGraph_t body = whileNode.conditional.phGraph_out[0];

  void* addArgs[] = {&y, &x, &n};
  cudaKernelNodeParams add{};
  add.func = reinterpret_cast<void*>(&add_into);
  add.gridDim = dim3(kN / kThreads);
  add.blockDim = dim3(kThreads);
  add.kernelParams = addArgs;
  cudaGraphNode_t addNode = nullptr;
  CUDA_CHECK(cudaGraphAddKernelNode(&addNode, body, nullptr, 0, &add));
  void* downArgs[] = {&counter, &loop};
  cudaKernelNodeParams down{};
  down.func = reinterpret_cast<void*>(&count_down);
  down.gridDim = dim3(1);
  down.blockDim = dim3(32);
  down.kernelParams = downArgs;
  cudaGraphNode_t downNode = nullptr;
  CUDA_CHECK(cudaGraphAddKernelNode(&downNode, body, &addNode, 1, &down));

  cudaGraphExec_t exec = nullptr;
  CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  cudaStream_t stream = nullptr;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const int counts[] = {3, 1, 5};
  for (const int count : counts) {
    CUDA_CHECK(cudaMemcpyAsync(counter, &count, sizeof count, cudaMemcpyHostToDevice, stream));
    CUDA_CHECK(cudaGraphLaunch(exec, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
  }

  std::vector<float> got(kN);
  CUDA_CHECK(cudaMemcpy(got.data(), y, kN * sizeof(float), cudaMemcpyDeviceToHost));
  double sum = 0;
  for (int i = 0; i < kN; ++i) {
    CHECK(got[static_cast<size_t>(i)] == 9.0f * 0.5f * static_cast<float>(i % 7));
    sum += got[static_cast<size_t>(i)];
  }
  std::printf("result y sum %.1f\n", sum);

  CUDA_CHECK(cudaGraphExecDestroy(exec));
  CUDA_CHECK(cudaGraphDestroy(graph));
  CUDA_CHECK(cudaStreamDestroy(stream));
  CUDA_CHECK(cudaFree(x));
  CUDA_CHECK(cudaFree(y));
  CUDA_CHECK(cudaFree(counter));
  made.print();
  return 0;
}
