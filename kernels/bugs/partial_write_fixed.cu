// The fixed build of partial_write.cu's group_center (same name and
// parameters, for `--override group_center=partial_write_fixed.fatbin`): the
// write loop covers every row of the group.
constexpr int kCols = 64;

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
  for (int r = ty; r < rows_per_group; r += 4) {
    const size_t at = base + static_cast<size_t>(r) * kCols + tx;
    out[at] = x[at] - mean;
  }
}
