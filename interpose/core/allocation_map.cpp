#include "allocation_map.h"

#include <mutex>

namespace kcap {

void AllocationMap::eraseOverlapping(uint64_t base, uint64_t end) {
  auto it = byBase_.upper_bound(base);
  if (it != byBase_.begin()) {
    auto prev = std::prev(it);
    if (prev->second.end() > base) it = prev;
  }
  while (it != byBase_.end() && it->first < end) {
    liveBytes_ -= it->second.size;
    it = byBase_.erase(it);
  }
}

void AllocationMap::add(const Allocation& allocation) {
  if (allocation.size == 0) return;
  std::unique_lock lock(mutex_);
  eraseOverlapping(allocation.base, allocation.end());
  byBase_.emplace(allocation.base, allocation);
  liveBytes_ += allocation.size;
}

std::optional<Allocation> AllocationMap::remove(uint64_t base) {
  std::unique_lock lock(mutex_);
  auto it = byBase_.find(base);
  if (it == byBase_.end()) return std::nullopt;
  Allocation removed = it->second;
  liveBytes_ -= removed.size;
  byBase_.erase(it);
  return removed;
}

std::vector<Allocation> AllocationMap::removeRange(uint64_t base, uint64_t size) {
  std::unique_lock lock(mutex_);
  std::vector<Allocation> removed;
  for (auto it = byBase_.lower_bound(base); it != byBase_.end() && it->second.end() <= base + size;) {
    removed.push_back(it->second);
    liveBytes_ -= it->second.size;
    it = byBase_.erase(it);
  }
  return removed;
}

std::optional<Allocation> AllocationMap::find(uint64_t address) const {
  std::shared_lock lock(mutex_);
  return findLocked(address);
}

std::optional<Allocation> AllocationMap::findExtent(uint64_t address) const {
  std::shared_lock lock(mutex_);
  return findExtentLocked(address);
}

std::optional<Allocation> AllocationMap::findLocked(uint64_t address) const {
  auto it = byBase_.upper_bound(address);
  if (it == byBase_.begin()) return std::nullopt;
  --it;
  if (!it->second.contains(address)) return std::nullopt;
  return it->second;
}

std::optional<Allocation> AllocationMap::findExtentLocked(uint64_t address) const {
  auto it = byBase_.upper_bound(address);
  if (it == byBase_.begin()) return std::nullopt;
  --it;
  if (!it->second.contains(address)) return std::nullopt;
  Allocation extent = it->second;
  if (extent.kind != AllocationKind::kVmm) return extent;
  auto joins = [&](const Allocation& a) {
    return a.kind == AllocationKind::kVmm && a.reservation == extent.reservation;
  };
  for (auto prev = it; prev != byBase_.begin();) {
    --prev;
    if (!joins(prev->second) || prev->second.end() != extent.base) break;
    extent.size += prev->second.size;
    extent.base = prev->second.base;
  }
  for (auto next = std::next(it); next != byBase_.end(); ++next) {
    if (!joins(next->second) || next->second.base != extent.end()) break;
    extent.size += next->second.size;
  }
  return extent;
}

void AllocationMap::addReservation(uint64_t base, uint64_t size) {
  std::unique_lock lock(mutex_);
  reservations_[base] = size;
}

void AllocationMap::removeReservation(uint64_t base) {
  std::unique_lock lock(mutex_);
  reservations_.erase(base);
}

std::optional<std::pair<uint64_t, uint64_t>> AllocationMap::findReservation(uint64_t address) const {
  std::shared_lock lock(mutex_);
  auto it = reservations_.upper_bound(address);
  if (it == reservations_.begin()) return std::nullopt;
  --it;
  if (address - it->first >= it->second) return std::nullopt;
  return *it;
}

size_t AllocationMap::size() const {
  std::shared_lock lock(mutex_);
  return byBase_.size();
}

uint64_t AllocationMap::liveBytes() const {
  std::shared_lock lock(mutex_);
  return liveBytes_;
}

std::vector<Allocation> AllocationMap::snapshot() const {
  std::shared_lock lock(mutex_);
  std::vector<Allocation> all;
  all.reserve(byBase_.size());
  for (const auto& [base, allocation] : byBase_) all.push_back(allocation);
  return all;
}

}  // namespace kcap
