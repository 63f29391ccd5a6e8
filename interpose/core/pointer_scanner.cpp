#include "pointer_scanner.h"

#include <cstring>
#include <optional>

namespace kcap {
namespace {

uint64_t wordAt(const uint8_t* bytes, size_t offset) {
  uint64_t word;
  std::memcpy(&word, bytes + offset, sizeof word);
  return word;
}

// Device addresses are never in the first page; skipping small values avoids
// a lookup for every integer parameter.
bool plausibleAddress(uint64_t value) { return value >= 4096; }

}  // namespace

void KnownTensorMaps::add(const void* map) {
  Bytes bytes;
  std::memcpy(bytes.data(), map, bytes.size());
  std::lock_guard lock(mutex_);
  maps_.insert(bytes);
  any_.store(true, std::memory_order_release);
}

bool KnownTensorMaps::contains(const uint8_t* bytes) const {
  if (!any_.load(std::memory_order_acquire)) return false;
  Bytes key;
  std::memcpy(key.data(), bytes, key.size());
  std::lock_guard lock(mutex_);
  return maps_.count(key) != 0;
}

void scanParams(const uint8_t* params, size_t size, std::span<const ParamSlot> layout, const AllocationMap& allocations,
                const KnownTensorMaps& tensorMaps, std::vector<ParamPointer>& found) {
  found.clear();
  std::optional<AllocationMap::Reader> reader;  // locked at the first plausible word
  for (const ParamSlot& slot : layout) {
    if (slot.size < 8 || slot.offset > size || slot.size > size - slot.offset) continue;
    const bool tensorMap = slot.size == kTensorMapBytes && tensorMaps.contains(params + slot.offset);
    uint32_t first = (slot.offset + 7u) & ~7u;
    for (uint32_t at = first; at + 8 <= slot.offset + slot.size; at += 8) {
      uint64_t value = wordAt(params, at);
      if (!plausibleAddress(value)) continue;
      if (!reader) reader.emplace(allocations);
      auto allocation = reader->find(value);
      if (!allocation) continue;
      found.push_back({at, value, allocation->base, tensorMap && at == slot.offset,
                       allocation->kind == AllocationKind::kHostMapped});
      if (tensorMap) break;  // the rest of a tensor map is dimensions and strides
    }
  }
}

std::vector<ParamPointer> scanParams(const uint8_t* params, size_t size, const std::vector<ParamSlot>& layout,
                                     const AllocationMap& allocations, const KnownTensorMaps& tensorMaps) {
  std::vector<ParamPointer> found;
  scanParams(params, size, layout, allocations, tensorMaps, found);
  return found;
}

std::vector<IndirectPointer> scanIndirect(const uint8_t* bytes, size_t size, uint64_t bufferAddress,
                                          const AllocationMap& allocations) {
  std::vector<IndirectPointer> found;
  std::optional<AllocationMap::Reader> reader;
  size_t skew = (8 - bufferAddress % 8) % 8;  // scan device-aligned words
  for (size_t at = skew; at + 8 <= size; at += 8) {
    uint64_t value = wordAt(bytes, at);
    if (!plausibleAddress(value)) continue;
    if (!reader) reader.emplace(allocations);
    auto allocation = reader->find(value);
    if (!allocation) continue;
    found.push_back({bufferAddress, at, value, allocation->base});
  }
  return found;
}

}  // namespace kcap
