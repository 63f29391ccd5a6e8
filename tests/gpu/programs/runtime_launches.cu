// Runtime-API launches: <<<>>> on the default stream and on a stream, and
// cudaLaunchKernel, of extern "C", namespaced and template kernels. Built
// three ways (tests/gpu/CMakeLists.txt): static cudart, shared cudart, and
// static cudart with --default-stream per-thread, where cudart must reach the
// driver through the per-thread (_ptsz) launch entry point.
#include "runtime_program.h"

namespace {

constexpr int kN = 1 << 16;
constexpr int kBlock = 256;
constexpr int kGrid = kN / kBlock;

}  // namespace

extern "C" __global__ void add_one(float* y, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) {
    y[i] += 1.0f;
  }
}

extern "C" __global__ void scale(float* y, float factor, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) {
    y[i] *= factor;
  }
}

namespace kt {
__global__ void square(float* y, int n)  // launched as _ZN2kt6squareEPfi
{
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) {
    y[i] *= y[i];
  }
}
}  // namespace kt

template <typename T>
__global__ void fill(T* y, T value, int n)  // fill<float>: _Z4fillIfEvPT_S0_i
{
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) {
    y[i] = value;
  }
}

int main() {
#ifdef CUDA_API_PER_THREAD_DEFAULT_STREAM
  const char* launch_symbol = "cuLaunchKernel_ptsz";
  const char* other_symbol = "cuLaunchKernel";
#else
  const char* launch_symbol = "cuLaunchKernel";
  const char* other_symbol = "cuLaunchKernel_ptsz";
#endif
  test::Made made;
  float* y = nullptr;
  CUDA_CHECK(cudaMalloc(&y, kN * sizeof(float)));

  fill<float><<<kGrid, kBlock>>>(y, 0.0f, kN);
  LAUNCH_CHECK();
  made.launch("_Z4fillIfEvPT_S0_i");
  for (int i = 0; i < 5; ++i) {
    add_one<<<kGrid, kBlock>>>(y, kN);
    LAUNCH_CHECK();
  }
  made.launch("add_one", 5);
  CUDA_CHECK(cudaDeviceSynchronize());

  cudaStream_t stream = nullptr;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  scale<<<kGrid, kBlock, 0, stream>>>(y, 3.0f, kN);
  LAUNCH_CHECK();
  kt::square<<<kGrid, kBlock, 0, stream>>>(y, kN);
  LAUNCH_CHECK();
  made.launch("scale");
  made.launch("_ZN2kt6squareEPfi");
  CUDA_CHECK(cudaStreamSynchronize(stream));

  int n = kN;
  void* args[] = {&y, &n};
  CUDA_CHECK(cudaLaunchKernel(reinterpret_cast<const void*>(&add_one), dim3(kGrid), dim3(kBlock), args, 0, nullptr));
  made.launch("add_one");
  CUDA_CHECK(cudaDeviceSynchronize());

  // Every launch above reaches the driver through one entry point.
  made.call(launch_symbol, 9);
  made.call(other_symbol, 0);

  float* host = new float[kN];
  CUDA_CHECK(cudaMemcpy(host, y, kN * sizeof(float), cudaMemcpyDeviceToHost));
  double sum = 0;
  for (int i = 0; i < kN; ++i) {
    CHECK(host[i] == 226.0f);  // ((0 + 5) * 3)^2 + 1
    sum += host[i];
  }
  delete[] host;
  std::printf("result sum %.1f\n", sum);

  CUDA_CHECK(cudaStreamDestroy(stream));
  CUDA_CHECK(cudaFree(y));
  made.print();
  return 0;
}
