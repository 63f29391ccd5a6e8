#include "allocation_map.h"

#include <gtest/gtest.h>

#include <thread>

namespace kcap {
namespace {

Allocation alloc(uint64_t base, uint64_t size, AllocationKind kind = AllocationKind::kDevice) {
  Allocation a;
  a.base = base;
  a.size = size;
  a.kind = kind;
  return a;
}

TEST(AllocationMap, FindsTheAllocationContainingAnAddress) {
  AllocationMap map;
  map.add(alloc(0x1000, 0x100));
  map.add(alloc(0x2000, 0x800));
  EXPECT_FALSE(map.find(0xfff));
  EXPECT_EQ(map.find(0x1000)->base, 0x1000u);
  EXPECT_EQ(map.find(0x10ff)->base, 0x1000u);
  EXPECT_FALSE(map.find(0x1100));  // one past the end
  EXPECT_EQ(map.find(0x27ff)->size, 0x800u);
  EXPECT_FALSE(map.find(0x2800));
  EXPECT_EQ(map.liveBytes(), 0x900u);
}

TEST(AllocationMap, RemoveByBaseOnly) {
  AllocationMap map;
  map.add(alloc(0x1000, 0x100));
  EXPECT_FALSE(map.remove(0x1010));  // not a base
  auto removed = map.remove(0x1000);
  ASSERT_TRUE(removed);
  EXPECT_EQ(removed->size, 0x100u);
  EXPECT_FALSE(map.find(0x1000));
  EXPECT_EQ(map.liveBytes(), 0u);
}

TEST(AllocationMap, ReusedAddressesReplaceStaleEntries) {
  AllocationMap map;
  map.add(alloc(0x1000, 0x1000));
  map.add(alloc(0x1800, 0x1000));  // overlaps the tail of a missed free
  EXPECT_EQ(map.size(), 1u);
  EXPECT_EQ(map.find(0x1000), std::nullopt);
  EXPECT_EQ(map.find(0x2000)->base, 0x1800u);
  EXPECT_EQ(map.liveBytes(), 0x1000u);
}

TEST(AllocationMap, VmmMappingsInsideAReservation) {
  AllocationMap map;
  map.addReservation(0x100000, 0x800000);
  map.add(alloc(0x100000, 0x200000, AllocationKind::kVmm));
  map.add(alloc(0x300000, 0x200000, AllocationKind::kVmm));
  EXPECT_EQ(map.findReservation(0x350000)->first, 0x100000u);
  EXPECT_FALSE(map.findReservation(0x900000));
  EXPECT_FALSE(map.find(0x500000));  // reserved, not mapped
  auto removed = map.removeRange(0x100000, 0x800000);
  EXPECT_EQ(removed.size(), 2u);
  EXPECT_EQ(map.size(), 0u);
}

TEST(AllocationMap, ExtentJoinsAdjacentMappingsOfOneReservation) {
  AllocationMap map;
  map.addReservation(0x100000, 0x800000);
  map.addReservation(0x900000, 0x400000);
  auto mapping = [](uint64_t base, uint64_t size, uint64_t reservation) {
    Allocation a = alloc(base, size, AllocationKind::kVmm);
    a.reservation = reservation;
    return a;
  };
  map.add(mapping(0x100000, 0x200000, 0x100000));
  map.add(mapping(0x300000, 0x200000, 0x100000));
  map.add(mapping(0x500000, 0x100000, 0x100000));
  map.add(mapping(0x700000, 0x100000, 0x100000));  // a gap before it
  map.add(mapping(0x900000, 0x100000, 0x900000));  // adjoins, but another reservation
  auto extent = map.findExtent(0x3ff000);
  ASSERT_TRUE(extent);
  EXPECT_EQ(extent->base, 0x100000u);
  EXPECT_EQ(extent->size, 0x500000u);
  EXPECT_EQ(map.findExtent(0x100000)->size, 0x500000u);
  EXPECT_EQ(map.findExtent(0x780000)->base, 0x700000u);
  EXPECT_EQ(map.findExtent(0x780000)->size, 0x100000u);
  EXPECT_EQ(map.findExtent(0x900000)->size, 0x100000u);
  EXPECT_EQ(map.find(0x3ff000)->size, 0x200000u);  // find() still gives the one mapping
  map.add(alloc(0xE00000, 0x1000));
  map.add(alloc(0xE01000, 0x1000));  // ordinary allocations are never joined
  EXPECT_EQ(map.findExtent(0xE00800)->size, 0x1000u);
  EXPECT_FALSE(map.findExtent(0x650000));
}

TEST(AllocationMap, ReaderAnswersAsFindAndFindExtentDo) {
  AllocationMap map;
  map.addReservation(0x100000, 0x400000);
  Allocation first = alloc(0x100000, 0x200000, AllocationKind::kVmm);
  first.reservation = 0x100000;
  Allocation second = alloc(0x300000, 0x200000, AllocationKind::kVmm);
  second.reservation = 0x100000;
  map.add(first);
  map.add(second);
  map.add(alloc(0x900000, 0x1000, AllocationKind::kManaged));
  const AllocationMap::Reader reader(map);
  for (uint64_t address : {0xfffffull, 0x100000ull, 0x3fffffull, 0x4fffffull, 0x500000ull, 0x900fffull, 0x901000ull}) {
    SCOPED_TRACE(address);
    const auto found = reader.find(address);
    const auto extent = reader.findExtent(address);
    ASSERT_EQ(found.has_value(), map.find(address).has_value());
    ASSERT_EQ(extent.has_value(), map.findExtent(address).has_value());
    if (found) {
      EXPECT_EQ(found->base, map.find(address)->base);
      EXPECT_EQ(found->size, map.find(address)->size);
      EXPECT_EQ(found->kind, map.find(address)->kind);
      EXPECT_EQ(extent->base, map.findExtent(address)->base);
      EXPECT_EQ(extent->size, map.findExtent(address)->size);
    }
  }
  EXPECT_EQ(reader.findExtent(0x100000)->size, 0x400000u);  // the two mappings joined
  EXPECT_EQ(reader.find(0x100000)->size, 0x200000u);
}

TEST(AllocationMap, ConcurrentQueriesAndUpdates) {
  AllocationMap map;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&map, t] {
      uint64_t base = 0x10000000ull * static_cast<uint64_t>(t + 1);
      for (int i = 0; i < 2000; ++i) {
        map.add(alloc(base + static_cast<uint64_t>(i) * 0x1000, 0x800));
        EXPECT_TRUE(map.find(base + static_cast<uint64_t>(i) * 0x1000 + 0x10));
        if (i % 2) map.remove(base + static_cast<uint64_t>(i) * 0x1000);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(map.size(), 4000u);
}

}  // namespace
}  // namespace kcap
