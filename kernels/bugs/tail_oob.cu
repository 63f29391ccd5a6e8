// Bug class 1: tail out-of-bounds when n is not a multiple of the tile.
//
// tile_scale computes y = 2x + 1 one 256-element tile per block and, written
// for sizes that are whole tiles, has no bounds check: the grid is
// ceil(n / 256) blocks, so for n = 4000 the last block reads x[4000..4095]
// and writes y[4000..4095], 384 bytes past the end of both buffers. Nothing
// crashes (cudaMalloc's pool is mapped past the end) and the first n outputs
// are right, so the program's results look fine: the write lands in whatever
// the allocator put after y.
//
// Inputs: launch 0, n = 4096 (16 whole tiles): correct, in bounds.
//         launch 1, n = 4000 (15 tiles and 160 elements): the overrun.
// A correct version guards the tail: `if (i < n) y[i] = 2 * x[i] + 1;`.
// kcap: `kcap replay --launch 1 --check overrun` names the launch.
#include "bug_common.h"

#include <vector>

constexpr int kTile = 256;

extern "C" __global__ void tile_scale(const float* x, float* y, int n) {
  const int i = blockIdx.x * kTile + threadIdx.x;
  (void)n;  // BUG: the tile is assumed full; there is no `if (i < n)`
  y[i] = 2.0f * x[i] + 1.0f;
}

static double run(int n) {
  std::vector<float> host(n);
  for (int i = 0; i < n; ++i) host[i] = static_cast<float>(i % 101) * 0.5f;
  float* x = nullptr;
  float* y = nullptr;
  BUG_CHECK(cudaMalloc(&x, n * sizeof(float)));
  BUG_CHECK(cudaMalloc(&y, n * sizeof(float)));
  BUG_CHECK(cudaMemcpy(x, host.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  BUG_CHECK(cudaMemset(y, 0, n * sizeof(float)));
  tile_scale<<<(n + kTile - 1) / kTile, kTile>>>(x, y, n);
  BUG_LAUNCHED();
  BUG_CHECK(cudaMemcpy(host.data(), y, n * sizeof(float), cudaMemcpyDeviceToHost));
  double sum = 0;
  for (float v : host) sum += v;
  // x and y are not freed: the overrun of the second call lands past y,
  // where this program has nothing; freeing would let it land elsewhere.
  return sum;
}

int main() {
  std::printf("result tile_scale n=4096 sum %.1f\n", run(4096));
  std::printf("result tile_scale n=4000 sum %.1f\n", run(4000));
  return 0;
}
