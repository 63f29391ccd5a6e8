// Input data for host-side benchmarks (bench_data.h says what each does).

#include "bench_data.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "bench_host.h"

namespace kcap::bench {

uint16_t halfBits(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  int32_t exponent = static_cast<int32_t>((x >> 23) & 0xffu) - 127 + 15;
  uint32_t mantissa = x & 0x7fffffu;
  if (exponent >= 31) return static_cast<uint16_t>(sign | 0x7c00u);
  if (exponent <= 0) {
    if (exponent < -10) return static_cast<uint16_t>(sign);
    mantissa |= 0x800000u;
    uint32_t shift = static_cast<uint32_t>(14 - exponent);
    uint32_t h = mantissa >> shift;
    uint32_t rest = mantissa & ((1u << shift) - 1);
    uint32_t halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (h & 1u))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  uint32_t h = sign | (static_cast<uint32_t>(exponent) << 10) | (mantissa >> 13);
  uint32_t rest = mantissa & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // may carry into the exponent: still correct
  return static_cast<uint16_t>(h);
}

void fillHalfs(uint8_t* dst, uint64_t bytes, uint64_t seed, bool relu, double baseScale) {
  Rng rng(seed);
  constexpr uint64_t kBlock = 32 * 1024;
  for (uint64_t block = 0; block < bytes; block += kBlock) {
    float scale = static_cast<float>(baseScale * std::exp2(rng.uniform() * 4.0 - 2.0));
    uint64_t end = std::min(bytes, block + kBlock);
    for (uint64_t at = block; at + 1 < end; at += 2) {
      uint64_t r = rng.next();
      uint32_t sum = static_cast<uint32_t>(r & 0xffff) + static_cast<uint32_t>((r >> 16) & 0xffff) +
                     static_cast<uint32_t>((r >> 32) & 0xffff) + static_cast<uint32_t>(r >> 48);
      float v = (static_cast<float>(sum) * (1.0f / 65536.0f) - 2.0f) * 1.7320508f * scale;
      if (relu && v < 0.0f) v = 0.0f;
      uint16_t h = halfBits(v);
      std::memcpy(dst + at, &h, 2);
    }
  }
}

Buffer allocate(uint64_t size) {
  void* p = std::aligned_alloc(4096, size);
  if (p == nullptr) fail("cannot allocate " + std::to_string(size) + " bytes");
  return Buffer(static_cast<uint8_t*>(p));
}

}  // namespace kcap::bench
