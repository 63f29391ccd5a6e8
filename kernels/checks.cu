// checks: kernels with the defects `kcap replay --check` looks for, one per
// checker (tests/replay/programs/replay_scenarios.cpp records them against the
// driver double, whose host versions in tests/driver_double/host_kernels.cpp
// behave the same). All take (const float* x, float* y, int n).
//
//   racy_sum    *y += sum(x) with one float atomicAdd per element: the
//               order, and so the rounding, varies from run to run
//   fill_empty  y[i] = x[i] only where y[i] == 0: what it writes depends on
//               its output's prior contents
//   pad_scale   y[i] = x[i] + 0 * x[i + n]: reads a padding half of x that
//               the program never wrote (NaN there makes y NaN)
//   add_first   y[i] = x[0] + x[i]: wrong when y aliases x (x[0] changes)
//   sum_next    y[i] = x[i], reading x[i + 1] too: one element past the end
//               of x for i = n - 1
//   pad_max     y[i] = fmaxf(x[i], x[i + n]): reads the padding half of x
//               like pad_scale, through a max, which ignores NaN
//   scale_next  y[i] = x[i] + 0 * x[i + 1]: reads one element past the end
//               of x, and its value matters when it is NaN or infinite
//   shift_store y[i + 1] = x[i]: writes one element past the end of y

extern "C" __global__ void racy_sum(const float* x, float* y, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) {
    atomicAdd(y, x[i]);
  }
}

extern "C" __global__ void fill_empty(const float* x, float* y, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n && y[i] == 0.0f) {
    y[i] = x[i];
  }
}

extern "C" __global__ void pad_scale(const float* x, float* y, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) {
    y[i] = x[i] + 0.0f * x[i + n];
  }
}

extern "C" __global__ void add_first(const float* x, float* y, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) {
    y[i] = x[0] + x[i];
  }
}

extern "C" __global__ void sum_next(const float* x, float* y, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) {
    // The value read past the end must not matter (it is whatever lies
    // there): only one improbable NaN payload changes the result.
    y[i] = x[i] + (__float_as_int(x[i + 1]) == 0x7fc0beef ? 1.0f : 0.0f);
  }
}

// Rows of 8 floats of which only the first 6 are written (an unrolled loop
// without its remainder): `unwritten` reports the holes.
extern "C" __global__ void skip_rows(const float* x, float* y, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n && i % 8 < 6) {
    y[i] = x[i];
  }
}

extern "C" __global__ void pad_max(const float* x, float* y, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) {
    y[i] = fmaxf(x[i], x[i + n]);
  }
}

extern "C" __global__ void scale_next(const float* x, float* y, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) {
    y[i] = x[i] + 0.0f * x[i + 1];
  }
}

extern "C" __global__ void shift_store(const float* x, float* y, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) {
    y[i + 1] = x[i];
  }
}
