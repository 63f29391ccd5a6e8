// Bug class 4: an architecture-specific code path that is wrong.
//
// checksum sums an int array. Its Hopper path (`#if __CUDA_ARCH__ >= 900`)
// reads 16 bytes at a time as int4 and forgets the last n % 4 elements; the
// generic path reads one int at a time and is right. The program is built
// with sm_90 SASS and compute_80 PTX only
// (-gencode arch=compute_90,code=sm_90 -gencode arch=compute_80,code=compute_80):
// an H100/H200 runs the sm_90 SASS (the Hopper path, wrong); an A100, or the
// H200 JIT-compiling the compute_80 PTX, runs the generic path (right).
//
// Inputs: launch 0, fill_ramp writes x.
//         launch 1, checksum of 4096 elements: right on every GPU.
//         launch 2, checksum of 4099 elements: on sm_90 the last 3 are missing.
// A correct version adds the remainder after the vector loop (the fixed build,
// arch_path_fixed.cu).
// kcap: `kcap bisect --against force-ptx` names launch 2; `kcap replay --launch
// 2 --override checksum=arch_path_fixed.fatbin` gives the PTX path's answer.
#include "bug_common.h"

extern "C" __global__ void fill_ramp(int* x, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = (i * 7919) % 1000 - 300;
}

extern "C" __global__ void checksum(const int* x, int n, unsigned long long* out) {
  const int tid = blockIdx.x * blockDim.x + threadIdx.x, stride = gridDim.x * blockDim.x;
  long long acc = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // Hopper: 16-byte loads. BUG: the n % 4 elements after the last int4 are never added.
  const int4* x4 = reinterpret_cast<const int4*>(x);
  for (int i = tid; i < n / 4; i += stride) {
    const int4 v = x4[i];
    acc += static_cast<long long>(v.x) + v.y + v.z + v.w;
  }
#else
  for (int i = tid; i < n; i += stride) acc += x[i];
#endif
  atomicAdd(out, static_cast<unsigned long long>(acc));
}

int main() {
  const int n = 4099;
  int* x = nullptr;
  unsigned long long* sums = nullptr;
  BUG_CHECK(cudaMalloc(&x, n * sizeof(int)));
  BUG_CHECK(cudaMalloc(&sums, 2 * sizeof(unsigned long long)));
  BUG_CHECK(cudaMemset(sums, 0, 2 * sizeof(unsigned long long)));
  cudaFuncAttributes attributes{};
  BUG_CHECK(cudaFuncGetAttributes(&attributes, checksum));
  std::printf("result checksum runs code built for compute capability %d (PTX %d)\n", attributes.binaryVersion,
              attributes.ptxVersion);

  fill_ramp<<<(n + 255) / 256, 256>>>(x, n);
  BUG_LAUNCHED();
  checksum<<<4, 128>>>(x, 4096, sums);
  BUG_LAUNCHED();
  checksum<<<4, 128>>>(x, n, sums + 1);
  BUG_LAUNCHED();

  unsigned long long host[2] = {};
  BUG_CHECK(cudaMemcpy(host, sums, sizeof host, cudaMemcpyDeviceToHost));
  long long expected[2] = {0, 0};
  for (int i = 0; i < n; ++i) {
    const long long v = (static_cast<long long>(i) * 7919) % 1000 - 300;
    if (i < 4096) expected[0] += v;
    expected[1] += v;
  }
  for (int k = 0; k < 2; ++k) {
    std::printf("result checksum of %d elements %lld (expected %lld)\n", k == 0 ? 4096 : n,
                static_cast<long long>(host[k]), expected[k]);
  }
  return 0;
}
