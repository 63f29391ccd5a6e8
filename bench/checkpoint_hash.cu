// How fast can a checkpoint tell which pieces of device memory changed?
// (docs/checkpoint.md, "Hashing at HBM speed".)
//
// Side by side in one run, over one buffer of GIB GiB in 1 MiB pieces:
//   read     every byte read once, one block a piece (the physical limit:
//            what the device's memory gives a kernel that only loads);
//   detect   the shim's change hash of every piece (kcap_change_hash,
//            interpose/record/change_hash.cuh: one block a piece,
//            position-keyed multiply-accumulate), the kernel a checkpoint
//            launches; the hashes are compared with the previous ones on
//            the host, as the shim does (not timed: 16 bytes a piece).
// It also checks that the hash does its job: a second pass over unchanged
// memory finds nothing, and after one byte of every hundredth piece is
// changed, exactly those pieces are found.
//   kcap_bench_checkpoint_hash [GIB] [REPEATS]     default 32 GiB, 5 repeats
#include <cuda_runtime.h>

#include "record/change_hash.cuh"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

constexpr uint64_t kPieceBytes = 1ull << 20;
constexpr int kThreads = 512;

#define CHECK(call)                                                               \
  do {                                                                            \
    const cudaError_t error = (call);                                             \
    if (error != cudaSuccess) {                                                   \
      std::fprintf(stderr, "FAILED: %s: %s\n", #call, cudaGetErrorString(error)); \
      std::exit(1);                                                               \
    }                                                                             \
  } while (0)

__device__ uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  return x ^ (x >> 33);
}

__global__ void fill(uint4* words, uint64_t count) {
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < count; i += uint64_t{gridDim.x} * blockDim.x) {
    const uint64_t a = mix(i), b = mix(~i);
    words[i] = make_uint4(static_cast<uint32_t>(a), static_cast<uint32_t>(a >> 32), static_cast<uint32_t>(b),
                          static_cast<uint32_t>(b >> 32));
  }
}

// Sums a warp's values, then the block's, into thread 0.
__device__ uint64_t blockSum(uint64_t value) {
  __shared__ uint64_t perWarp[kThreads / 32];
  for (int offset = 16; offset > 0; offset /= 2) value += __shfl_down_sync(0xffffffffu, value, offset);
  if (threadIdx.x % 32 == 0) perWarp[threadIdx.x / 32] = value;
  __syncthreads();
  value = 0;
  if (threadIdx.x == 0) {
    for (int w = 0; w < kThreads / 32; ++w) value += perWarp[w];
  }
  return value;
}

__global__ void readPieces(const uint4* words, uint64_t* out) {
  const uint4* piece = words + blockIdx.x * (kPieceBytes / 16);
  uint64_t x = 0;
  for (uint32_t i = threadIdx.x; i < kPieceBytes / 16; i += kThreads) {
    const uint4 v = piece[i];
    x ^= (uint64_t{v.x} | uint64_t{v.y} << 32) ^ (uint64_t{v.z} | uint64_t{v.w} << 32);
  }
  x = blockSum(x);
  if (threadIdx.x == 0) out[blockIdx.x] = x;
}

}  // namespace

int main(int argc, char** argv) {
  const uint64_t gib = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 32;
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 5;
  const uint64_t bytes = gib << 30, pieces = bytes / kPieceBytes;
  uint4* words = nullptr;
  uint64_t *sums = nullptr, *hashes[2] = {nullptr, nullptr};
  kcap::ChangeHashPiece* list = nullptr;
  CHECK(cudaMalloc(&words, bytes));
  CHECK(cudaMalloc(&sums, pieces * 8));
  CHECK(cudaMalloc(&hashes[0], pieces * 16));
  CHECK(cudaMalloc(&hashes[1], pieces * 16));
  CHECK(cudaMalloc(&list, pieces * sizeof(kcap::ChangeHashPiece)));
  std::vector<kcap::ChangeHashPiece> pieceList(pieces);
  for (uint64_t p = 0; p < pieces; ++p) {
    pieceList[p] = {reinterpret_cast<uint64_t>(words) + p * kPieceBytes, kPieceBytes};
  }
  CHECK(cudaMemcpy(list, pieceList.data(), pieces * sizeof(kcap::ChangeHashPiece), cudaMemcpyHostToDevice));
  CHECK(cudaMemset(hashes[0], 0, pieces * 16));
  fill<<<4096, 256>>>(words, bytes / 16);
  CHECK(cudaDeviceSynchronize());

  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  auto timeMs = [&](auto&& launch) {
    CHECK(cudaEventRecord(start));
    launch();
    CHECK(cudaEventRecord(stop));
    CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, start, stop));
    return static_cast<double>(ms);
  };
  int current = 0;  // hashes[current]: the previous pass's
  auto detect = [&] {
    kcap_change_hash<<<static_cast<unsigned>(std::min<uint64_t>(pieces, 65535)), kcap::kChangeHashThreads>>>(
        list, pieces, hashes[1 - current]);
    current = 1 - current;
  };
  // The pieces whose hash differs from the pass before (host side, untimed).
  std::vector<uint64_t> before(pieces * 2), now(pieces * 2);
  auto changedList = [&] {
    CHECK(cudaMemcpy(before.data(), hashes[1 - current], pieces * 16, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(now.data(), hashes[current], pieces * 16, cudaMemcpyDeviceToHost));
    std::vector<uint32_t> found;
    for (uint64_t p = 0; p < pieces; ++p) {
      if (before[2 * p] != now[2 * p] || before[2 * p + 1] != now[2 * p + 1]) found.push_back(static_cast<uint32_t>(p));
    }
    return found;
  };
  auto changedNow = [&] { return static_cast<uint32_t>(changedList().size()); };

  detect();  // the first checkpoint: every piece is new
  CHECK(cudaDeviceSynchronize());
  const uint32_t first = changedNow();
  std::printf("%llu GiB in %llu pieces of 1 MiB; first pass found %u changed (expect all)\n",
              static_cast<unsigned long long>(gib), static_cast<unsigned long long>(pieces), first);

  double bestRead = 1e30, bestDetect = 1e30;
  for (int r = 0; r < repeats; ++r) {
    bestRead =
        std::min(bestRead, timeMs([&] { readPieces<<<static_cast<unsigned>(pieces), kThreads>>>(words, sums); }));
    bestDetect = std::min(bestDetect, timeMs(detect));
    if (changedNow() != 0) {
      std::printf("FAILED: unchanged memory reported %u changed pieces\n", changedNow());
      return 1;
    }
  }
  // One byte of every hundredth piece, at a different offset in each.
  std::vector<uint32_t> expected;
  for (uint64_t p = 0; p < pieces; p += 100) {
    const uint64_t offset = p * kPieceBytes + (p * 7919) % kPieceBytes;
    CHECK(cudaMemset(reinterpret_cast<char*>(words) + offset, 0x5a, 1));
    expected.push_back(static_cast<uint32_t>(p));
  }
  const double changedMs = timeMs(detect);
  const std::vector<uint32_t> found = changedList();
  const bool exact = found == expected;

  const double gb = static_cast<double>(bytes) / 1e9;
  std::printf("| pass | best of %d | GB/s | of read |\n|---|---:|---:|---:|\n", repeats);
  std::printf("| read (limit) | %.2f ms | %.0f | 100%% |\n", bestRead, gb / bestRead * 1e3);
  std::printf("| detect changes | %.2f ms | %.0f | %.0f%% |\n", bestDetect, gb / bestDetect * 1e3,
              100.0 * bestRead / bestDetect);
  std::printf("| detect, 1%% changed | %.2f ms | %.0f | %.0f%% |\n", changedMs, gb / changedMs * 1e3,
              100.0 * bestRead / changedMs);
  std::printf("changed pieces: %zu found, %zu expected: %s\n", found.size(), expected.size(),
              exact ? "exactly those" : "FAILED");
  return exact && first == pieces ? 0 : 1;
}
