// PieceMemory: the writer's blocks for new pieces' raw bytes (huge-page
// slabs, reused).
#include "piece_memory.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <set>
#include <vector>

namespace kcap::format {
namespace {

std::vector<uint8_t> randomBytes(size_t n, uint64_t seed) {
  std::vector<uint8_t> bytes(n);
  std::mt19937_64 random(seed);
  for (auto& b : bytes) b = static_cast<uint8_t>(random());
  return bytes;
}

// Blocks across several slabs hold exactly what was filled in, whatever the
// length and the source's alignment; released blocks are reused, new ones
// are not marked so; no two live blocks overlap.
TEST(PieceMemory, BlocksHoldTheirBytesAndAreReused) {
  constexpr size_t kBlock = (5u << 20) + 100;  // not a multiple of pages: blocks are rounded up
  PieceMemory memory(kBlock);
  EXPECT_EQ(memory.blockBytes() % 4096, 0u);
  EXPECT_GE(memory.blockBytes(), kBlock);
  const std::vector<uint8_t> source = randomBytes(kBlock + 64, 3);
  const size_t lengths[] = {kBlock, kBlock - 1, 63, 64, 65, 1, 0, 4097};
  std::vector<PieceBlock> live;
  std::set<const uint8_t*> starts;
  for (size_t i = 0; i < 30; ++i) {  // 30 x 5 MiB: three 64 MiB slabs
    PieceBlock block = memory.take();
    ASSERT_TRUE(block);
    EXPECT_FALSE(block.reused());
    EXPECT_EQ(reinterpret_cast<uintptr_t>(block.data()) % 4096, 0u);
    const size_t length = lengths[i % std::size(lengths)];
    block.fill(source.data() + i % 7, length);  // odd source addresses too
    EXPECT_EQ(block.size(), length);
    EXPECT_TRUE(starts.insert(block.data()).second);
    live.push_back(std::move(block));
  }
  for (size_t i = 0; i < live.size(); ++i) {
    const size_t length = lengths[i % std::size(lengths)];
    ASSERT_EQ(std::vector<uint8_t>(live[i].data(), live[i].data() + length),
              std::vector<uint8_t>(source.begin() + static_cast<std::ptrdiff_t>(i % 7),
                                   source.begin() + static_cast<std::ptrdiff_t>(i % 7 + length)))
        << "block " << i;
  }
  const uint8_t* released = live[4].data();
  live[4].release();
  EXPECT_FALSE(live[4]);
  PieceBlock again = memory.take();
  EXPECT_TRUE(again.reused());
  EXPECT_EQ(again.data(), released);
  const std::vector<uint8_t> other = randomBytes(kBlock, 4);
  again.fill(other.data(), other.size());
  EXPECT_EQ(std::vector<uint8_t>(again.data(), again.data() + again.size()), other);

  PieceBlock moved = std::move(again);  // the block goes with the move, once
  EXPECT_FALSE(again);                  // NOLINT(bugprone-use-after-move): a moved-from block is empty
  EXPECT_EQ(moved.data(), released);
  live.clear();
  moved = PieceBlock();
  std::set<const uint8_t*> reusedStarts;
  for (size_t i = 0; i < 30; ++i) {
    PieceBlock block = memory.take();
    EXPECT_TRUE(block.reused()) << i;
    reusedStarts.insert(block.data());
    live.push_back(std::move(block));
  }
  EXPECT_EQ(reusedStarts, starts);
  EXPECT_FALSE(memory.take().reused()) << "all 30 taken: the next is new";
}

// Each slab is prepared once before its blocks are handed out, and retired
// once with the memory; a slab past the bound, or one prepare refuses, is
// no block at all (and the memory keeps working).
TEST(PieceMemory, SlabsArePreparedOnceWithinTheirBound) {
  constexpr size_t kBlock = 16u << 20;  // four blocks a 64 MiB slab
  std::vector<const uint8_t*> prepared, retired;
  bool refuse = false;
  SlabHooks hooks;
  hooks.prepare = [&](uint8_t* slab, size_t bytes) {
    EXPECT_EQ(bytes, size_t{64} << 20);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(slab) % (2u << 20), 0u);
    if (refuse) return false;
    prepared.push_back(slab);
    return true;
  };
  hooks.retire = [&](uint8_t* slab, size_t) { retired.push_back(slab); };
  {
    PieceMemory memory(kBlock, size_t{128} << 20, hooks);  // two slabs
    refuse = true;
    EXPECT_FALSE(memory.take()) << "prepare refused the slab";
    EXPECT_EQ(memory.mappedBytes(), 0u);
    refuse = false;
    std::vector<PieceBlock> live;
    for (size_t i = 0; i < 8; ++i) {
      live.push_back(memory.take());
      ASSERT_TRUE(live.back()) << i;
      EXPECT_EQ(live.back().size(), 0u);
    }
    EXPECT_EQ(prepared.size(), 2u);
    EXPECT_EQ(memory.mappedBytes(), size_t{128} << 20);
    EXPECT_FALSE(memory.take()) << "a third slab would pass the bound";
    const uint8_t* back = live[5].data();
    live[5].release();
    PieceBlock again = memory.take();
    ASSERT_TRUE(again);
    EXPECT_EQ(again.data(), back);
    EXPECT_TRUE(again.reused());
    again.setSize(123);
    EXPECT_EQ(again.size(), 123u);
    EXPECT_TRUE(retired.empty());
  }
  EXPECT_EQ(retired, prepared);
}

}  // namespace
}  // namespace kcap::format
