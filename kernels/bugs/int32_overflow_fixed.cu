// The fixed build of int32_overflow.cu's strided_copy (same name and
// parameters, for `--override strided_copy=int32_overflow_fixed.fatbin`): the
// source offset is computed in 64 bits.
#include <cstdint>

extern "C" __global__ void strided_copy(const int8_t* x, int8_t* y, int rows, int cols, int ld) {
  const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<long long>(rows) * cols) return;
  const int row = static_cast<int>(i / cols), col = static_cast<int>(i % cols);
  const long long src = static_cast<long long>(row) * ld + col;
  y[i] = static_cast<int8_t>(2 * x[src]);
}
