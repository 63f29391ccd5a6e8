// reduce_sum: *out += sum(in[0..n)), block-level shared-memory tree reduction
// followed by one atomicAdd per block.
//
// Test material for kcap recording and replay: a kernel that uses static
// shared memory, __syncthreads and a global atomic on an output pointer, so
// the result depends on *out's contents before the launch (the recorder must
// save it, replay must restore it). Must be launched with blockDim.x == 256
// (1-D); any grid size works because the load phase is grid-strided. The
// float sum order depends on the grid shape and on atomic ordering, so compare
// results with a tolerance, not bit-exactly, across different grid shapes.

constexpr unsigned kReduceBlock = 256;

extern "C" __global__ void reduce_sum(const float* in, float* out, unsigned n) {
  __shared__ float partial[kReduceBlock];

  const unsigned tid = threadIdx.x;
  const unsigned stride = gridDim.x * kReduceBlock;
  float acc = 0.0f;
  for (unsigned i = blockIdx.x * kReduceBlock + tid; i < n; i += stride) {
    acc += in[i];
  }
  partial[tid] = acc;
  __syncthreads();

  for (unsigned s = kReduceBlock / 2; s > 0; s >>= 1) {
    if (tid < s) {
      partial[tid] += partial[tid + s];
    }
    __syncthreads();
  }

  if (tid == 0) {
    atomicAdd(out, partial[0]);
  }
}
