// AllocationMap: every live device allocation the program made, as disjoint
// address intervals, so that a launch's parameter words can be resolved to the
// allocations they point into.
//
// Pure bookkeeping, no CUDA calls: the hooks feed it (alloc, free, VMM map and
// unmap), the launch path queries it. Thread-safe: many launching threads
// query concurrently, without a lock or a write to a shared cache line:
// they read an immutable sorted copy of the entries (a Snapshot) published
// through an atomic pointer, and announce the copy they read in their own
// thread's slot (ThreadWork's hazard). Allocation and free change the map
// under its lock and drop the copy; the next reader makes a new one (so a
// burst of allocations costs one copy, at the launch after it). An old
// copy is freed once no thread's hazard names it, after the asymmetric
// fence ThreadWork's ending side takes.
//
// VMM: a cuMemAddressReserve range is not memory until cuMemMap puts physical
// memory in it. Mappings are what a kernel can touch, so they are the entries
// here (kind kVmm); reservations are kept apart and only tell which
// reservation a mapping belongs to (replay reserves the whole range).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <optional>
#include <shared_mutex>
#include <vector>

namespace kcap {

enum class AllocationKind : uint8_t {
  kDevice,      // cuMemAlloc, cuMemAllocPitch, stream-ordered allocations
  kManaged,     // cuMemAllocManaged
  kVmm,         // a cuMemMap of physical memory into a reserved range
  kHostMapped,  // page-locked host memory visible to the device
  kImported,    // another process's device memory, mapped here (cuIpcOpenMemHandle)
};

// Memory re-execution cannot recompute, whatever the recorded launches do:
// the host writes page-locked and managed memory through plain pointers,
// another process writes its own. Checkpoint mode logs it with each launch
// that reaches it and leaves it out of checkpoints.
inline bool writtenOutsideCuda(AllocationKind kind) {
  return kind == AllocationKind::kHostMapped || kind == AllocationKind::kManaged || kind == AllocationKind::kImported;
}

struct Allocation {
  uint64_t base = 0;
  uint64_t size = 0;
  AllocationKind kind = AllocationKind::kDevice;
  int device = -1;
  uint64_t reservation = 0;  // kVmm: base of the enclosing cuMemAddressReserve range, else 0
  bool byNccl = false;       // NCCL's own memory (Alloc.byNccl): left out of checkpoints

  uint64_t end() const { return base + size; }
  bool contains(uint64_t address) const { return address >= base && address - base < size; }
};

class AllocationMap {
 public:
  // Records [base, base + size). An existing entry overlapping it is dropped
  // first: the driver reused the addresses, so the old entry is stale (its
  // free was missed, e.g. freed by a library the shim did not see).
  void add(const Allocation& allocation);

  // Removes the allocation starting at `base`; returns it, or nothing when no
  // allocation starts there.
  std::optional<Allocation> remove(uint64_t base);

  // Removes every entry inside [base, base + size) (cuMemUnmap of a range).
  std::vector<Allocation> removeRange(uint64_t base, uint64_t size);

  // The allocation containing `address`, if any.
  std::optional<Allocation> find(uint64_t address) const;

  // What a launch can reach through `address`: the allocation containing
  // it, where a VMM mapping is extended over the mappings of the same
  // reservation that adjoin it without a gap (PyTorch's expandable segments
  // map one tensor's memory in several chunks). nullopt if untracked.
  std::optional<Allocation> findExtent(uint64_t address) const;

  void addReservation(uint64_t base, uint64_t size);
  void removeReservation(uint64_t base);
  // The reservation containing `address`: {base, size}, if any.
  std::optional<std::pair<uint64_t, uint64_t>> findReservation(uint64_t address) const;

  // Many lookups in one view: a launch resolves all its parameter words
  // through one Reader, which holds one snapshot (two plain stores to the
  // thread's own slot and no locked instruction; a Reader made while the
  // thread holds another, or on a thread past its thread_local
  // destructors, takes the map's shared lock instead). Keep it for one
  // scan only: an old snapshot it holds is not freed while it lives.
  class Reader {
   public:
    explicit Reader(const AllocationMap& map);
    ~Reader();
    Reader(const Reader&) = delete;
    Reader& operator=(const Reader&) = delete;
    std::optional<Allocation> find(uint64_t address) const;
    std::optional<Allocation> findExtent(uint64_t address) const;

   private:
    const AllocationMap& map_;
    const void* snapshot_ = nullptr;  // the Snapshot read, or nullptr: under lock_
    std::atomic<const void*>* hazard_ = nullptr;
    std::shared_lock<std::shared_mutex> lock_;
  };

  AllocationMap() = default;
  ~AllocationMap();
  AllocationMap(const AllocationMap&) = delete;
  AllocationMap& operator=(const AllocationMap&) = delete;

  size_t size() const;
  uint64_t liveBytes() const;
  std::vector<Allocation> snapshot() const;  // all entries, by address

 private:
  struct Snapshot;
  const Snapshot* current() const;                     // the snapshot, made if there is none
  void changed();                                      // lock held (exclusive): the snapshot is stale
  void reclaim() const;                                // lock held (exclusive): frees retired snapshots no reader holds
  void eraseOverlapping(uint64_t base, uint64_t end);  // lock held
  std::optional<Allocation> findLocked(uint64_t address) const;        // lock held (shared)
  std::optional<Allocation> findExtentLocked(uint64_t address) const;  // lock held (shared)

  mutable std::atomic<const Snapshot*> snapshot_{nullptr};  // nullptr: stale, the next reader makes one
  mutable std::vector<const Snapshot*> retired_;            // under mutex_
  mutable std::shared_mutex mutex_;
  std::map<uint64_t, Allocation> byBase_;
  std::map<uint64_t, uint64_t> reservations_;  // base -> size
  uint64_t liveBytes_ = 0;
};

}  // namespace kcap
