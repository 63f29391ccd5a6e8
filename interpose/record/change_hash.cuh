// kcap_change_hash: the change hash (format/change_hash.h) of each of a list
// of pieces of device memory, one thread block a piece, at the speed the
// device reads its memory (docs/benchmarks.md). A checkpoint hashes all
// live memory with it and compares with the previous checkpoint's hashes;
// replay hashes what it reconstructed the same way.
//
// pieces[p] = {address, length}; out[2p] = the hash's high half, out[2p + 1]
// the low half. Pieces may have any address and length: a 16-byte aligned
// piece is read in 16-byte words, any other byte by byte. blockDim.x must
// be kChangeHashThreads. Included by content_hash.cu, whose image holds both
// of the shim's kernels.
#pragma once

#include <cstdint>

#include "change_hash.h"

namespace kcap {

struct ChangeHashPiece {
  uint64_t address;
  uint64_t length;
};

inline constexpr unsigned kChangeHashThreads = 512;

}  // namespace kcap

#if defined(__CUDACC__)
namespace kcap::change_hash_kernel {

// The block's sums, in thread 0.
__device__ inline void blockSums(format::change_hash::Sums& sums) {
  __shared__ uint64_t perWarp[2][kChangeHashThreads / 32];
  for (int offset = 16; offset > 0; offset /= 2) {
    sums.acc0 += __shfl_down_sync(0xffffffffu, sums.acc0, offset);
    sums.acc1 += __shfl_down_sync(0xffffffffu, sums.acc1, offset);
  }
  if (threadIdx.x % 32 == 0) {
    perWarp[0][threadIdx.x / 32] = sums.acc0;
    perWarp[1][threadIdx.x / 32] = sums.acc1;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    sums = {};
    for (unsigned w = 0; w < kChangeHashThreads / 32; ++w) {
      sums.acc0 += perWarp[0][w];
      sums.acc1 += perWarp[1][w];
    }
  }
  __syncthreads();  // perWarp is read before the next piece writes it
}

__device__ inline uint64_t bytesLE(const uint8_t* bytes, uint64_t count) {
  uint64_t value = 0;
  for (uint64_t k = 0; k < count; ++k) value |= uint64_t{bytes[k]} << (8 * k);
  return value;
}

}  // namespace kcap::change_hash_kernel

extern "C" __global__ void __launch_bounds__(kcap::kChangeHashThreads)
    kcap_change_hash(const kcap::ChangeHashPiece* pieces, uint64_t count, uint64_t* out) {
  using namespace kcap;
  for (uint64_t p = blockIdx.x; p < count; p += gridDim.x) {
    const ChangeHashPiece piece = pieces[p];
    format::change_hash::Sums sums;
    const uint64_t words = piece.length / 16;
    const uint8_t* bytes = reinterpret_cast<const uint8_t*>(piece.address);
    if (piece.address % 16 == 0) {
      const auto* vectors = reinterpret_cast<const uint4*>(piece.address);
      for (uint64_t i = threadIdx.x; i < words; i += kChangeHashThreads) {
        const uint4 v = vectors[i];
        format::change_hash::addWord(sums, i, uint64_t{v.x} | uint64_t{v.y} << 32, uint64_t{v.z} | uint64_t{v.w} << 32);
      }
    } else {
      for (uint64_t i = threadIdx.x; i < words; i += kChangeHashThreads) {
        format::change_hash::addWord(sums, i, change_hash_kernel::bytesLE(bytes + 16 * i, 8),
                                     change_hash_kernel::bytesLE(bytes + 16 * i + 8, 8));
      }
    }
    const uint64_t tail = piece.length % 16;
    if (tail != 0 && threadIdx.x == 0) {
      const uint8_t* last = bytes + 16 * words;
      format::change_hash::addWord(sums, words, change_hash_kernel::bytesLE(last, tail < 8 ? tail : 8),
                                   tail > 8 ? change_hash_kernel::bytesLE(last + 8, tail - 8) : 0);
    }
    change_hash_kernel::blockSums(sums);
    if (threadIdx.x == 0) {
      const format::ChangeHash hash = format::change_hash::finish(sums, piece.length);
      out[2 * p] = hash.high;
      out[2 * p + 1] = hash.low;
    }
  }
}
#endif
