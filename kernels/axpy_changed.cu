// axpy_changed: axpy (kernels/axpy.cu) with one deliberate error, for testing
// `kcap replay --override axpy=axpy_changed.<image>`: the replay must report
// DIFFERS, and exactly where.
//
// Same extern "C" name and parameters as axpy, so it overrides it; but y[100]
// gets the correct value with its lowest bit flipped (1 ULP off for a normal
// float). Element 100 is the only wrong one, and the first differing byte of y
// is byte 400 = 100 * sizeof(float) exactly (the low byte of a little-endian
// float changes, whatever the value).
//
// kcap_axpy_changed_marker names this build: the driver double runs a host
// axpy for any image that defines `axpy`, so it looks for this variable's
// name in an image to run its changed host axpy instead (tests/driver_double/
// images.cpp). On a GPU it does nothing.

extern "C" __device__ int kcap_axpy_changed_marker = 1;

extern "C" __global__ void axpy(float a, const float* x, float* y, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) {
    float v = a * x[i] + y[i];
    if (i == 100) {
      v = __uint_as_float(__float_as_uint(v) ^ 1u);  // the deliberate error
    }
    y[i] = v;
  }
}
