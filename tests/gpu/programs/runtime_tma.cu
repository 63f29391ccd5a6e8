// A tensor map (TMA) through cudart: the program encodes a 2D tiled
// CUtensorMap over a float matrix with cuTensorMapEncodeTiled (taken with
// cudaGetDriverEntryPointByVersion, i.e. through cuGetProcAddress, as
// libraries do), and a kernel takes it as a `const __grid_constant__
// CUtensorMap` parameter and loads tiles with cp.async.bulk.tensor. kcap
// records the encode's arguments (a tensorMapEncode event) and the 128-byte
// parameter; replay makes the map again from those arguments at the address
// it placed the matrix (tests/gpu/CMakeLists.txt: gpu_runtime_tma, fixed and
// relocated, as a sequence too).
//
//   in:  kRows x kColumns floats, in[r][c] = (r * 7 + c) % 31 * 0.5
//   out = a * in, tile by tile (kBox x kBox), three launches: a = 1, 2, 3
#include "runtime_program.h"

#include <cuda.h>
#include <cuda/barrier>

#include <utility>
#include <vector>

namespace {

constexpr int kRows = 256;
constexpr int kColumns = 128;
constexpr int kBox = 32;

using Barrier = cuda::barrier<cuda::thread_scope_block>;
namespace cde = cuda::device::experimental;

}  // namespace

extern "C" __global__ void tma_scale(const __grid_constant__ CUtensorMap map, float* out, float a) {
  __shared__ alignas(128) float tile[kBox][kBox];
#pragma nv_diag_suppress static_var_with_dynamic_init
  __shared__ Barrier bar;
  const int column0 = static_cast<int>(blockIdx.x) * kBox;
  const int row0 = static_cast<int>(blockIdx.y) * kBox;
  if (threadIdx.x == 0) {
    init(&bar, blockDim.x);
    cde::fence_proxy_async_shared_cta();  // the barrier, visible to the copy engine
  }
  __syncthreads();
  Barrier::arrival_token token;
  if (threadIdx.x == 0) {
    cde::cp_async_bulk_tensor_2d_global_to_shared(&tile, &map, column0, row0, bar);
    token = cuda::device::barrier_arrive_tx(bar, 1, sizeof(tile));
  } else {
    token = bar.arrive();
  }
  bar.wait(std::move(token));
  for (int i = static_cast<int>(threadIdx.x); i < kBox * kBox; i += static_cast<int>(blockDim.x)) {
    const int r = i / kBox;
    const int c = i % kBox;
    out[(row0 + r) * kColumns + column0 + c] = a * tile[r][c];
  }
}

int main() {
  test::Made made;
  std::vector<float> host(kRows * kColumns);
  for (int r = 0; r < kRows; ++r) {
    for (int c = 0; c < kColumns; ++c) {
      host[r * kColumns + c] = static_cast<float>((r * 7 + c) % 31) * 0.5f;
    }
  }
  float* in = nullptr;
  float* out = nullptr;
  CUDA_CHECK(cudaMalloc(&in, host.size() * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&out, host.size() * sizeof(float)));
  CUDA_CHECK(cudaMemcpy(in, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice));

  void* entry = nullptr;
  cudaDriverEntryPointQueryResult found{};
  CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &entry, 12000, cudaEnableDefault, &found));
  if (found != cudaDriverEntryPointSuccess || entry == nullptr) {
    std::fprintf(stderr, "FAILED: cuTensorMapEncodeTiled not found\n");
    return 1;
  }
  const auto encode = reinterpret_cast<decltype(&cuTensorMapEncodeTiled)>(entry);
  CUtensorMap map{};
  const cuuint64_t dims[2] = {kColumns, kRows};              // innermost first
  const cuuint64_t strides[1] = {kColumns * sizeof(float)};  // bytes, dimension 1
  const cuuint32_t box[2] = {kBox, kBox};
  const cuuint32_t elementStrides[2] = {1, 1};
  const CUresult encoded = encode(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, in, dims, strides, box, elementStrides,
                                  CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                                  CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (encoded != CUDA_SUCCESS) {
    std::fprintf(stderr, "FAILED: cuTensorMapEncodeTiled: %d\n", static_cast<int>(encoded));
    return 1;
  }
  made.call("cuTensorMapEncodeTiled", 1);  // the shim must see it: replay re-encodes from it

  double total = 0;
  std::vector<float> result(host.size());
  for (int a = 1; a <= 3; ++a) {
    tma_scale<<<dim3(kColumns / kBox, kRows / kBox), 128>>>(map, out, static_cast<float>(a));
    LAUNCH_CHECK();
    CUDA_CHECK(cudaDeviceSynchronize());
    made.launch("tma_scale");
    CUDA_CHECK(cudaMemcpy(result.data(), out, result.size() * sizeof(float), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < host.size(); ++i) {
      if (result[i] != static_cast<float>(a) * host[i]) {
        std::fprintf(stderr, "FAILED: a=%d out[%zu] = %g, expected %g\n", a, i, result[i],
                     static_cast<float>(a) * host[i]);
        return 1;
      }
      total += result[i];
    }
  }
  std::printf("result tma_scale sum %.2f\n", total);
  CUDA_CHECK(cudaFree(in));
  CUDA_CHECK(cudaFree(out));
  made.print();
  return 0;
}
