// The example program the README records and replays: an ordinary CUDA
// runtime program (nothing kcap-specific in it) that scales and sums a vector
// in a few launches, the way a real job chains kernels. Its output is
// deterministic, so a replay can be compared with it.
#include <cuda_runtime.h>

#include <cstdio>
#include <vector>

#define CHECK(call)                                                                                 \
  do {                                                                                              \
    cudaError_t err_ = (call);                                                                      \
    if (err_ != cudaSuccess) {                                                                      \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(err_)); \
      return 1;                                                                                     \
    }                                                                                               \
  } while (0)

__global__ void axpy(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

struct Scale {
  const float* src;
  float* dst;
  float factor;
  int n;
};

__global__ void scale(Scale s) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < s.n) s.dst[i] = s.src[i] * s.factor;
}

__global__ void sum(const float* in, double* out, int n) {
  __shared__ double partial[256];
  double acc = 0;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) acc += in[i];
  partial[threadIdx.x] = acc;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(out, partial[0]);
}

int main() {
  const int n = 1 << 16;
  std::vector<float> x(n), y(n);
  for (int i = 0; i < n; ++i) {
    x[i] = static_cast<float>(i % 97) * 0.25f;
    y[i] = static_cast<float>(i % 13);
  }
  float *dx, *dy, *dz;
  double* dsum;
  CHECK(cudaMalloc(&dx, n * sizeof(float)));
  CHECK(cudaMalloc(&dy, n * sizeof(float)));
  CHECK(cudaMalloc(&dz, n * sizeof(float)));
  CHECK(cudaMalloc(&dsum, sizeof(double)));
  CHECK(cudaMemcpy(dx, x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dy, y.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  CHECK(cudaMemset(dsum, 0, sizeof(double)));

  const int block = 256, grid = (n + block - 1) / block;
  axpy<<<grid, block>>>(2.0f, dx, dy, n);
  axpy<<<grid, block>>>(-0.5f, dx, dy, n);
  scale<<<grid, block>>>(Scale{dy, dz, 3.0f, n});
  sum<<<64, 256>>>(dz, dsum, n);
  CHECK(cudaGetLastError());

  double total = 0;
  CHECK(cudaMemcpy(&total, dsum, sizeof(double), cudaMemcpyDeviceToHost));
  std::printf("sum of 3 * (1.5 x + y) over %d elements: %.1f\n", n, total);
  CHECK(cudaFree(dx));
  CHECK(cudaFree(dy));
  CHECK(cudaFree(dz));
  CHECK(cudaFree(dsum));
  return 0;
}
