// The change hash (format/change_hash.h): what checkpoints compare pieces by.
// The GPU kernel is held to this host reference by a GPU test; here the
// reference itself must tell changed memory from unchanged.
#include "change_hash.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <utility>
#include <vector>

namespace kcap::format {
namespace {

std::vector<uint8_t> pattern(size_t size, uint8_t seed) {
  std::vector<uint8_t> bytes(size);
  uint32_t x = seed * 2654435761u + 1;
  for (auto& b : bytes) {
    x = x * 1664525u + 1013904223u;
    b = static_cast<uint8_t>(x >> 24);
  }
  return bytes;
}

TEST(ChangeHash, EveryByteChangeAndEveryMoveIsSeen) {
  const std::vector<uint8_t> base = pattern(4099, 7);  // not a multiple of 16: a padded last word
  const ChangeHash original = changeHash(base.data(), base.size());
  EXPECT_EQ(changeHash(base.data(), base.size()), original);
  std::set<std::pair<uint64_t, uint64_t>> seen{{original.high, original.low}};
  for (size_t i = 0; i < base.size(); ++i) {
    std::vector<uint8_t> changed = base;
    changed[i] ^= 0x01;
    const ChangeHash h = changeHash(changed.data(), changed.size());
    EXPECT_NE(h, original) << "byte " << i;
    seen.insert({h.high, h.low});
  }
  EXPECT_EQ(seen.size(), base.size() + 1);  // every one-bit change gives its own hash
  // Two 16-byte words swapped: the same bytes, in other places.
  std::vector<uint8_t> swapped = base;
  std::swap_ranges(swapped.begin(), swapped.begin() + 16, swapped.begin() + 32);
  EXPECT_NE(changeHash(swapped.data(), swapped.size()), original);
}

TEST(ChangeHash, LengthIsPartOfTheHash) {
  const std::vector<uint8_t> zeros(64, 0);
  EXPECT_NE(changeHash(zeros.data(), 63), changeHash(zeros.data(), 64));
  EXPECT_NE(changeHash(zeros.data(), 48), changeHash(zeros.data(), 64));
  EXPECT_NE(changeHash(zeros.data(), 0), changeHash(zeros.data(), 1));
}

TEST(ChangeHash, ZeroHashNeedsNoBytes) {
  for (const uint64_t length : {0u, 1u, 15u, 16u, 17u, 1000u, 4096u, 1u << 20}) {
    const std::vector<uint8_t> zeros(length, 0);
    EXPECT_EQ(zeroChangeHash(length), changeHash(zeros.data(), length)) << length;
  }
}

// Pinned values: a change here changes what every recorded checkpoint
// means, so it must be a deliberate format change.
TEST(ChangeHash, ValuesArePinned) {
  const std::vector<uint8_t> bytes = pattern(1000, 3);
  const ChangeHash h = changeHash(bytes.data(), bytes.size());
  const ChangeHash z = zeroChangeHash(1u << 20);
  EXPECT_EQ(h.high, 0x0728f5b23c6e7756ULL);
  EXPECT_EQ(h.low, 0x0385429126d6df32ULL);
  EXPECT_EQ(z.high, 0xccb53ba691ce134eULL);
  EXPECT_EQ(z.low, 0xbbf621995a5cb7c5ULL);
}

}  // namespace
}  // namespace kcap::format
