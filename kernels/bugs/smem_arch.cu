// Bug class 9: a shared-memory request that works on one architecture and not
// another.
//
// big_tile_sum stages a 200 KiB tile (51200 floats) in dynamic shared memory
// and asks for it with cudaFuncSetAttribute(MaxDynamicSharedMemorySize,
// 204800). An sm_90 GPU (H100/H200) allows 227 KiB per block: fine. An sm_80
// GPU (A100) allows 163 KiB (166912 bytes): the attribute call fails there
// and the kernel cannot be launched with that much. The program is built for
// both (sm_80 and sm_90 SASS) and on an A100 prints that the launch was
// refused; on an H200 it prints the sums.
//
// Inputs: any; the trigger is the GPU. Launch 0: 2 tiles of 51200 floats.
// A correct version sizes the tile from cudaDevAttrMaxSharedMemoryPerBlockOptin
// (or keeps it at or under 163 KiB).
// kcap: a tool that reads the trace on the H200 should say that launch 0 asks
// for 204800 bytes of dynamic shared memory, more than sm_80 allows.
#include "bug_common.h"

#include <vector>

constexpr int kTileFloats = 51200;
constexpr int kSmemBytes = kTileFloats * sizeof(float);  // 204800 = 200 KiB

extern "C" __global__ void big_tile_sum(const float* x, float* out) {
  extern __shared__ float tile[];
  const float* src = x + static_cast<size_t>(blockIdx.x) * kTileFloats;
  for (int i = threadIdx.x; i < kTileFloats; i += blockDim.x) tile[i] = src[i];
  __syncthreads();
  float acc = 0.0f;  // small integers: every order of additions gives the same sum
  for (int i = threadIdx.x; i < kTileFloats; i += blockDim.x) acc += tile[kTileFloats - 1 - i];
  atomicAdd(out + blockIdx.x, acc);
}

int main() {
  const int tiles = 2;
  std::vector<float> host(static_cast<size_t>(tiles) * kTileFloats);
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>(i % 7);
  float *x, *out;
  BUG_CHECK(cudaMalloc(&x, host.size() * sizeof(float)));
  BUG_CHECK(cudaMalloc(&out, tiles * sizeof(float)));
  BUG_CHECK(cudaMemcpy(x, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice));
  BUG_CHECK(cudaMemset(out, 0, tiles * sizeof(float)));
  const cudaError_t asked = cudaFuncSetAttribute(big_tile_sum, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes);
  if (asked != cudaSuccess) {
    std::printf("result big_tile_sum refused %d bytes of dynamic shared memory: %s\n", kSmemBytes,
                cudaGetErrorName(asked));
    return 0;
  }
  big_tile_sum<<<tiles, 256, kSmemBytes>>>(x, out);
  const cudaError_t launched = cudaGetLastError();
  if (launched != cudaSuccess) {
    std::printf("result big_tile_sum launch refused: %s\n", cudaGetErrorName(launched));
    return 0;
  }
  BUG_CHECK(cudaDeviceSynchronize());
  float sums[tiles] = {};
  BUG_CHECK(cudaMemcpy(sums, out, sizeof sums, cudaMemcpyDeviceToHost));
  for (int t = 0; t < tiles; ++t) std::printf("result big_tile_sum tile %d sum %.1f\n", t, sums[t]);
  return 0;
}
