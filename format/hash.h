// Content hashes: XXH3-128 names every stored memory piece.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace kcap::format {

struct Hash128 {
  uint64_t high = 0;
  uint64_t low = 0;
  friend bool operator==(const Hash128&, const Hash128&) = default;
  std::string hex() const;  // 32 lowercase hex digits, high word first
};

Hash128 contentHash(const void* data, size_t size);
uint64_t checksum64(const void* data, size_t size, uint64_t seed = 0);

struct Hash128Hasher {
  size_t operator()(const Hash128& h) const noexcept {
    return static_cast<size_t>(h.low ^ (h.high * 0x9e3779b97f4a7c15ull));
  }
};

}  // namespace kcap::format
