// axpy_slow: axpy (kernels/axpy.cu) with the same results, about 200 us
// slower: each thread waits on the global timer before its element. For
// `kcap bisect --perf --against override:axpy=axpy_slow.<image>` on a GPU,
// which must list every axpy launch as slower and nothing else
// (tests/gpu/replay_checks.py).

extern "C" __global__ void axpy(float a, const float* x, float* y, int n) {
  unsigned long long start = 0, now = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < 200000);
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) {
    y[i] = a * x[i] + y[i];
  }
}
