// Bug class 6: a hang when a loop runs zero times and a flag is never set.
//
// chunked_sum: thread 0 adds up `chunks` chunks of the input and, at the end
// of the last chunk, publishes the total and sets `ready`; threads 32..127
// wait for `ready`, then scale the total into out. The flag is set inside the
// loop ("after the last chunk"), so with chunks = 0 the loop never runs, the
// flag is never set and the waiting threads spin forever. Here they give up
// after 2 s of %globaltimer and record that in *status, so the kernel ends
// and the GPU is not wedged: a bounded hang.
//
// Inputs: launch 0, chunks = 4: right, quick.
//         launch 1, chunks = 0 (an empty batch): spins 2 s, status 1, out untouched.
// A correct version publishes the total and sets the flag after the loop,
// whatever the number of chunks.
// kcap: `kcap replay --timeout 1` reports launch 1 as HANG.
#include "bug_common.h"

#include <vector>

constexpr unsigned long long kGiveUpNs = 2000000000ull;
constexpr int kChunk = 64, kThreads = 128, kOut = kThreads - 32;

__device__ unsigned long long now_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

extern "C" __global__ void chunked_sum(const float* in, int chunks, unsigned* ready, float* total, float* out,
                                       int* status) {
  if (threadIdx.x == 0) {
    float acc = 0.0f;
    for (int c = 0; c < chunks; ++c) {
      for (int k = 0; k < kChunk; ++k) acc += in[c * kChunk + k];
      if (c == chunks - 1) {  // BUG: never reached when chunks == 0
        *reinterpret_cast<volatile float*>(total) = acc;
        __threadfence();
        atomicExch(ready, 1u);
      }
    }
  } else if (threadIdx.x >= 32) {
    const unsigned long long start = now_ns();
    while (atomicAdd(ready, 0u) == 0u) {
      if (now_ns() - start > kGiveUpNs) {
        if (threadIdx.x == 32) *status = 1;  // gave up: the flag never came
        return;
      }
      __nanosleep(1000);
    }
    __threadfence();
    out[threadIdx.x - 32] = *reinterpret_cast<volatile float*>(total) * static_cast<float>(threadIdx.x - 32);
  }
}

int main() {
  std::vector<float> host(4 * kChunk);
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>(i % 9) * 0.5f;
  float *in, *total, *out;
  unsigned* ready;
  int* status;
  BUG_CHECK(cudaMalloc(&in, host.size() * sizeof(float)));
  BUG_CHECK(cudaMalloc(&total, sizeof(float)));
  BUG_CHECK(cudaMalloc(&out, kOut * sizeof(float)));
  BUG_CHECK(cudaMalloc(&ready, sizeof(unsigned)));
  BUG_CHECK(cudaMalloc(&status, sizeof(int)));
  BUG_CHECK(cudaMemcpy(in, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice));
  for (int chunks : {4, 0}) {
    BUG_CHECK(cudaMemset(ready, 0, sizeof(unsigned)));
    BUG_CHECK(cudaMemset(status, 0, sizeof(int)));
    BUG_CHECK(cudaMemset(total, 0, sizeof(float)));
    BUG_CHECK(cudaMemset(out, 0, kOut * sizeof(float)));
    chunked_sum<<<1, kThreads>>>(in, chunks, ready, total, out, status);
    BUG_LAUNCHED();
    int gave_up = 0;
    float last = 0;
    BUG_CHECK(cudaMemcpy(&gave_up, status, sizeof(int), cudaMemcpyDeviceToHost));
    BUG_CHECK(cudaMemcpy(&last, out + kOut - 1, sizeof(float), cudaMemcpyDeviceToHost));
    std::printf("result chunked_sum chunks=%d out[%d] %.1f%s\n", chunks, kOut - 1, last,
                gave_up ? " (the waiting threads gave up after 2 s: ready was never set)" : "");
  }
  return 0;
}
