// axpy: y[i] = a * x[i] + y[i] for i < n.
//
// Test material for kcap recording and replay: the simplest kernel with a
// scalar parameter (float a, int n) mixed with two plain device-pointer
// parameters (x read-only, y read-write). The recorder must find both
// allocations from the pointer words, save x and y before the launch, and
// replay must reproduce y exactly. Launch with any 1-D grid; threads past n do
// nothing.

extern "C" __global__ void axpy(float a, const float* x, float* y, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) {
    y[i] = a * x[i] + y[i];
  }
}
