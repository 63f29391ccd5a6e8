// kcap_content_hash: the XXH3-128 of each piece of a range of device memory,
// computed where the memory lies (xxh3_long.h), so that the shim learns which
// pieces a trace already holds without copying them to the host.
//
// One warp per piece: piece p covers [p * pieceSize, min(size, (p + 1) *
// pieceSize)) of `base`; out[2p] = its hash's high half, out[2p + 1] the low
// half. Pieces of fewer than xxh3::kMinLength bytes are left to the host
// (out is zero): XXH3 hashes them another way. `base` must be 16-byte
// aligned, `pieceSize` a multiple of 1 KiB, and blockDim.x a multiple of 32
// (a warp is one piece: its threads leave or stay together).
#include "core/xxh3_long.h"

namespace {

__device__ uint64_t shuffleXor(uint64_t value, int mask) { return __shfl_xor_sync(0xffffffffu, value, mask); }

}  // namespace

extern "C" __global__ void kcap_content_hash(const uint8_t* base, uint64_t size, uint32_t pieceSize,
                                             kcap::xxh3::Secret secret, uint64_t* out) {
  using namespace kcap::xxh3;
  const uint64_t piece = (static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int t = static_cast<int>(threadIdx.x % 32);
  const uint64_t pieces = (size + pieceSize - 1) / pieceSize;
  if (piece >= pieces) {
    return;  // the whole warp: pieces are per warp
  }
  const uint64_t start = piece * pieceSize;
  const uint64_t length = size - start < pieceSize ? size - start : pieceSize;
  if (length < kMinLength) {
    if (t == 0) {
      out[2 * piece] = 0;
      out[2 * piece + 1] = 0;
    }
    return;
  }
  const uint8_t* input = base + start;
  const uint8_t* key = secret.bytes;

  uint64_t keys[4];
  for (int j = 0; j < 4; ++j) {
    keys[j] = readLE64(key + threadKeyOffset(t, j));
  }
  const ScrambleKeys scrambleWith = scrambleKeys(key);
  const Layout layout = layoutOf(length);
  Accumulators acc = initialAccumulators();
  // Sums the warp's shares of one block: every thread ends with all eight lanes.
  auto blockSum = [&](const uint8_t* block, bool active, uint64_t sum[8]) {
    uint64_t share[4] = {0, 0, 0, 0};
    if (active) {
      const auto* words = reinterpret_cast<const ulonglong2*>(block + 32 * t);
      const ulonglong2 a = words[0], b = words[1];
      const uint64_t w[4] = {a.x, a.y, b.x, b.y};
      threadShare(w, keys, share);
    }
    for (int mask = 2; mask < 32; mask <<= 1) {  // the 16 threads of this parity
      for (int j = 0; j < 4; ++j) {
        share[j] += shuffleXor(share[j], mask);
      }
    }
    const int h = t & 1;
    for (int j = 0; j < 4; ++j) {
      const uint64_t other = shuffleXor(share[j], 1);
      sum[4 * h + j] = share[j];
      sum[4 * (h ^ 1) + j] = other;
    }
  };
  uint64_t sum[8];
  for (uint64_t block = 0; block < layout.wholeBlocks; ++block) {
    blockSum(input + block * kBlock, true, sum);
    for (int i = 0; i < 8; ++i) {
      acc.lane[i] += sum[i];
    }
    scramble(acc, scrambleWith);
  }
  // The stripes of the last, partial block: thread t's stripe is t / 2.
  blockSum(input + layout.wholeBlocks * kBlock, static_cast<uint64_t>(t >> 1) < layout.tailStripes, sum);
  for (int i = 0; i < 8; ++i) {
    acc.lane[i] += sum[i];
  }
  if (t == 0) {
    addStripe(acc, input + length - kStripe, key + kLastStripeSecret);
    const Hash hash = finish(acc, key, length);
    out[2 * piece] = hash.high;
    out[2 * piece + 1] = hash.low;
  }
}

// The image's second kernel: change hashes for checkpoints.
#include "record/change_hash.cuh"
