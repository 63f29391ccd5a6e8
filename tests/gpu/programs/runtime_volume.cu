// Pitched volumes through the runtime API: cudaMalloc3D, cudaMemcpy3D host to
// device, and cudaMemcpy3D device to device between three launches of a
// kernel that reads the volume. Recorded and replayed as one sequence
// (tests/gpu/CMakeLists.txt, gpu_runtime_volume): launches 1 and 2 read rows
// that only the 3D copies wrote, so they reproduce only if kcap recorded
// those and replay re-applied them.
//
//   x: kSlices slices of kRows rows of kColumns floats (cudaMalloc3D, pitched);
//   y: kSlices * kRows * kColumns floats
//     cudaMemset x = 0 (padding included); y = 0
//   0 accumulate a=1   y += a * x
//     cudaMemcpy3D host -> x: slice z, row r, column c = z * 1000 + r * 100 + c,
//     from rows 1..kRows of each slice of a linear host volume (rows
//     kHostPitch floats apart, slices kHostRows rows apart)
//   1 accumulate a=2
//     cudaMemcpy3D y -> x (device to device): y read as a volume of kRows
//     rows of kColumns floats a slice; columns 0..31 of rows 0..kRows-2 of
//     each slice to columns 32..63 of rows 1..kRows-1 of the same slice of x
//   2 accumulate a=1
#include "runtime_program.h"

#include <vector>

namespace {

constexpr int kSlices = 3;
constexpr int kRows = 8;
constexpr int kColumns = 64;
constexpr int kHostPitch = 80;        // floats
constexpr int kHostRows = kRows + 2;  // rows per host slice

}  // namespace

extern "C" __global__ void accumulate(float a, const float* x, size_t pitch, float* y, int columns, int rows,
                                      int slices) {
  const int c = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  const int r = static_cast<int>(blockIdx.y);
  const int z = static_cast<int>(blockIdx.z);
  if (c < columns && r < rows && z < slices) {
    const size_t row = static_cast<size_t>(z) * rows + r;
    const float* in = reinterpret_cast<const float*>(reinterpret_cast<const char*>(x) + row * pitch);
    y[row * columns + c] += a * in[c];
  }
}

int main() {
  test::Made made;
  cudaPitchedPtr x{};
  CUDA_CHECK(cudaMalloc3D(&x, make_cudaExtent(kColumns * sizeof(float), kRows, kSlices)));
  const size_t pitch = x.pitch;
  float* y = nullptr;
  const size_t elements = static_cast<size_t>(kSlices) * kRows * kColumns;
  CUDA_CHECK(cudaMalloc(&y, elements * sizeof(float)));
  CUDA_CHECK(cudaMemset(x.ptr, 0, pitch * kRows * kSlices));
  CUDA_CHECK(cudaMemset(y, 0, elements * sizeof(float)));
  // What x and y hold, computed alongside (row-major, kColumns wide).
  std::vector<float> xs(elements, 0.0f);
  std::vector<float> ys(elements, 0.0f);
  const auto at = [](int c, int r, int z) { return (static_cast<size_t>(z) * kRows + r) * kColumns + c; };
  const auto launch = [&](float a) {
    accumulate<<<dim3(1, kRows, kSlices), kColumns>>>(a, static_cast<const float*>(x.ptr), pitch, y, kColumns, kRows,
                                                      kSlices);
    LAUNCH_CHECK();
    CUDA_CHECK(cudaDeviceSynchronize());
    made.launch("accumulate");
    for (size_t i = 0; i < ys.size(); ++i) {
      ys[i] += a * xs[i];
    }
  };

  launch(1.0f);

  std::vector<float> host(static_cast<size_t>(kSlices) * kHostRows * kHostPitch, -1.0f);
  for (int z = 0; z < kSlices; ++z) {
    for (int r = 0; r < kRows; ++r) {
      for (int c = 0; c < kColumns; ++c) {
        const float value = static_cast<float>(z * 1000 + r * 100 + c);
        host[(static_cast<size_t>(z) * kHostRows + r + 1) * kHostPitch + c] = value;
        xs[at(c, r, z)] = value;
      }
    }
  }
  cudaMemcpy3DParms up{};
  up.srcPtr = make_cudaPitchedPtr(host.data(), kHostPitch * sizeof(float), kHostPitch, kHostRows);
  up.srcPos = make_cudaPos(0, 1, 0);
  up.dstPtr = x;
  up.extent = make_cudaExtent(kColumns * sizeof(float), kRows, kSlices);
  up.kind = cudaMemcpyHostToDevice;
  CUDA_CHECK(cudaMemcpy3D(&up));

  launch(2.0f);

  cudaMemcpy3DParms across{};
  across.srcPtr = make_cudaPitchedPtr(y, kColumns * sizeof(float), kColumns, kRows);
  across.dstPtr = x;
  across.dstPos = make_cudaPos(32 * sizeof(float), 1, 0);
  across.extent = make_cudaExtent(32 * sizeof(float), kRows - 1, kSlices);
  across.kind = cudaMemcpyDeviceToDevice;
  CUDA_CHECK(cudaMemcpy3D(&across));
  for (int z = 0; z < kSlices; ++z) {
    for (int r = 0; r + 1 < kRows; ++r) {
      for (int c = 0; c < 32; ++c) {
        xs[at(32 + c, r + 1, z)] = ys[at(c, r, z)];
      }
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
  CUDA_CHECK(cudaFree(x.ptr));
  made.print();
  return 0;
}
