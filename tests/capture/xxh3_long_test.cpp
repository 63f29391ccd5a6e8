// xxh3_long.h against libxxhash: the shim's device-side content hash
// (content_hash.cu) must be format::contentHash bit for bit. Here on the
// host, in both of the header's orders: one thread, and the warp's split of
// each block into 32 thread shares (what the kernel does with shuffles).
#include "xxh3_long.h"

#include "hash.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace {

using kcap::xxh3::Hash;

// The kernel's order, emulated: per block, each of 32 threads' shares
// summed by parity into the eight lanes; the partial block's stripes only
// from the threads that have one; the last stripe on thread 0.
Hash warpOrder(const uint8_t* input, uint64_t length, const uint8_t* secret) {
  using namespace kcap::xxh3;
  const Layout layout = layoutOf(length);
  const ScrambleKeys scrambleWith = scrambleKeys(secret);
  Accumulators acc = initialAccumulators();
  auto addBlock = [&](const uint8_t* block, uint64_t stripes) {
    uint64_t sum[8] = {};
    for (int t = 0; t < 32; ++t) {
      if (static_cast<uint64_t>(t >> 1) >= stripes) {
        continue;
      }
      uint64_t words[4], keys[4], share[4] = {};
      for (int j = 0; j < 4; ++j) {
        words[j] = readLE64(block + 32 * t + 8 * j);
        keys[j] = readLE64(secret + threadKeyOffset(t, j));
      }
      threadShare(words, keys, share);
      for (int j = 0; j < 4; ++j) {
        sum[4 * (t & 1) + j] += share[j];
      }
    }
    for (int i = 0; i < 8; ++i) {
      acc.lane[i] += sum[i];
    }
  };
  for (uint64_t block = 0; block < layout.wholeBlocks; ++block) {
    addBlock(input + block * kBlock, kStripesPerBlock);
    scramble(acc, scrambleWith);
  }
  addBlock(input + layout.wholeBlocks * kBlock, layout.tailStripes);
  addStripe(acc, input + length - kStripe, secret + kLastStripeSecret);
  return finish(acc, secret, length);
}

TEST(Xxh3Long, MatchesLibxxhashInBothOrders) {
  const kcap::xxh3::Secret secret = kcap::xxh3::defaultSecret();
  std::mt19937_64 random(2026);
  std::vector<uint8_t> data((3u << 20) + 4096);
  for (auto& b : data) {
    b = static_cast<uint8_t>(random());
  }
  // Around every boundary: the shortest long input, stripes, blocks, a
  // block and a stripe more, pieces of the shim's sizes, odd tails.
  for (const uint64_t length :
       {241ull, 255ull, 256ull, 257ull, 1000ull, 1023ull, 1024ull, 1025ull, 1087ull, 1088ull, 1089ull, 2047ull, 2048ull,
        4097ull, 65536ull + 63, 1ull << 20, (1ull << 20) - 1, (1ull << 20) + 1, (3ull << 20) + 17}) {
    for (const uint64_t offset : {0ull, 13ull}) {  // any start: the host reads bytes
      const uint8_t* input = data.data() + offset;
      const kcap::format::Hash128 expected = kcap::format::contentHash(input, length);
      const Hash single = kcap::xxh3::hashLong(input, length, secret.bytes);
      EXPECT_EQ(single.high, expected.high) << length << " at +" << offset;
      EXPECT_EQ(single.low, expected.low) << length << " at +" << offset;
      const Hash warp = warpOrder(input, length, secret.bytes);
      EXPECT_EQ(warp.high, expected.high) << length << " at +" << offset << " (warp order)";
      EXPECT_EQ(warp.low, expected.low) << length << " at +" << offset << " (warp order)";
    }
  }
}

// Memory is mostly zeros, or repeats: hashes of such pieces must differ
// where the bytes do (one bit anywhere).
TEST(Xxh3Long, OneBitChangesTheHashAnywhereInAPiece) {
  const kcap::xxh3::Secret secret = kcap::xxh3::defaultSecret();
  std::vector<uint8_t> zeros(1u << 20, 0);
  const Hash base = warpOrder(zeros.data(), zeros.size(), secret.bytes);
  for (const size_t at :
       {size_t{0}, size_t{7}, size_t{1023}, size_t{1024}, size_t{500000}, zeros.size() - 65, zeros.size() - 1}) {
    zeros[at] ^= 0x10;
    const Hash changed = warpOrder(zeros.data(), zeros.size(), secret.bytes);
    const kcap::format::Hash128 expected = kcap::format::contentHash(zeros.data(), zeros.size());
    EXPECT_EQ(changed.high, expected.high) << at;
    EXPECT_EQ(changed.low, expected.low) << at;
    EXPECT_FALSE(changed.high == base.high && changed.low == base.low) << at;
    zeros[at] ^= 0x10;
  }
}

}  // namespace
