// A program that runs a step kernel many times over a small state and, when
// asked, makes its Nth launch fault (an illegal address): the flight
// recorder's GPU test (flight_recorder.py) records it with --trigger error.
//
//   fault_at LAUNCHES [FAULT_AT]
//
// Launch i adds i to every element of the state and then mixes it with its
// neighbour (each launch depends on the one before: replay must rebuild the
// state launch by launch). With FAULT_AT, launch FAULT_AT (0-based) gets a
// pointer to unmapped memory; the program then synchronizes, prints the
// error and exits 1. Without it, it prints the state's checksum and exits 0.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

constexpr int kN = 1 << 16;

__global__ void step(uint32_t* state, int n, uint32_t i) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t < n) {
    const uint32_t mine = state[t] + i;
    state[t] = mine * 2654435761u ^ (mine >> 13);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s LAUNCHES [FAULT_AT]\n", argv[0]);
    return 2;
  }
  const long launches = std::atol(argv[1]);
  const long faultAt = argc > 2 ? std::atol(argv[2]) : -1;
  uint32_t* state = nullptr;
  if (cudaMalloc(&state, kN * sizeof(uint32_t)) != cudaSuccess) return 2;
  cudaMemset(state, 0, kN * sizeof(uint32_t));
  // Far outside any allocation: the launch that gets it faults.
  auto* unmapped = reinterpret_cast<uint32_t*>(uintptr_t{0x7f0000000000});
  for (long i = 0; i < launches; ++i) {
    step<<<kN / 256, 256>>>(i == faultAt ? unmapped : state, kN, static_cast<uint32_t>(i));
    if (i % 100 == 99) cudaStreamSynchronize(nullptr);  // a program that syncs now and then
  }
  const cudaError_t error = cudaDeviceSynchronize();
  if (error != cudaSuccess) {
    std::printf("error %s\n", cudaGetErrorName(error));
    return 1;
  }
  std::vector<uint32_t> host(kN);
  cudaMemcpy(host.data(), state, kN * sizeof(uint32_t), cudaMemcpyDeviceToHost);
  uint64_t sum = 0;
  for (const uint32_t v : host) sum += v;
  std::printf("result checksum %llu\n", static_cast<unsigned long long>(sum));
  return 0;
}
