// Checkpoint mode: the device memory stream-ordered frees (cuMemFreeAsync)
// gave back to their pools since the last checkpoint.
//
// A pool hands freed memory out again without clearing it, so a new
// stream-ordered allocation starts with whatever its bytes last held. Where
// every byte was freed after the last checkpoint, re-execution from that
// checkpoint rebuilds those bytes (replay keeps memory's content across a
// free and a new allocation at the same place), and the allocation need
// not log its first content. Anything else (memory freed before the
// checkpoint, which the checkpoint does not hold, or fresh to the pool) is
// logged. A checkpoint clears the set: it is taken under the checkpoint
// gate, which cuMemFreeAsync passes too, so no free is half noted across it.
#pragma once

#include <cstdint>
#include <iterator>
#include <map>
#include <mutex>

namespace kcap {

class FreedPoolMemory {
 public:
  // [address, address + size) went back to its pool.
  void freed(uint64_t address, uint64_t size) {
    if (size == 0 || address + size < address) return;
    uint64_t begin = address, end = address + size;
    const std::scoped_lock lock(mutex_);
    // Merge with every range that touches [begin, end).
    auto it = ranges_.upper_bound(begin);
    if (it != ranges_.begin() && std::prev(it)->second >= begin) --it;
    while (it != ranges_.end() && it->first <= end) {
      if (it->first < begin) begin = it->first;
      if (it->second > end) end = it->second;
      it = ranges_.erase(it);
    }
    ranges_.emplace(begin, end);
  }

  // Whether every byte of [address, address + size) was freed since the
  // last clear().
  bool covers(uint64_t address, uint64_t size) const {
    if (address + size < address) return false;
    const std::scoped_lock lock(mutex_);
    auto it = ranges_.upper_bound(address);
    if (it == ranges_.begin()) return false;
    --it;
    return it->first <= address && it->second >= address + size;
  }

  void clear() {
    const std::scoped_lock lock(mutex_);
    ranges_.clear();
  }

 private:
  mutable std::mutex mutex_;
  std::map<uint64_t, uint64_t> ranges_;  // begin -> end, disjoint, not touching
};

}  // namespace kcap
