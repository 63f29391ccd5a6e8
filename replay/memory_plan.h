// Where replay puts recorded device memory, decided before any driver call.
//
// Address-faithful replay reserves the recorded virtual addresses, so every
// pointer stored anywhere (parameters, buffers, tensor maps) stays valid.
// Reservations are made per *group*: recorded regions that overlap or lie
// within one granule of each other share one reservation (neighbouring
// allocations are common: a caching allocator carves tensors from one
// segment), aligned out to the allocation granularity.
//
// When the driver does not grant a group's address, the group is relocated
// as a whole (one allocation of the group's size), which keeps the regions'
// relative positions: a pointer into any region of the group moves by the
// group's offset. Pure logic: no driver.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace kcap::replay {

struct Region {
  uint64_t address = 0;  // recorded base
  uint64_t size = 0;
};

struct RegionGroup {
  uint64_t start = 0;  // recorded address, granule-aligned
  uint64_t size = 0;   // multiple of the granule
  std::vector<Region> regions;

  bool contains(uint64_t address) const { return address >= start && address - start < size; }
};

// Groups `regions` (any order, may overlap or repeat). granule: a power of two.
std::vector<RegionGroup> planGroups(std::vector<Region> regions, uint64_t granule);

// Recorded address -> replay address, once groups are placed.
class AddressMap {
 public:
  // A group placed at `replayStart` (equal to group.start when fixed).
  void add(uint64_t recordedStart, uint64_t size, uint64_t replayStart);
  // nullopt when the address is in no placed group.
  std::optional<uint64_t> translate(uint64_t recorded) const;
  // Whether every placed group kept its recorded address.
  bool identity() const;
  void clear() { spans_.clear(); }

 private:
  struct Span {
    uint64_t recorded, size, replay;
  };
  std::vector<Span> spans_;  // sorted by recorded start, disjoint
};

}  // namespace kcap::replay
