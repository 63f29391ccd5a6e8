// Bug class 3: an in-place aliasing race (output == input).
//
// center_rows subtracts each row's first value from the row, one warp per
// row: out[r][j] = in[r][j] - in[r][0]. Called in place (out == in), lane 0
// overwrites in[r][0] with 0 in the warp's first pass over the row, and the
// passes after it (columns 32 and up) read that 0 back as the row's first
// value: those columns come out unchanged. The lanes read a value another
// lane writes with nothing ordering the two; with one warp per row it comes
// out the same way every time, so the wrong result looks stable.
//
// Inputs: launch 0, out-of-place (out != in): right.
//         launch 1, in place (out == in), 96 columns: columns 32..95 of every
//         row are wrong.
// A correct version reads the row's first value into a register before any
// lane writes (`const float first = in[base];` ahead of the loop), or
// refuses out == in.
// kcap: `kcap replay --launch 1 --check alias` names the launch.
#include "bug_common.h"

#include <vector>

constexpr int kRows = 32, kCols = 96;

extern "C" __global__ void center_rows(const float* in, float* out, int cols) {
  const int base = blockIdx.x * cols;
  for (int j = threadIdx.x; j < cols; j += 32) {
    out[base + j] = in[base + j] - in[base];  // BUG: in[base] is re-read after lane 0 wrote out[base]
  }
}

static double checksum(const float* device) {
  std::vector<float> host(kRows * kCols);
  BUG_CHECK(cudaMemcpy(host.data(), device, host.size() * sizeof(float), cudaMemcpyDeviceToHost));
  double sum = 0;
  for (int i = 0; i < kRows * kCols; ++i) sum += host[i] * static_cast<double>(1 + i % 3);
  return sum;
}

int main() {
  std::vector<float> host(kRows * kCols);
  for (int r = 0; r < kRows; ++r)
    for (int j = 0; j < kCols; ++j) host[r * kCols + j] = static_cast<float>(r * 10 + j % 17) + 0.5f;
  const size_t bytes = host.size() * sizeof(float);
  float *in, *out, *inout;
  BUG_CHECK(cudaMalloc(&in, bytes));
  BUG_CHECK(cudaMalloc(&out, bytes));
  BUG_CHECK(cudaMalloc(&inout, bytes));
  BUG_CHECK(cudaMemcpy(in, host.data(), bytes, cudaMemcpyHostToDevice));
  BUG_CHECK(cudaMemcpy(inout, host.data(), bytes, cudaMemcpyHostToDevice));
  BUG_CHECK(cudaMemset(out, 0, bytes));

  center_rows<<<kRows, 32>>>(in, out, kCols);
  BUG_LAUNCHED();
  std::printf("result center_rows out-of-place checksum %.2f\n", checksum(out));

  center_rows<<<kRows, 32>>>(inout, inout, kCols);
  BUG_LAUNCHED();
  std::printf("result center_rows in-place checksum %.2f\n", checksum(inout));
  return 0;
}
