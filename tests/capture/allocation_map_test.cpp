#include "allocation_map.h"

#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <string>
#include <thread>
#include <vector>

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

// Churned entries carry fields that follow from their base, so a reader can
// tell a torn or stale-and-freed entry from a real one.
Allocation churned(uint64_t base) {
  Allocation a = alloc(base, 0x400 + ((base >> 12) & 0x3f) * 0x10,
                       (base >> 12) % 3 == 0 ? AllocationKind::kManaged : AllocationKind::kDevice);
  a.device = static_cast<int>((base >> 12) & 7);
  return a;
}

std::string checkChurned(const std::optional<Allocation>& found, uint64_t address) {
  if (!found) return "";
  const Allocation expect = churned(address & ~0xfffull);
  if (found->base != expect.base || found->size != expect.size || found->kind != expect.kind ||
      found->device != expect.device || !found->contains(address)) {
    return "torn entry at " + std::to_string(address);
  }
  return "";
}

// Readers (lock-free snapshots) while writers add, remove and unmap ranges:
// entries never removed are always found whole; churned ones, when found,
// are whole; no reader touches a freed snapshot (AddressSanitizer).
TEST(AllocationMap, ReadersNeverSeeTornStateWhileWritersChurn) {
  AllocationMap map;
  constexpr uint64_t kStable = 0x700000000ull;
  for (uint64_t i = 0; i < 64; ++i) map.add(alloc(kStable + i * 0x10000, 0x8000, AllocationKind::kDevice));
  constexpr uint64_t kChurn = 0x100000000ull;
  std::atomic<bool> stop{false};
  std::vector<std::string> failures(6);
  std::vector<std::thread> threads;
  for (int w = 0; w < 2; ++w) {
    threads.emplace_back([&, w] {
      std::mt19937_64 random(static_cast<uint64_t>(w) + 1);
      for (int i = 0; i < 20000; ++i) {
        const uint64_t base = kChurn + (static_cast<uint64_t>(w) << 28) + (random() % 512) * 0x1000;
        switch (random() % 4) {
          case 0:
          case 1:
            map.add(churned(base));
            break;
          case 2:
            map.remove(base);
            break;
          default:
            map.removeRange(base, 0x8000);
            break;
        }
      }
    });
  }
  for (int r = 0; r < 4; ++r) {
    threads.emplace_back([&, r] {
      std::mt19937_64 random(static_cast<uint64_t>(r) + 100);
      std::string& failure = failures[static_cast<size_t>(r)];
      while (!stop.load(std::memory_order_relaxed) && failure.empty()) {
        const AllocationMap::Reader reader(map);
        for (int k = 0; k < 64 && failure.empty(); ++k) {
          const uint64_t stable = kStable + (random() % 64) * 0x10000 + random() % 0x8000;
          const auto found = reader.find(stable);
          if (!found || found->base != (stable & ~0xffffull) || found->size != 0x8000) {
            failure = "stable entry lost at " + std::to_string(stable);
          }
          const uint64_t address = kChurn + ((random() % 2) << 28) + (random() % 512) * 0x1000 + random() % 0x400;
          failure += checkChurned(reader.find(address), address);
          failure += checkChurned(map.findExtent(address), address);  // nested: takes the lock
        }
      }
    });
  }
  for (size_t t = 0; t < 2; ++t) threads[t].join();
  stop = true;
  for (size_t t = 2; t < threads.size(); ++t) threads[t].join();
  for (const std::string& failure : failures) EXPECT_EQ(failure, "");
}

// A Reader keeps the snapshot it read, whole, while writers replace it many
// times over (their old snapshots are freed only once no one holds them).
TEST(AllocationMap, HeldSnapshotOutlivesManyUpdates) {
  AllocationMap map;
  map.add(alloc(0x10000, 0x1000));
  std::atomic<int> phase{0};
  std::thread holder([&] {
    const AllocationMap::Reader reader(map);
    EXPECT_TRUE(reader.find(0x10010));
    phase = 1;
    while (phase.load() != 2) std::this_thread::yield();
    // Removed meanwhile, but this view is from before.
    const auto found = reader.find(0x10010);
    ASSERT_TRUE(found);
    EXPECT_EQ(found->size, 0x1000u);
  });
  while (phase.load() != 1) std::this_thread::yield();
  map.remove(0x10000);
  for (uint64_t i = 0; i < 200; ++i) {
    map.add(alloc(0x100000 + i * 0x1000, 0x100));
    EXPECT_TRUE(map.find(0x100000 + i * 0x1000));  // a new snapshot each time, the old ones retired
  }
  EXPECT_FALSE(map.find(0x10010));
  phase = 2;
  holder.join();
  EXPECT_FALSE(map.find(0x10010));
}

}  // namespace
}  // namespace kcap
