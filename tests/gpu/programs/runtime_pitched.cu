// Pitched memory through the runtime API: cudaMallocPitch, cudaMemcpy2D host
// to device, cudaMemset2D, and cudaMemcpy2D device to device between three
// launches of a kernel that reads the pitched buffer. Recorded and replayed
// as one sequence (tests/gpu/CMakeLists.txt, gpu_runtime_pitched): launches 1
// and 2 read rows that only the 2D copies and the memset wrote, so they
// reproduce only if kcap recorded those and replay re-applied them.
//
//   x: kRows rows of kColumns floats, pitched; y: kRows * kColumns floats
//     cudaMemset x = 0 (padding included); y = 0
//   0 accumulate a=1   y += a * x
//     cudaMemcpy2D host -> x: row r, column c = r * 100 + c (host rows
//     kHostPitch floats apart)
//     cudaMemset2D rows 2..5, bytes 64..191 = 0x40
//   1 accumulate a=2
//     cudaMemcpy2D y -> x (device to device): row r of y, columns 0..31, to
//     columns 32..63 of row r of x
//   2 accumulate a=1
#include "runtime_program.h"

#include <cstring>
#include <vector>

namespace {

constexpr int kRows = 8;
constexpr int kColumns = 64;
constexpr int kHostPitch = 80;  // floats

}  // namespace

extern "C" __global__ void accumulate(float a, const float* x, size_t pitch, float* y, int columns, int rows) {
  const int c = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  const int r = static_cast<int>(blockIdx.y);
  if (c < columns && r < rows) {
    const float* row = reinterpret_cast<const float*>(reinterpret_cast<const char*>(x) + r * pitch);
    y[r * columns + c] += a * row[c];
  }
}

int main() {
  test::Made made;
  float* x = nullptr;
  size_t pitch = 0;
  CUDA_CHECK(cudaMallocPitch(&x, &pitch, kColumns * sizeof(float), kRows));
  float* y = nullptr;
  CUDA_CHECK(cudaMalloc(&y, kRows * kColumns * sizeof(float)));
  CUDA_CHECK(cudaMemset(x, 0, pitch * kRows));
  CUDA_CHECK(cudaMemset(y, 0, kRows * kColumns * sizeof(float)));
  // What x and y hold, computed alongside (row-major, kColumns wide).
  std::vector<float> xs(kRows * kColumns, 0.0f);
  std::vector<float> ys(kRows * kColumns, 0.0f);
  const auto launch = [&](float a) {
    accumulate<<<dim3(1, kRows), kColumns>>>(a, x, pitch, y, kColumns, kRows);
    LAUNCH_CHECK();
    CUDA_CHECK(cudaDeviceSynchronize());
    made.launch("accumulate");
    for (size_t i = 0; i < ys.size(); ++i) {
      ys[i] += a * xs[i];
    }
  };

  launch(1.0f);

  std::vector<float> host(kRows * kHostPitch, -1.0f);
  for (int r = 0; r < kRows; ++r) {
    for (int c = 0; c < kColumns; ++c) {
      host[r * kHostPitch + c] = static_cast<float>(r * 100 + c);
      xs[r * kColumns + c] = host[r * kHostPitch + c];
    }
  }
  CUDA_CHECK(cudaMemcpy2D(x, pitch, host.data(), kHostPitch * sizeof(float), kColumns * sizeof(float), kRows,
                          cudaMemcpyHostToDevice));
  CUDA_CHECK(
      cudaMemset2D(reinterpret_cast<char*>(x) + 2 * pitch + 16 * sizeof(float), pitch, 0x40, 32 * sizeof(float), 4));
  float set = 0.0f;
  const unsigned bits = 0x40404040u;
  std::memcpy(&set, &bits, sizeof set);
  for (int r = 2; r < 6; ++r) {
    for (int c = 16; c < 48; ++c) {
      xs[r * kColumns + c] = set;
    }
  }

  launch(2.0f);

  CUDA_CHECK(cudaMemcpy2D(reinterpret_cast<char*>(x) + 32 * sizeof(float), pitch, y, kColumns * sizeof(float),
                          32 * sizeof(float), kRows, cudaMemcpyDeviceToDevice));
  for (int r = 0; r < kRows; ++r) {
    for (int c = 0; c < 32; ++c) {
      xs[r * kColumns + 32 + c] = ys[r * kColumns + c];
    }
  }

  launch(1.0f);

  std::vector<float> out(ys.size());
  CUDA_CHECK(cudaMemcpy(out.data(), y, out.size() * sizeof(float), cudaMemcpyDeviceToHost));
  double sum = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    CHECK(out[i] == ys[i]);
    sum += out[i];
  }
  std::printf("result sum %.3f\n", sum);
  CUDA_CHECK(cudaFree(y));
  CUDA_CHECK(cudaFree(x));
  made.print();
  return 0;
}
