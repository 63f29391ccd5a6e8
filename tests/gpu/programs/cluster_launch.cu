// cudaLaunchKernelEx with a cluster-dimension attribute (2x1x1, sm_90): each
// block writes its rank in its cluster and the cluster's size, so the result
// shows that the launch really ran as clusters. Launched through the C++
// template and through cudaLaunchKernelExC, then once more without clusters
// through <<<>>>; then captured into a CUDA graph (a kernel node with the
// cluster dimension as its attribute) launched twice.
#include "runtime_program.h"

#include <cooperative_groups.h>

namespace {

constexpr int kBlocks = 16;

}  // namespace

extern "C" __global__ void cluster_ids(int* out) {
  const cooperative_groups::cluster_group cluster = cooperative_groups::this_cluster();
  if (threadIdx.x == 0) {
    out[blockIdx.x] = static_cast<int>(100 * cluster.num_blocks() + cluster.block_rank());
  }
}

namespace {

int check_clusters(const int* device_out, unsigned cluster_size) {
  int host[kBlocks] = {};
  CUDA_CHECK(cudaMemcpy(host, device_out, sizeof host, cudaMemcpyDeviceToHost));
  int sum = 0;
  for (int b = 0; b < kBlocks; ++b) {
    CHECK(host[b] == static_cast<int>(100 * cluster_size + b % cluster_size));
    sum += host[b];
  }
  return sum;
}

}  // namespace

int main() {
  test::Made made;
  int* out = nullptr;
  CUDA_CHECK(cudaMalloc(&out, kBlocks * sizeof(int)));

  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeClusterDimension;
  attribute.val.clusterDim.x = 2;
  attribute.val.clusterDim.y = 1;
  attribute.val.clusterDim.z = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(kBlocks);
  config.blockDim = dim3(64);
  config.attrs = &attribute;
  config.numAttrs = 1;

  CUDA_CHECK(cudaMemset(out, 0, kBlocks * sizeof(int)));
  CUDA_CHECK(cudaLaunchKernelEx(&config, cluster_ids, out));
  made.launch("cluster_ids");
  std::printf("result template_ex %d\n", check_clusters(out, 2));

  CUDA_CHECK(cudaMemset(out, 0, kBlocks * sizeof(int)));
  void* args[] = {&out};
  CUDA_CHECK(cudaLaunchKernelExC(&config, reinterpret_cast<const void*>(&cluster_ids), args));
  made.launch("cluster_ids");
  std::printf("result launch_ex_c %d\n", check_clusters(out, 2));
  made.call("cuLaunchKernelEx", 2);

  CUDA_CHECK(cudaMemset(out, 0, kBlocks * sizeof(int)));
  cluster_ids<<<kBlocks, 64>>>(out);
  LAUNCH_CHECK();
  made.launch("cluster_ids");
  std::printf("result no_cluster %d\n", check_clusters(out, 1));
  made.call("cuLaunchKernel", 1);

  cudaStream_t stream = nullptr;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaGraph_t graph = nullptr;
  CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  config.stream = stream;
  CUDA_CHECK(cudaLaunchKernelEx(&config, cluster_ids, out));
  made.launch("cluster_ids");
  made.call("cuLaunchKernelEx", 1);
  CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec = nullptr;
  CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (int i = 0; i < 2; ++i) {
    CUDA_CHECK(cudaMemsetAsync(out, 0, kBlocks * sizeof(int), stream));
    CUDA_CHECK(cudaGraphLaunch(exec, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    std::printf("result graph%d %d\n", i, check_clusters(out, 2));
  }
  CUDA_CHECK(cudaGraphExecDestroy(exec));
  CUDA_CHECK(cudaGraphDestroy(graph));
  CUDA_CHECK(cudaStreamDestroy(stream));

  CUDA_CHECK(cudaFree(out));
  made.print();
  return 0;
}
