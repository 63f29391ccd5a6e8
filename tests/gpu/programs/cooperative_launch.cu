// Cooperative launches through the runtime: cudaLaunchCooperativeKernel, and
// cudaLaunchKernelEx with the cooperative attribute. The kernel needs them:
// it sums its slices, waits for the whole grid (grid.sync()), then block 0
// adds up the partial sums.
#include "runtime_program.h"

#include <cooperative_groups.h>

#include <vector>

namespace {

constexpr int kBlocks = 64;  // co-resident on any sm_90 part
constexpr int kThreads = 256;
constexpr int kN = 1 << 20;

}  // namespace

extern "C" __global__ void grid_sum(const unsigned* in, int n, unsigned long long* partial, unsigned long long* total) {
  const cooperative_groups::grid_group grid = cooperative_groups::this_grid();
  if (threadIdx.x == 0) {
    partial[blockIdx.x] = 0;
  }
  __syncthreads();
  unsigned long long mine = 0;
  for (int i = static_cast<int>(grid.thread_rank()); i < n; i += static_cast<int>(grid.size())) {
    mine += in[i];
  }
  atomicAdd(&partial[blockIdx.x], mine);
  grid.sync();
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    unsigned long long sum = 0;
    for (unsigned b = 0; b < gridDim.x; ++b) {
      sum += partial[b];
    }
    *total += sum;
  }
}

int main() {
  test::Made made;
  int device = 0;
  int cooperative = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&cooperative, cudaDevAttrCooperativeLaunch, device));
  CHECK(cooperative == 1);

  std::vector<unsigned> values(kN);
  unsigned long long want = 0;
  for (int i = 0; i < kN; ++i) {
    values[static_cast<std::size_t>(i)] = static_cast<unsigned>(i % 1000);
    want += static_cast<unsigned>(i % 1000);
  }
  unsigned* in = nullptr;
  unsigned long long* partial = nullptr;
  unsigned long long* total = nullptr;
  CUDA_CHECK(cudaMalloc(&in, kN * sizeof(unsigned)));
  CUDA_CHECK(cudaMalloc(&partial, kBlocks * sizeof(unsigned long long)));
  CUDA_CHECK(cudaMalloc(&total, sizeof(unsigned long long)));
  CUDA_CHECK(cudaMemcpy(in, values.data(), kN * sizeof(unsigned), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemset(total, 0, sizeof(unsigned long long)));

  int n = kN;
  void* args[] = {&in, &n, &partial, &total};
  for (int i = 0; i < 3; ++i) {
    CUDA_CHECK(cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(&grid_sum), dim3(kBlocks), dim3(kThreads),
                                           args, 0, nullptr));
  }
  made.launch("grid_sum", 3);
  made.call("cuLaunchCooperativeKernel", 3);

  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeCooperative;
  attribute.val.cooperative = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(kBlocks);
  config.blockDim = dim3(kThreads);
  config.attrs = &attribute;
  config.numAttrs = 1;
  CUDA_CHECK(cudaLaunchKernelEx(&config, grid_sum, static_cast<const unsigned*>(in), n, partial, total));
  made.launch("grid_sum");
  made.call("cuLaunchKernelEx", 1);

  unsigned long long got = 0;
  CUDA_CHECK(cudaMemcpy(&got, total, sizeof got, cudaMemcpyDeviceToHost));
  CHECK(got == 4 * want);
  std::printf("result total %llu\n", got);

  CUDA_CHECK(cudaFree(in));
  CUDA_CHECK(cudaFree(partial));
  CUDA_CHECK(cudaFree(total));
  made.print();
  return 0;
}
