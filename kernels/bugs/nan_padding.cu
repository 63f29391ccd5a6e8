// Bug class 2: NaN in unused slots that a full-tile load multiplies by zero.
//
// padded_dot computes out[r] = sum_k a[r][k] * w[k] for rows stored with a
// pitch of kpad = 128 floats, K = 100 of them used. The weights w are
// zero-padded to kpad, so the kernel loads whole 128-wide tiles and "the
// padding contributes 0 * a = 0". It does, while a's padding slots are
// finite; nothing writes them (the rows are copied in with cudaMemcpy2D, K
// columns each), and 0 * NaN = NaN.
//
// Inputs: launch 0, padded_dot on a fresh workspace: the padding is whatever
//         the driver handed out (zeros): right, by luck.
//         launch 1, normalize_rows, a previous operation using the same
//         workspace: rows whose total is 0 become 0 / 0 = NaN, padding included.
//         launch 2, padded_dot again after copying new rows in: the rows whose
//         padding still holds NaN come out NaN.
// A correct version loads only k < K (the fixed build, nan_padding_fixed.cu).
// kcap: `--check uninit` flags launch 0 (it reads bytes nothing wrote);
// `--override padded_dot=nan_padding_fixed.fatbin --dtype f32` on launch 2
// turns exactly the NaN rows into numbers.
#include "bug_common.h"

#include <cmath>
#include <vector>

constexpr int kRows = 64, kK = 100, kKPad = 128;

extern "C" __global__ void padded_dot(const float* a, const float* w, float* out, int rows, int k, int kpad) {
  const int row = blockIdx.x, lane = threadIdx.x;
  if (row >= rows) return;
  (void)k;  // BUG: the loop runs to kpad, trusting w's zero padding
  float acc = 0.0f;
  for (int c = lane; c < kpad; c += 32) acc += a[row * kpad + c] * w[c];
  for (int offset = 16; offset > 0; offset /= 2) acc += __shfl_down_sync(0xffffffffu, acc, offset);
  if (lane == 0) out[row] = acc;
}

// The previous tenant of the workspace: per-row frequencies (count / row total).
extern "C" __global__ void normalize_rows(const float* counts, const float* totals, float* freq, int cols, int count) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < count) freq[i] = counts[i] / totals[i / cols];
}

static void report(const char* what, const float* device, int n) {
  std::vector<float> host(n);
  BUG_CHECK(cudaMemcpy(host.data(), device, n * sizeof(float), cudaMemcpyDeviceToHost));
  double sum = 0;
  int nans = 0;
  for (float v : host) {
    if (std::isnan(v))
      ++nans;
    else
      sum += v;
  }
  std::printf("result %s: sum of finite %.3f, NaN %d of %d\n", what, sum, nans, n);
}

int main() {
  std::vector<float> rows(kRows * kK), weights(kK), counts(kRows * kKPad), totals(kRows);
  for (int i = 0; i < kRows * kK; ++i) rows[i] = static_cast<float>(i % 7) - 3.0f;
  for (int k = 0; k < kK; ++k) weights[k] = static_cast<float>(k % 5) * 0.25f;
  for (int r = 0; r < kRows; ++r) {
    const bool empty = r % 8 == 3;  // rows with no counts at all
    totals[r] = empty ? 0.0f : 64.0f;
    for (int c = 0; c < kKPad; ++c) counts[r * kKPad + c] = empty ? 0.0f : static_cast<float>(c % 2);
  }
  float *workspace, *w, *out, *dcounts, *dtotals;
  BUG_CHECK(cudaMalloc(&workspace, kRows * kKPad * sizeof(float)));
  BUG_CHECK(cudaMalloc(&w, kKPad * sizeof(float)));
  BUG_CHECK(cudaMalloc(&out, kRows * sizeof(float)));
  BUG_CHECK(cudaMalloc(&dcounts, counts.size() * sizeof(float)));
  BUG_CHECK(cudaMalloc(&dtotals, totals.size() * sizeof(float)));
  BUG_CHECK(cudaMemset(w, 0, kKPad * sizeof(float)));  // the zero padding of w
  BUG_CHECK(cudaMemcpy(w, weights.data(), kK * sizeof(float), cudaMemcpyHostToDevice));
  BUG_CHECK(cudaMemcpy(dcounts, counts.data(), counts.size() * sizeof(float), cudaMemcpyHostToDevice));
  BUG_CHECK(cudaMemcpy(dtotals, totals.data(), totals.size() * sizeof(float), cudaMemcpyHostToDevice));

  // Job 1 on the fresh workspace: K columns of each row, the padding untouched.
  BUG_CHECK(cudaMemcpy2D(workspace, kKPad * sizeof(float), rows.data(), kK * sizeof(float), kK * sizeof(float), kRows,
                         cudaMemcpyHostToDevice));
  padded_dot<<<kRows, 32>>>(workspace, w, out, kRows, kK, kKPad);
  BUG_LAUNCHED();
  report("padded_dot on a fresh workspace", out, kRows);

  // Another operation uses the workspace in between.
  normalize_rows<<<(kRows * kKPad + 255) / 256, 256>>>(dcounts, dtotals, workspace, kKPad, kRows * kKPad);
  BUG_LAUNCHED();
  report("normalize_rows (0 / 0 for the empty rows)", workspace, kRows * kKPad);

  // Job 2: the same rows again; the padding now holds the previous tenant's values.
  BUG_CHECK(cudaMemcpy2D(workspace, kKPad * sizeof(float), rows.data(), kK * sizeof(float), kK * sizeof(float), kRows,
                         cudaMemcpyHostToDevice));
  padded_dot<<<kRows, 32>>>(workspace, w, out, kRows, kK, kKPad);
  BUG_LAUNCHED();
  report("padded_dot on a reused workspace", out, kRows);
  return 0;
}
