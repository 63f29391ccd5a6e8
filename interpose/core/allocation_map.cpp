#include "allocation_map.h"

#include "thread_work.h"

#include <algorithm>
#include <mutex>

namespace kcap {

struct AllocationMap::Snapshot {
  std::vector<Allocation> entries;  // by base, disjoint
};

namespace {

using Entries = std::vector<Allocation>;

Entries::const_iterator containing(const Entries& entries, uint64_t address) {
  auto it = std::upper_bound(entries.begin(), entries.end(), address,
                             [](uint64_t value, const Allocation& a) { return value < a.base; });
  if (it == entries.begin()) return entries.end();
  --it;
  return it->contains(address) ? it : entries.end();
}

// A VMM mapping extended over the mappings of its reservation that adjoin it.
Allocation extentAt(const Entries& entries, Entries::const_iterator it) {
  Allocation extent = *it;
  if (extent.kind != AllocationKind::kVmm) return extent;
  auto joins = [&](const Allocation& a) {
    return a.kind == AllocationKind::kVmm && a.reservation == extent.reservation;
  };
  for (auto prev = it; prev != entries.begin();) {
    --prev;
    if (!joins(*prev) || prev->end() != extent.base) break;
    extent.size += prev->size;
    extent.base = prev->base;
  }
  for (auto next = std::next(it); next != entries.end(); ++next) {
    if (!joins(*next) || next->base != extent.end()) break;
    extent.size += next->size;
  }
  return extent;
}

}  // namespace

AllocationMap::~AllocationMap() {
  delete snapshot_.load(std::memory_order_relaxed);
  for (const Snapshot* old : retired_) delete old;
}

const AllocationMap::Snapshot* AllocationMap::current() const {
  if (const Snapshot* made = snapshot_.load(std::memory_order_acquire)) return made;
  std::unique_lock lock(mutex_);
  const Snapshot* made = snapshot_.load(std::memory_order_relaxed);
  if (made == nullptr) {
    auto* fresh = new Snapshot;
    fresh->entries.reserve(byBase_.size());
    for (const auto& [base, allocation] : byBase_) fresh->entries.push_back(allocation);
    snapshot_.store(fresh, std::memory_order_release);
    made = fresh;
  }
  return made;
}

void AllocationMap::changed() {
  if (const Snapshot* old = snapshot_.exchange(nullptr, std::memory_order_acq_rel)) {
    retired_.push_back(old);
    if (retired_.size() >= 8) reclaim();
  }
}

void AllocationMap::reclaim() const {
  // Every reader that read an old snapshot before it was dropped has its
  // hazard visible now, or reads the pointer again after and retries.
  ThreadWork::endingFence();
  std::erase_if(retired_, [](const Snapshot* old) {
    if (ThreadWork::anyHazard(old)) return false;
    delete old;
    return true;
  });
}

AllocationMap::Reader::Reader(const AllocationMap& map) : map_(map) {
  ThreadWork::Slot* const slot = ThreadWork::mine();
  if (slot != nullptr && slot->hazard.load(std::memory_order_relaxed) == nullptr) {
    for (;;) {
      const Snapshot* seen = map.current();
      slot->hazard.store(seen, std::memory_order_relaxed);
      ThreadWork::workerFence();
      if (map.snapshot_.load(std::memory_order_acquire) == seen) {
        snapshot_ = seen;
        hazard_ = &slot->hazard;
        return;
      }
      slot->hazard.store(nullptr, std::memory_order_relaxed);  // dropped meanwhile: the next one
    }
  }
  lock_ = std::shared_lock(map.mutex_);
}

AllocationMap::Reader::~Reader() {
  if (hazard_ != nullptr) hazard_->store(nullptr, std::memory_order_release);
}

std::optional<Allocation> AllocationMap::Reader::find(uint64_t address) const {
  if (snapshot_ == nullptr) return map_.findLocked(address);
  const Entries& entries = static_cast<const Snapshot*>(snapshot_)->entries;
  const auto it = containing(entries, address);
  if (it == entries.end()) return std::nullopt;
  return *it;
}

std::optional<Allocation> AllocationMap::Reader::findExtent(uint64_t address) const {
  if (snapshot_ == nullptr) return map_.findExtentLocked(address);
  const Entries& entries = static_cast<const Snapshot*>(snapshot_)->entries;
  const auto it = containing(entries, address);
  if (it == entries.end()) return std::nullopt;
  return extentAt(entries, it);
}

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
  changed();
}

std::optional<Allocation> AllocationMap::remove(uint64_t base) {
  std::unique_lock lock(mutex_);
  auto it = byBase_.find(base);
  if (it == byBase_.end()) return std::nullopt;
  Allocation removed = it->second;
  liveBytes_ -= removed.size;
  byBase_.erase(it);
  changed();
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
  if (!removed.empty()) changed();
  return removed;
}

std::optional<Allocation> AllocationMap::find(uint64_t address) const { return Reader(*this).find(address); }

std::optional<Allocation> AllocationMap::findExtent(uint64_t address) const {
  return Reader(*this).findExtent(address);
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
