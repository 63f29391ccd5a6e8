// XXH3-128 (xxHash 0.8, default secret, seed 0: format::contentHash) of an
// input longer than 240 bytes, written so that a GPU warp can compute it:
// for the shim's hashing of device memory where it lies (content_hash.cu),
// and on the host for the tests that hold it to libxxhash bit for bit.
//
// XXH3's long-input loop runs over 1 KiB blocks of 16 stripes of 64 bytes.
// Within a block each stripe adds to the eight 64-bit accumulators, and
// addition commutes: the block's additions can be summed in any order (a
// warp sums them with shuffles), then added, then the accumulators are
// scrambled, block after block. The arithmetic is xxhash.h's; only the
// order of the additions inside a block differs.
//
// Host and device: plain C++ without nvcc, __host__ __device__ with it.
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__CUDACC__)
#define KCAP_HD __host__ __device__ __forceinline__
#else
#define KCAP_HD inline
#endif

namespace kcap::xxh3 {

constexpr size_t kSecretSize = 192;                               // XXH3's default secret
constexpr size_t kStripe = 64;                                    // bytes a stripe
constexpr size_t kStripesPerBlock = (kSecretSize - kStripe) / 8;  // 16
constexpr size_t kBlock = kStripe * kStripesPerBlock;             // 1024
constexpr size_t kMinLength = 241;                                // shorter inputs take XXH3's other paths

// The default secret's bytes, passed to kernels by value.
struct Secret {
  uint8_t bytes[kSecretSize];
};

#if !defined(__CUDACC__)
Secret defaultSecret();  // xxh3_secret.cpp
#endif

constexpr uint64_t kPrime32_1 = 0x9E3779B1u;
constexpr uint64_t kPrime32_2 = 0x85EBCA77u;
constexpr uint64_t kPrime32_3 = 0xC2B2AE3Du;
constexpr uint64_t kPrime64_1 = 0x9E3779B185EBCA87ull;
constexpr uint64_t kPrime64_2 = 0xC2B2AE3D27D4EB4Full;
constexpr uint64_t kPrime64_3 = 0x165667B19E3779F9ull;
constexpr uint64_t kPrime64_4 = 0x85EBCA77C2B2AE63ull;
constexpr uint64_t kPrime64_5 = 0x27D4EB2F165667C5ull;

struct Accumulators {
  uint64_t lane[8];
};

KCAP_HD Accumulators initialAccumulators() {
  return {{kPrime32_3, kPrime64_1, kPrime64_2, kPrime64_3, kPrime64_4, kPrime32_2, kPrime64_5, kPrime32_1}};
}

// Little-endian 64-bit read from any address (the secret's offsets are not
// all multiples of 8).
KCAP_HD uint64_t readLE64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) {
    v = (v << 8) | p[i];
  }
  return v;
}

// What one 8-byte word of a stripe adds: `word` is lane `lane`'s input,
// `key` the secret's word for it. The word itself goes to the neighbouring
// lane, the product of its key-mixed halves to its own.
struct WordAddition {
  uint64_t toNeighbour;  // to lane ^ 1
  uint64_t toOwn;        // to lane
};

KCAP_HD WordAddition wordAddition(uint64_t word, uint64_t key) {
  const uint64_t mixed = word ^ key;
  return {word, (mixed & 0xFFFFFFFFull) * (mixed >> 32)};
}

// After each whole block, with the secret's last 64 bytes as eight words
// (read once: a warp scrambles a thousand times a piece).
struct ScrambleKeys {
  uint64_t word[8];
};

KCAP_HD ScrambleKeys scrambleKeys(const uint8_t* secret) {
  ScrambleKeys keys;
  for (int i = 0; i < 8; ++i) {
    keys.word[i] = readLE64(secret + kSecretSize - kStripe + 8 * i);
  }
  return keys;
}

KCAP_HD void scramble(Accumulators& acc, const ScrambleKeys& keys) {
  for (int i = 0; i < 8; ++i) {
    uint64_t a = acc.lane[i];
    a ^= a >> 47;
    a ^= keys.word[i];
    a *= kPrime32_1;
    acc.lane[i] = a;
  }
}

KCAP_HD uint64_t mul128Fold64(uint64_t a, uint64_t b) {
#if defined(__CUDA_ARCH__)
  return (a * b) ^ __umul64hi(a, b);
#else
  __extension__ typedef unsigned __int128 U128;  // GCC and Clang; pedantic C++ has no 128-bit type
  const U128 product = static_cast<U128>(a) * b;
  return static_cast<uint64_t>(product) ^ static_cast<uint64_t>(product >> 64);
#endif
}

KCAP_HD uint64_t avalanche(uint64_t h) {
  h ^= h >> 37;
  h *= 0x165667919E3779F9ull;
  h ^= h >> 32;
  return h;
}

KCAP_HD uint64_t mergeAccumulators(const Accumulators& acc, const uint8_t* secret, uint64_t start) {
  uint64_t result = start;
  for (int i = 0; i < 4; ++i) {
    result +=
        mul128Fold64(acc.lane[2 * i] ^ readLE64(secret + 16 * i), acc.lane[2 * i + 1] ^ readLE64(secret + 16 * i + 8));
  }
  return avalanche(result);
}

// Whole blocks, then the stripes of the last, partial block. After them
// XXH3 hashes the final 64 bytes once more (overlapping what came before),
// with the secret at an odd offset (kLastStripeSecret).
struct Layout {
  uint64_t wholeBlocks;
  uint64_t tailStripes;
};

KCAP_HD Layout layoutOf(uint64_t length) {
  const uint64_t blocks = (length - 1) / kBlock;
  return {blocks, ((length - 1) - blocks * kBlock) / kStripe};
}

constexpr size_t kLastStripeSecret = kSecretSize - kStripe - 7;  // XXH_SECRET_LASTACC_START
constexpr size_t kMergeSecret = 11;                              // XXH_SECRET_MERGEACCS_START

// The two 64-bit halves, as format::Hash128 holds them.
struct Hash {
  uint64_t high;
  uint64_t low;
};

KCAP_HD Hash finish(const Accumulators& acc, const uint8_t* secret, uint64_t length) {
  Hash h;
  h.low = mergeAccumulators(acc, secret + kMergeSecret, length * kPrime64_1);
  h.high = mergeAccumulators(acc, secret + kSecretSize - 64 - kMergeSecret, ~(length * kPrime64_2));
  return h;
}

// Adds the whole stripe at `input` (64 bytes) with the secret at `key`.
KCAP_HD void addStripe(Accumulators& acc, const uint8_t* input, const uint8_t* key) {
  for (int i = 0; i < 8; ++i) {
    const WordAddition add = wordAddition(readLE64(input + 8 * i), readLE64(key + 8 * i));
    acc.lane[i ^ 1] += add.toNeighbour;
    acc.lane[i] += add.toOwn;
  }
}

// One warp thread's share of a block. Thread t (0..31) reads the block's
// bytes [32t, 32t + 32): the words of lanes 4h..4h+3 (h = t % 2) of stripe
// t / 2, whose keys are the secret's words at 8 (t / 2) + 32h + 8j. Its
// additions stay within those four lanes (a word goes to lane ^ 1), so the
// warp sums shares over the 16 threads of each parity.
KCAP_HD void threadShare(const uint64_t words[4], const uint64_t keys[4], uint64_t share[4]) {
  for (int j = 0; j < 4; ++j) {
    const WordAddition add = wordAddition(words[j], keys[j]);
    share[j ^ 1] += add.toNeighbour;
    share[j] += add.toOwn;
  }
}

KCAP_HD size_t threadKeyOffset(int thread, int j) {
  return 8 * static_cast<size_t>(thread >> 1) + 32 * static_cast<size_t>(thread & 1) + 8 * static_cast<size_t>(j);
}

// The whole hash on one thread, in the warp's order: each block's
// additions summed first, then added to the accumulators (the host tests).
inline Hash hashLong(const uint8_t* input, uint64_t length, const uint8_t* secret) {
  Accumulators acc = initialAccumulators();
  const Layout layout = layoutOf(length);
  const ScrambleKeys keys = scrambleKeys(secret);
  for (uint64_t block = 0; block < layout.wholeBlocks; ++block) {
    Accumulators sum{};
    for (size_t stripe = 0; stripe < kStripesPerBlock; ++stripe) {
      addStripe(sum, input + block * kBlock + stripe * kStripe, secret + stripe * 8);
    }
    for (int i = 0; i < 8; ++i) {
      acc.lane[i] += sum.lane[i];
    }
    scramble(acc, keys);
  }
  for (uint64_t stripe = 0; stripe < layout.tailStripes; ++stripe) {
    addStripe(acc, input + layout.wholeBlocks * kBlock + stripe * kStripe, secret + stripe * 8);
  }
  addStripe(acc, input + length - kStripe, secret + kLastStripeSecret);
  return finish(acc, secret, length);
}

}  // namespace kcap::xxh3
