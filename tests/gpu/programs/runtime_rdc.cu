// Relocatable device code (nvcc -rdc=true, CMake CUDA_SEPARABLE_COMPILATION):
// the kernel `blend` here calls `shifted`, a __device__ function of another
// translation unit (runtime_rdc_lib.cu) that reads a __device__ variable
// defined there. cudart registers the device-link output with the two units'
// own fatbins as extras (a version 2 fatbin wrapper); kcap records them all,
// and replay loads the device-linked SASS, or links the units itself when
// that SASS does not fit (--force-ptx: tests/gpu/CMakeLists.txt runs both).
//
//   y[i] = a * x[i] + shifted(x[i])   where shifted(v) = v + rdc_offset
//   three launches, a = 1, 2, 3; rdc_offset set to 0.5 with cudaMemcpyToSymbol
//   (a copy into the other unit's variable: replay must place it)
#include "runtime_program.h"
#include "runtime_rdc_lib.h"

#include <vector>

namespace {
constexpr int kN = 4096;
}

extern "C" __global__ void blend(float a, const float* x, float* y, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) {
    y[i] = a * x[i] + shifted(x[i]);
  }
}

int main() {
  test::Made made;
  std::vector<float> host(kN);
  for (int i = 0; i < kN; ++i) {
    host[i] = static_cast<float>(i % 97) * 0.25f;
  }
  float* x = nullptr;
  float* y = nullptr;
  CUDA_CHECK(cudaMalloc(&x, kN * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&y, kN * sizeof(float)));
  CUDA_CHECK(cudaMemcpy(x, host.data(), kN * sizeof(float), cudaMemcpyHostToDevice));
  setOffset(0.5f);
  double total = 0;
  for (int a = 1; a <= 3; ++a) {
    blend<<<kN / 256, 256>>>(static_cast<float>(a), x, y, kN);
    LAUNCH_CHECK();
    CUDA_CHECK(cudaDeviceSynchronize());
    made.launch("blend");
    std::vector<float> out(kN);
    CUDA_CHECK(cudaMemcpy(out.data(), y, kN * sizeof(float), cudaMemcpyDeviceToHost));
    for (int i = 0; i < kN; ++i) {
      const float expected = static_cast<float>(a) * host[i] + host[i] + 0.5f;
      if (out[i] != expected) {
        std::fprintf(stderr, "FAILED: a=%d y[%d] = %g, expected %g\n", a, i, out[i], expected);
        return 1;
      }
      total += out[i];
    }
  }
  std::printf("result blend sum %.2f\n", total);
  CUDA_CHECK(cudaFree(x));
  CUDA_CHECK(cudaFree(y));
  made.print();
  return 0;
}
