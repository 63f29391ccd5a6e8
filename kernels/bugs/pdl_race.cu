// Bug class 8: a missing dependency between two kernels launched with
// programmatic dependent launch (PDL).
//
// produce lets the next kernel start early (cudaTriggerProgrammaticLaunchCompletion
// at its top, to overlap the consumer's prologue), works ~200 us, then
// writes buf. The consumers are launched with cudaLaunchKernelEx and
// cudaLaunchAttributeProgrammaticStreamSerialization, so they may start
// before produce has finished. consume_synced calls
// cudaGridDependencySynchronize() before reading buf: right. consume does
// not: it reads buf while produce is still working and gets the zeros that
// were there before.
//
// Inputs: launches 0, 1: produce, consume_synced: right.
//         launches 2, 3: produce, consume: wrong on an sm_90 GPU when the
//         launches overlap. Anything that serializes the launches hides the
//         bug: CUDA_LAUNCH_BLOCKING=1, and `kcap record` (full mode waits for
//         the context before each launch); with either, both sums are right.
// A correct version calls cudaGridDependencySynchronize() before its first
// read of what the previous kernel writes.
// kcap: `kcap replay --range 0..3 --check determinism` (or `kcap bisect
// --sequence`) names launch 3.
#include "bug_common.h"

#include <vector>

constexpr int kN = 1 << 16;

__device__ unsigned long long now_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

extern "C" __global__ void produce(float* buf, int n) {
  cudaTriggerProgrammaticLaunchCompletion();  // the next kernel may start now
  const unsigned long long start = now_ns();
  while (now_ns() - start < 200000) {  // the real work, standing in: ~200 us
  }
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) buf[i] = static_cast<float>(i % 1000) + 1.0f;
}

extern "C" __global__ void consume_synced(const float* buf, float* out, int n) {
  cudaGridDependencySynchronize();  // waits for produce and sees its writes
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = 2.0f * buf[i];
}

extern "C" __global__ void consume(const float* buf, float* out, int n) {
  // BUG: no cudaGridDependencySynchronize(): buf may not be written yet.
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = 2.0f * buf[i];
}

static double pair(void (*consumer)(const float*, float*, int), float* buf, float* out, cudaStream_t stream) {
  BUG_CHECK(cudaMemsetAsync(buf, 0, kN * sizeof(float), stream));
  BUG_CHECK(cudaMemsetAsync(out, 0, kN * sizeof(float), stream));
  produce<<<kN / 256, 256, 0, stream>>>(buf, kN);
  BUG_CHECK(cudaGetLastError());
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(kN / 256);
  config.blockDim = dim3(256);
  config.stream = stream;
  config.attrs = &attribute;
  config.numAttrs = 1;
  BUG_CHECK(cudaLaunchKernelEx(&config, consumer, static_cast<const float*>(buf), out, kN));
  BUG_CHECK(cudaStreamSynchronize(stream));
  std::vector<float> host(kN);
  BUG_CHECK(cudaMemcpy(host.data(), out, kN * sizeof(float), cudaMemcpyDeviceToHost));
  double sum = 0;
  for (float v : host) sum += v;
  return sum;
}

int main() {
  float *buf, *out;
  cudaStream_t stream;
  BUG_CHECK(cudaMalloc(&buf, kN * sizeof(float)));
  BUG_CHECK(cudaMalloc(&out, kN * sizeof(float)));
  BUG_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  double expected = 0;
  for (int i = 0; i < kN; ++i) expected += 2.0 * (i % 1000 + 1);
  std::printf("result produce+consume_synced sum %.1f (expected %.1f)\n", pair(consume_synced, buf, out, stream),
              expected);
  std::printf("result produce+consume sum %.1f (expected %.1f)\n", pair(consume, buf, out, stream), expected);
  BUG_CHECK(cudaStreamDestroy(stream));
  return 0;
}
