// Input data for host-side benchmarks: a seeded PRNG, fp16 values shaped
// like device memory, and page-aligned buffers to hold them. Kept apart from
// the benchmarks so that a benchmark's file holds only what it measures, and
// the next benchmark need not copy them.
#pragma once

#include <bit>
#include <cstdint>
#include <cstdlib>
#include <memory>

namespace kcap::bench {

// xoshiro256**, seeded through splitmix64: fast, deterministic, good enough.
class Rng {
 public:
  explicit Rng(uint64_t seed) {
    for (auto& word : s_) {
      seed += 0x9e3779b97f4a7c15ull;
      uint64_t z = seed;
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
      word = z ^ (z >> 31);
    }
  }
  uint64_t next() {
    uint64_t result = std::rotl(s_[1] * 5, 7) * 9;
    uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = std::rotl(s_[3], 45);
    return result;
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

 private:
  uint64_t s_[4];
};

// IEEE binary32 -> binary16 bits, round to nearest even (subnormals, overflow to inf).
uint16_t halfBits(float f);

// fp16 values, roughly normal (Irwin-Hall of four 16-bit uniforms, unit
// variance), with a scale that changes every 32 KiB like per-channel or
// per-tensor magnitudes do. relu: negative values become +0.
void fillHalfs(uint8_t* dst, uint64_t bytes, uint64_t seed, bool relu, double baseScale);

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<uint8_t, FreeDeleter>;

// Page-aligned (4096 bytes), not zeroed; throws when it cannot allocate.
Buffer allocate(uint64_t size);

}  // namespace kcap::bench
