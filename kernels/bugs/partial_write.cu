// Bug class 10: a partial write that leaves output rows unwritten.
//
// group_center subtracts each group's mean from the group's rows (a group is
// rows_per_group consecutive rows of 64 columns; one block of 64 x 4 threads
// per group). The write loop is unrolled by 4 rows, one per threadIdx.y, and
// has no remainder loop: with rows_per_group = 8 every row is written, with 6
// the last 2 rows of every group are never written and keep whatever out
// held (zeros here), silently.
//
// Inputs: launch 0, 16 groups of 8 rows: right.
//         launch 1, 16 groups of 6 rows: rows 4 and 5 of each group unwritten;
//         the first is row 4 (byte 4 * 64 * 4 = 1024 of out).
// A correct version finishes the rows_per_group % 4 remaining rows (the fixed
// build, partial_write_fixed.cu).
// kcap: `kcap replay --launch 1 --check unwritten` names the launch;
// `--override group_center=partial_write_fixed.fatbin` differs from byte 1024.
#include "bug_common.h"

#include <vector>

constexpr int kCols = 64, kGroups = 16;

extern "C" __global__ void group_center(const float* x, float* out, int rows_per_group) {
  __shared__ float partial[kCols * 4];
  const int tx = threadIdx.x, ty = threadIdx.y, t = ty * kCols + tx;
  const size_t base = static_cast<size_t>(blockIdx.x) * rows_per_group * kCols;
  float acc = 0.0f;
  for (int r = ty; r < rows_per_group; r += 4) acc += x[base + r * kCols + tx];
  partial[t] = acc;
  __syncthreads();
  for (int s = kCols * 4 / 2; s > 0; s /= 2) {
    if (t < s) partial[t] += partial[t + s];
    __syncthreads();
  }
  const float mean = partial[0] / static_cast<float>(rows_per_group * kCols);
  for (int r0 = 0; r0 + 4 <= rows_per_group; r0 += 4) {  // BUG: no loop for the last rows_per_group % 4 rows
    const size_t at = base + static_cast<size_t>(r0 + ty) * kCols + tx;
    out[at] = x[at] - mean;
  }
}

static void run(int rows_per_group) {
  const size_t count = static_cast<size_t>(kGroups) * rows_per_group * kCols;
  std::vector<float> host(count);
  for (size_t i = 0; i < count; ++i) host[i] = static_cast<float>(i % 50) + 0.25f;
  float *x, *out;
  BUG_CHECK(cudaMalloc(&x, count * sizeof(float)));
  BUG_CHECK(cudaMalloc(&out, count * sizeof(float)));
  BUG_CHECK(cudaMemcpy(x, host.data(), count * sizeof(float), cudaMemcpyHostToDevice));
  BUG_CHECK(cudaMemset(out, 0, count * sizeof(float)));
  group_center<<<kGroups, dim3(kCols, 4)>>>(x, out, rows_per_group);
  BUG_LAUNCHED();
  BUG_CHECK(cudaMemcpy(host.data(), out, count * sizeof(float), cudaMemcpyDeviceToHost));
  double sum_abs = 0;
  int zero_rows = 0;
  for (size_t row = 0; row < count / kCols; ++row) {
    bool zero = true;
    for (int c = 0; c < kCols; ++c) {
      const float v = host[row * kCols + c];
      sum_abs += v < 0 ? -v : v;
      zero = zero && v == 0.0f;
    }
    zero_rows += zero;
  }
  std::printf("result group_center %d groups of %d rows: sum |out| %.2f, all-zero rows %d\n", kGroups, rows_per_group,
              sum_abs, zero_rows);
}

int main() {
  run(8);
  run(6);
  return 0;
}
