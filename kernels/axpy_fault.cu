// axpy_fault: axpy (kernels/axpy.cu) that writes far outside y when n is
// positive, for the GPU test of replay's fault isolation
// (`kcap replay --override axpy=axpy_fault.fatbin`): the launch must be
// reported FAULT with CUDA_ERROR_ILLEGAL_ADDRESS, and the launches replayed
// after it, in a fresh replay process, must still reproduce. (On the driver
// double this build runs the ordinary host axpy: it is a GPU-only test.)

extern "C" __global__ void axpy(float a, const float* x, float* y, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i == 0 && n > 0) {
    // 1 TiB past y: no allocation of a test program is there.
    y[(static_cast<long long>(1) << 40) / static_cast<long long>(sizeof(float))] = a * x[0];
  }
}
