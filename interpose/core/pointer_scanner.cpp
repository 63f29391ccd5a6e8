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

// Where a map's probe starts.
size_t tableHash(const uint8_t* bytes) {
  uint64_t h = 0x9e3779b97f4a7c15ull;
  for (size_t at = 0; at < kTensorMapBytes; at += 8) h = (h ^ wordAt(bytes, at)) * 0xff51afd7ed558ccdull;
  return static_cast<size_t>(h ^ (h >> 29));
}

}  // namespace

KnownTensorMaps::~KnownTensorMaps() { delete[] table_.load(std::memory_order_relaxed); }

void KnownTensorMaps::add(const void* map) {
  const auto* bytes = static_cast<const uint8_t*>(map);
  std::lock_guard lock(mutex_);
  if (table_.load(std::memory_order_relaxed) == nullptr) {
    table_.store(new Entry[kTableEntries], std::memory_order_release);
  }
  Entry* const table = table_.load(std::memory_order_relaxed);
  for (size_t i = tableHash(bytes);; ++i) {
    Entry& entry = table[i & (kTableEntries - 1)];
    if (!entry.ready.load(std::memory_order_relaxed)) break;  // not in the table
    if (std::memcmp(entry.bytes.data(), bytes, kTensorMapBytes) == 0) return;
  }
  if (tableCount_ >= kTableEntries / 2) {
    Bytes key;
    std::memcpy(key.data(), bytes, key.size());
    overflow_.insert(key);
    overflowed_.store(true, std::memory_order_release);
    return;
  }
  for (size_t i = tableHash(bytes);; ++i) {
    Entry& entry = table[i & (kTableEntries - 1)];
    if (entry.ready.load(std::memory_order_relaxed)) continue;
    std::memcpy(entry.bytes.data(), bytes, kTensorMapBytes);
    entry.ready.store(true, std::memory_order_release);  // readers see the bytes once they see this
    ++tableCount_;
    return;
  }
}

bool KnownTensorMaps::contains(const uint8_t* bytes) const {
  const Entry* const table = table_.load(std::memory_order_acquire);
  if (table == nullptr) return false;
  // Entries are never removed: a probe that meets an empty one has passed
  // every place the map could be (at most half the table is filled).
  for (size_t i = tableHash(bytes);; ++i) {
    const Entry& entry = table[i & (kTableEntries - 1)];
    if (!entry.ready.load(std::memory_order_acquire)) break;
    if (std::memcmp(entry.bytes.data(), bytes, kTensorMapBytes) == 0) return true;
  }
  if (!overflowed_.load(std::memory_order_acquire)) return false;
  Bytes key;
  std::memcpy(key.data(), bytes, key.size());
  std::lock_guard lock(mutex_);
  return overflow_.count(key) != 0;
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
      found.push_back(
          {at, value, allocation->base, tensorMap && at == slot.offset, writtenOutsideCuda(allocation->kind)});
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
