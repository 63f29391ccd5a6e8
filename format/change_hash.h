// The change hash: how a checkpoint tells which pieces of device memory
// changed since the previous one (Checkpoint.ranges[].changeHashes).
//
// It is not the content address. The trace names bytes by XXH3-128
// (hash.h), a hash the GPU computes at a fraction of its memory bandwidth;
// a checkpoint must hash all live memory, so it uses this hash, which the
// GPU computes as fast as it can read the memory, and takes the content
// address of the few pieces whose change hash moved.
//
// Definition, for a piece of `length` bytes: the bytes are read as 16-byte
// little-endian words w[i] = (a, b), i = 0 .. ceil(length / 16) - 1, the
// last one zero-padded. With key(i) = (i + 1) * 0x9e3779b97f4a7c15,
// x = a ^ key(i), y = b ^ rotr(key(i), 7):
//   acc0 = sum over i of lo32(x) * hi32(x) + b      (mod 2^64)
//   acc1 = sum over i of lo32(y) * hi32(y) + a
//   high = mix(acc0 ^ length), low = mix(acc1 + high)
// with mix the MurmurHash3 64-bit finalizer. Every word is keyed by its
// position, so moving bytes changes the hash as well as changing them, and
// the sums may be taken in any order: one GPU thread block a piece, its
// threads summing in any order, gives the value the host computes here.
// Not cryptographic: a program could change memory without moving it
// (which would make replay's verification miss that change, not corrupt a
// trace).
//
// Usable from CUDA code: the per-word step and the finish are
// __host__ __device__ there (the shim's and replay's hashing kernel).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define KCAP_HOST_DEVICE __host__ __device__
#else
#define KCAP_HOST_DEVICE
#endif

namespace kcap::format {

struct ChangeHash {
  uint64_t high = 0;
  uint64_t low = 0;
  bool operator==(const ChangeHash& other) const { return high == other.high && low == other.low; }
};

// Bytes a change hash takes in Checkpoint.ranges[].changeHashes.
inline constexpr size_t kChangeHashBytes = 16;

namespace change_hash {

inline constexpr uint64_t kKeyMultiplier = 0x9e3779b97f4a7c15ULL;

KCAP_HOST_DEVICE inline uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  return x ^ (x >> 33);
}

struct Sums {
  uint64_t acc0 = 0;
  uint64_t acc1 = 0;
};

// Adds word i = (a, b) to the sums.
KCAP_HOST_DEVICE inline void addWord(Sums& sums, uint64_t i, uint64_t a, uint64_t b) {
  const uint64_t key = (i + 1) * kKeyMultiplier;
  const uint64_t x = a ^ key;
  const uint64_t y = b ^ (key >> 7 | key << 57);
  sums.acc0 += (x & 0xffffffffULL) * (x >> 32) + b;
  sums.acc1 += (y & 0xffffffffULL) * (y >> 32) + a;
}

KCAP_HOST_DEVICE inline ChangeHash finish(Sums sums, uint64_t length) {
  ChangeHash hash;
  hash.high = mix(sums.acc0 ^ length);
  hash.low = mix(sums.acc1 + hash.high);
  return hash;
}

}  // namespace change_hash

// The change hash of bytes[0, length), on the host (the reference the GPU
// kernels are tested against; little-endian hosts).
inline ChangeHash changeHash(const uint8_t* bytes, uint64_t length) {
  change_hash::Sums sums;
  const uint64_t words = length / 16;
  for (uint64_t i = 0; i < words; ++i) {
    uint64_t a = 0, b = 0;
    std::memcpy(&a, bytes + 16 * i, 8);
    std::memcpy(&b, bytes + 16 * i + 8, 8);
    change_hash::addWord(sums, i, a, b);
  }
  if (length % 16 != 0) {
    uint8_t tail[16] = {};
    std::memcpy(tail, bytes + 16 * words, length % 16);
    uint64_t a = 0, b = 0;
    std::memcpy(&a, tail, 8);
    std::memcpy(&b, tail + 8, 8);
    change_hash::addWord(sums, words, a, b);
  }
  return change_hash::finish(sums, length);
}

// The change hash of `length` zero bytes, without reading any: what a
// checkpoint compares fresh memory with.
inline ChangeHash zeroChangeHash(uint64_t length) {
  change_hash::Sums sums;
  const uint64_t words = (length + 15) / 16;
  for (uint64_t i = 0; i < words; ++i) change_hash::addWord(sums, i, 0, 0);
  return change_hash::finish(sums, length);
}

}  // namespace kcap::format
