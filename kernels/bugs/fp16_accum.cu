// Bug class 5: low-precision accumulation (fp16 overflow past 65504).
//
// row_mean averages each row of an fp16 matrix (4096 columns, one block per
// row) and accumulates in fp16 too: per-thread sums, then a tree in shared
// memory. A row of 30.0s sums to 122880, past fp16's largest finite value
// (65504): the sum becomes inf and so does the mean, although the mean (30)
// fits easily. A row of 0.1s loses accuracy the same way (each partial sum is
// rounded to 11 significant bits).
//
// Inputs: launch 0, rows of 1.0, 0.5, 2.0 and -1.0: every partial sum is exact in
//         fp16, the means are right.
//         launch 1, rows of 30.0, 0.1 and 1.0: the first mean is inf, the second
//         off in the last bits.
// A correct version accumulates in fp32 and rounds only the mean to fp16 (the
// fixed build, fp16_accum_fixed.cu; identical for launch 0).
// kcap: `kcap replay --launch 1 --override row_mean=fp16_accum_fixed.fatbin
// --dtype f16` reports the inf that the recording holds and the fix does not.
#include "bug_common.h"

#include <cuda_fp16.h>

#include <vector>

constexpr int kCols = 4096, kThreads = 256;

extern "C" __global__ void row_mean(const __half* x, __half* out, int cols) {
  __shared__ __half partial[kThreads];
  const __half* row = x + static_cast<size_t>(blockIdx.x) * cols;
  __half acc = __float2half(0.0f);  // BUG: an fp16 accumulator
  for (int j = threadIdx.x; j < cols; j += blockDim.x) acc = __hadd(acc, row[j]);
  partial[threadIdx.x] = acc;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) partial[threadIdx.x] = __hadd(partial[threadIdx.x], partial[threadIdx.x + s]);
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = __hdiv(partial[0], __int2half_rn(cols));
}

static void run(const std::vector<float>& values) {
  const int rows = static_cast<int>(values.size());
  std::vector<__half> host(static_cast<size_t>(rows) * kCols);
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < kCols; ++j) host[static_cast<size_t>(r) * kCols + j] = __float2half(values[r]);
  __half *x, *out;
  BUG_CHECK(cudaMalloc(&x, host.size() * sizeof(__half)));
  BUG_CHECK(cudaMalloc(&out, rows * sizeof(__half)));
  BUG_CHECK(cudaMemcpy(x, host.data(), host.size() * sizeof(__half), cudaMemcpyHostToDevice));
  BUG_CHECK(cudaMemset(out, 0, rows * sizeof(__half)));
  row_mean<<<rows, kThreads>>>(x, out, kCols);
  BUG_LAUNCHED();
  std::vector<__half> means(rows);
  BUG_CHECK(cudaMemcpy(means.data(), out, rows * sizeof(__half), cudaMemcpyDeviceToHost));
  for (int r = 0; r < rows; ++r) {
    std::printf("result row_mean of %d x %g = %g\n", kCols, values[r], __half2float(means[r]));
  }
}

int main() {
  run({1.0f, 0.5f, 2.0f, -1.0f});
  run({30.0f, 0.1f, 1.0f});
  return 0;
}
