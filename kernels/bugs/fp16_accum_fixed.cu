// The fixed build of fp16_accum.cu's row_mean (same name and parameters, for
// `kcap replay --override row_mean=fp16_accum_fixed.fatbin`): fp32 partial
// sums, fp32 tree, one rounding to fp16 at the end. Where every fp16 partial
// sum is exact it writes what the original writes.
#include <cuda_fp16.h>

extern "C" __global__ void row_mean(const __half* x, __half* out, int cols) {
  __shared__ float partial[256];
  const __half* row = x + static_cast<size_t>(blockIdx.x) * cols;
  float acc = 0.0f;
  for (int j = threadIdx.x; j < cols; j += blockDim.x) acc += __half2float(row[j]);
  partial[threadIdx.x] = acc;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = __float2half(partial[0] / static_cast<float>(cols));
}
