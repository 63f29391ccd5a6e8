// Recorded device memory, made real on this GPU: groups of regions placed at
// their recorded addresses when the driver grants them (VMM reserve + map),
// relocated otherwise (memory_plan.h says how groups are formed).
#pragma once

#include <cuda.h>

#include <cstdint>
#include <string>
#include <vector>

#include "memory_plan.h"
#include "outcome.h"

namespace kcap::replay {

struct Driver;

class DeviceMemory {
 public:
  DeviceMemory(Driver& driver, CUdevice device, bool allowFixed);
  ~DeviceMemory();
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;

  // Places `regions` (once per replay: call release() before placing again).
  void place(const std::vector<Region>& regions);
  void release();
  // Whether every region lies whole inside memory placed already: one
  // placed span each, so that its bytes are contiguous here too.
  bool holds(const std::vector<Region>& regions) const;

  // For the overrun check (checkers.h): every recorded region (overlapping
  // ones merged) in a VMM reservation of its own, placed so that its end
  // lies at most 255 bytes before an unmapped guard granule. Bases stay
  // 256-byte aligned, so they are not the recorded addresses: pointers are
  // relocated. Throws ReplayError without VMM.
  struct GuardedSpan {
    uint64_t recorded = 0, size = 0, replay = 0;
    uint64_t slack = 0;  // bytes between the region's end and the guard (< 256)
  };
  void placeGuarded(const std::vector<Region>& regions);
  const std::vector<GuardedSpan>& guarded() const { return guarded_; }

  const AddressMap& addresses() const { return addresses_; }
  MemoryPath path() const;
  size_t fixedGroups() const { return fixedGroups_; }
  size_t relocatedGroups() const { return relocatedGroups_; }
  // Why the first group that asked for its recorded address did not get it
  // ("" when none was refused): what the driver answered.
  const std::string& refusal() const { return refusal_; }

 private:
  bool placeFixed(const RegionGroup& group);
  uint64_t granule();

  struct Mapping {
    CUdeviceptr address = 0;
    uint64_t size = 0;
    bool reserved = false;  // VMM: unmap and free the reservation; else cuMemFree
    uint64_t mapped = 0;    // VMM: bytes mapped from `address` (0: all of size)
  };
  void mapReservation(CUdeviceptr at, uint64_t size);
  std::vector<GuardedSpan> guarded_;

  Driver& driver_;
  CUdevice device_;
  bool allowFixed_;
  bool vmm_ = false;
  uint64_t granule_ = 0;
  std::vector<Mapping> mappings_;
  AddressMap addresses_;
  size_t fixedGroups_ = 0, relocatedGroups_ = 0;
  std::string refusal_;
};

}  // namespace kcap::replay
