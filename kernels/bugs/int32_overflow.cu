// Bug class 7: int32 index overflow for large n.
//
// strided_copy copies a rows x cols int8 matrix with leading dimension ld
// into a packed output, doubling each element. The output index is 64-bit,
// but the source offset row * ld + col is an int: past 2^31 - 1 it wraps to
// a negative number, and elements 2^31 and up are read from 2 GiB before x.
// Here x is the upper half of one allocation whose lower half holds another
// tensor (as a caching allocator lays tensors out), so the wrong reads land
// there: no fault, just wrong values in the tail of y.
//
// Inputs: launch 0, 4 x 4096 (small): right.
//         launch 1, 524289 x 4096 = 2^31 + 4096 elements (2 GiB of int8, 6.4
//         GB of device memory in all): y[2^31 ..] holds 2 * (the other tensor)
//         instead of 2 * x.
// A correct version computes the offset in 64 bits (the fixed build,
// int32_overflow_fixed.cu).
// kcap: `kcap bisect --against override:strided_copy=int32_overflow_fixed.fatbin`
// names launch 1, whose y differs from byte 2^31 on.
#include "bug_common.h"

#include <cstdint>
#include <vector>

extern "C" __global__ void strided_copy(const int8_t* x, int8_t* y, int rows, int cols, int ld) {
  const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<long long>(rows) * cols) return;
  const int row = static_cast<int>(i / cols), col = static_cast<int>(i % cols);
  // BUG: a 32-bit offset (computed as the hardware does, wrapping past 2^31 - 1).
  const int src = static_cast<int>(static_cast<unsigned>(row) * static_cast<unsigned>(ld) + col);
  y[i] = static_cast<int8_t>(2 * x[src]);
}

static void run(int rows, int cols) {
  const long long n = static_cast<long long>(rows) * cols;
  // the tensor below x in the same allocation (2 GiB where the wrapped offsets reach)
  const size_t other = n > 0x7fffffffll ? size_t{1} << 31 : 4096;
  int8_t *arena, *y;
  BUG_CHECK(cudaMalloc(&arena, other + n));
  BUG_CHECK(cudaMalloc(&y, n));
  int8_t* x = arena + other;
  BUG_CHECK(cudaMemset(arena, 0x7f, other));
  BUG_CHECK(cudaMemset(x, 3, n));
  BUG_CHECK(cudaMemset(y, 0, n));
  const long long blocks = (n + 255) / 256;
  strided_copy<<<static_cast<unsigned>(blocks), 256>>>(x, y, rows, cols, cols);
  BUG_LAUNCHED();
  // y[0], y[2^31 - 1], y[2^31], y[n - 1] (where they exist), and the wrong elements of the last 8 KiB.
  const long long tail = n < 8192 ? n : 8192;
  std::vector<int8_t> last(tail);
  BUG_CHECK(cudaMemcpy(last.data(), y + n - tail, tail, cudaMemcpyDeviceToHost));
  long long wrong = 0;
  for (int8_t v : last) wrong += v != 6;
  std::printf("result strided_copy %d x %d: wrong elements in the last %lld: %lld\n", rows, cols, tail, wrong);
  for (long long at : {0ll, (1ll << 31) - 1, 1ll << 31, n - 1}) {
    if (at >= n) continue;
    int8_t v = 0;
    BUG_CHECK(cudaMemcpy(&v, y + at, 1, cudaMemcpyDeviceToHost));
    std::printf("result strided_copy %d x %d: y[%lld] = %d (expected 6)\n", rows, cols, at, v);
  }
  BUG_CHECK(cudaFree(arena));
  BUG_CHECK(cudaFree(y));
}

int main() {
  run(4, 4096);
  run(524289, 4096);
  return 0;
}
