// poly_eval: y[i] = sum_k coeffs[k] * x[i]^k (k = 0..15, Horner's rule) for
// i < n, and call_count += 1 once per block.
//
// Test material for kcap recording and replay: the result depends on module
// globals, not only on the parameters. coeffs is a __constant__ array the host
// sets with cuModuleGetGlobal/cudaMemcpyToSymbol before launching, and
// call_count is a __device__ int the kernel itself updates, so the recorder
// must capture both globals' contents at launch time and replay must write
// them back into the loaded module before launching (after one launch of G
// blocks, call_count has grown by G). Launch with any 1-D grid.

extern "C" {
__constant__ float coeffs[16];
__device__ int call_count;
}

extern "C" __global__ void poly_eval(const float* x, float* y, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) {
    const float v = x[i];
    float acc = coeffs[15];
#pragma unroll
    for (int k = 14; k >= 0; --k) {
      acc = acc * v + coeffs[k];
    }
    y[i] = acc;
  }
  if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) {
    atomicAdd(&call_count, 1);
  }
}
