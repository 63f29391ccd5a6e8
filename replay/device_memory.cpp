#include "device_memory.h"

#include "driver.h"

#include <algorithm>
#include <cstdio>

namespace kcap::replay {

DeviceMemory::DeviceMemory(Driver& driver, CUdevice device, bool allowFixed)
    : driver_(driver), device_(device), allowFixed_(allowFixed) {
  const bool vmm = driver_.cuMemAddressReserve && driver_.cuMemCreate && driver_.cuMemMap && driver_.cuMemSetAccess &&
                   driver_.cuMemUnmap && driver_.cuMemAddressFree && driver_.cuMemRelease &&
                   driver_.cuMemGetAllocationGranularity;
  vmm_ = vmm;
  allowFixed_ = allowFixed_ && vmm;
}

DeviceMemory::~DeviceMemory() {
  try {
    release();
  } catch (const ReplayError&) {
    // The context is gone (a fault): nothing left to release.
  }
}

bool DeviceMemory::holds(const std::vector<Region>& regions) const {
  if (mappings_.empty()) return false;
  for (const Region& region : regions) {
    uint64_t last = 0;
    if (region.size == 0) continue;
    if (__builtin_add_overflow(region.address, region.size - 1, &last)) return false;
    const auto first = addresses_.translate(region.address);
    const auto end = addresses_.translate(last);
    if (!first || !end || *end != *first + (region.size - 1)) return false;
  }
  return true;
}

uint64_t DeviceMemory::granule() {
  if (granule_ != 0) return granule_;
  granule_ = uint64_t{2} << 20;  // the driver's usual minimum; asked below when VMM is there
  if (driver_.cuMemGetAllocationGranularity != nullptr) {
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = device_;
    size_t g = 0;
    if (driver_.cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) == CUDA_SUCCESS && g != 0 &&
        (g & (g - 1)) == 0) {
      granule_ = g;
    }
  }
  return granule_;
}

bool DeviceMemory::placeFixed(const RegionGroup& group) {
  CUdeviceptr got = 0;
  const auto hex = [](uint64_t v) {
    char text[24];
    std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(v));
    return std::string(text);
  };
  const std::string asked = "cuMemAddressReserve(" + hex(group.start) + ", " + std::to_string(group.size) + " bytes)";
  if (const CUresult r = driver_.cuMemAddressReserve(&got, group.size, granule(), group.start, 0); r != CUDA_SUCCESS) {
    if (refusal_.empty()) refusal_ = asked + " failed: " + driver_.errorName(r);
    return false;
  }
  if (got != group.start) {
    driver_.cuMemAddressFree(got, group.size);
    // The driver keeps the address space of its cuMemAlloc pool to itself:
    // an address the recorded program got from cuMemAlloc is often inside
    // this process's pool too (same driver, same layout). The pool hands out
    // the same addresses for the same requests, so ask it.
    CUdeviceptr pooled = 0;
    if (driver_.cuMemAlloc(&pooled, group.size) == CUDA_SUCCESS) {
      if (pooled == group.start) {
        mappings_.push_back({pooled, group.size, false});
        return true;
      }
      driver_.cuMemFree(pooled);
    }
    if (refusal_.empty()) {
      refusal_ = asked + " gave " + hex(got) + ", cuMemAlloc of that size " + hex(pooled);
    }
    return false;
  }
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device_;
  CUmemGenericAllocationHandle handle{};
  CUresult result = driver_.cuMemCreate(&handle, group.size, &prop, 0);
  if (result != CUDA_SUCCESS) {
    driver_.cuMemAddressFree(got, group.size);
    check(result, "cuMemCreate of " + std::to_string(group.size) + " bytes");
  }
  result = driver_.cuMemMap(got, group.size, 0, handle, 0);
  // The mapping keeps the physical memory alive; the handle is not needed.
  driver_.cuMemRelease(handle);
  if (result != CUDA_SUCCESS) {
    driver_.cuMemAddressFree(got, group.size);
    check(result, "cuMemMap");
  }
  CUmemAccessDesc access{};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = device_;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  result = driver_.cuMemSetAccess(got, group.size, &access, 1);
  mappings_.push_back({got, group.size, true});
  check(result, "cuMemSetAccess");
  return true;
}

void DeviceMemory::place(const std::vector<Region>& regions) {
  // Every fixed placement first: a relocated group's allocation could
  // otherwise land on the recorded address of a later group.
  std::vector<RegionGroup> moving;
  for (const RegionGroup& group : planGroups(regions, granule())) {
    if (allowFixed_ && placeFixed(group)) {
      addresses_.add(group.start, group.size, group.start);
      ++fixedGroups_;
    } else {
      moving.push_back(group);
    }
  }
  for (const RegionGroup& group : moving) {
    CUdeviceptr moved = 0;
    check(driver_.cuMemAlloc(&moved, group.size), "cuMemAlloc of " + std::to_string(group.size) + " bytes");
    mappings_.push_back({moved, group.size, false});
    addresses_.add(group.start, group.size, moved);
    ++relocatedGroups_;
  }
}

void DeviceMemory::release() {
  addresses_.clear();
  guarded_.clear();
  fixedGroups_ = relocatedGroups_ = 0;
  refusal_.clear();
  std::vector<Mapping> mappings;
  mappings.swap(mappings_);
  for (const Mapping& m : mappings) {
    if (m.reserved) {
      driver_.cuMemUnmap(m.address, m.mapped != 0 ? m.mapped : m.size);
      driver_.cuMemAddressFree(m.address, m.size);
    } else {
      driver_.cuMemFree(m.address);
    }
  }
}

// Physical memory for [at, at + size) of a reservation, readable and writable.
void DeviceMemory::mapReservation(CUdeviceptr at, uint64_t size) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device_;
  CUmemGenericAllocationHandle handle{};
  check(driver_.cuMemCreate(&handle, size, &prop, 0), "cuMemCreate of " + std::to_string(size) + " bytes");
  const CUresult mapped = driver_.cuMemMap(at, size, 0, handle, 0);
  driver_.cuMemRelease(handle);
  check(mapped, "cuMemMap");
  CUmemAccessDesc access{};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = device_;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  check(driver_.cuMemSetAccess(at, size, &access, 1), "cuMemSetAccess");
}

void DeviceMemory::placeGuarded(const std::vector<Region>& regions) {
  if (!vmm_) throw ReplayError("the driver has no virtual memory management (cuMemAddressReserve, cuMemMap)");
  std::vector<Region> sorted = regions;
  std::sort(sorted.begin(), sorted.end(), [](const Region& a, const Region& b) { return a.address < b.address; });
  std::vector<Region> spans;  // overlapping regions merged (neighbours stay apart)
  for (const Region& r : sorted) {
    if (r.size == 0) continue;
    if (!spans.empty() && r.address < spans.back().address + spans.back().size) {
      spans.back().size = std::max(spans.back().size, r.address + r.size - spans.back().address);
    } else {
      spans.push_back(r);
    }
  }
  const uint64_t g = granule();
  for (const Region& span : spans) {
    const uint64_t mapped = (span.size + g - 1) / g * g;
    const uint64_t reserved = mapped + g;  // the last granule stays unmapped: the guard
    CUdeviceptr at = 0;
    check(driver_.cuMemAddressReserve(&at, reserved, g, 0, 0),
          "cuMemAddressReserve of " + std::to_string(reserved) + " bytes");
    mappings_.push_back({at, reserved, true, mapped});
    mapReservation(at, mapped);
    const uint64_t base = (at + mapped - span.size) & ~uint64_t{255};
    addresses_.add(span.address, span.size, base);
    guarded_.push_back({span.address, span.size, base, at + mapped - (base + span.size)});
    ++relocatedGroups_;
  }
}

MemoryPath DeviceMemory::path() const {
  if (fixedGroups_ == 0 && relocatedGroups_ == 0) return MemoryPath::kNone;
  if (relocatedGroups_ == 0) return MemoryPath::kFixed;
  return fixedGroups_ == 0 ? MemoryPath::kRelocated : MemoryPath::kMixed;
}

}  // namespace kcap::replay
