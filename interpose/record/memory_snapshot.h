// Snapshots of device memory: a range is copied to the host with the real
// driver and stored in the trace as content pieces (identical pieces are
// stored once per file). A large range is copied asynchronously, a segment
// at a time on the thread's own stream, while the previous one is stored.
//
// A range of device memory of a few pieces or more is first hashed on the
// device (device_hash.h): only the pieces the trace lacks are copied, once
// each, and hashed on the device again right after their copy, so that the
// trace names every piece by the bytes it holds: when those differ from
// what the device hashed before (the program wrote the memory in between,
// from another stream), the range is taken again the host's way. Those
// copies land in the writer's direct blocks (TraceWriter::takeDirectBlocks,
// page-locked with cuMemHostRegister, reused): nothing is copied on the
// host. Where the writer has none to give (its bound, or the driver would
// not page-lock them), they go through a staging buffer like the rest.
//
// Staging buffers are pinned (cuMemHostAlloc) where the driver allows, for
// full device-to-host bandwidth, else plain host memory. They are reused:
// a pool holds two per thread that snapshotted concurrently, never freed.
#pragma once

#include "core/allocation_map.h"
#include "hash.h"
#include "kcap.capnp.h"
#include "trace_writer.h"

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

namespace kcap {

class StagingPool {
 public:
  // Buffers of `bufferBytes` (a multiple of the trace's piece size, so
  // that the pieces of a range do not depend on how it was staged).
  explicit StagingPool(size_t bufferBytes) : bufferBytes_(bufferBytes) {}
  StagingPool(const StagingPool&) = delete;
  StagingPool& operator=(const StagingPool&) = delete;

  class Lease {
   public:
    Lease(StagingPool& pool, uint8_t* data) : pool_(&pool), data_(data) {}
    Lease(Lease&& other) noexcept : pool_(other.pool_), data_(other.data_) { other.data_ = nullptr; }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    Lease& operator=(Lease&&) = delete;
    ~Lease();
    uint8_t* data() const { return data_; }
    size_t size() const { return pool_->bufferBytes_; }
    bool pageLocked() const { return pool_->isPageLocked(data_); }
    // Past size(): room for the device's hashes of the pieces in data()
    // (16 bytes for each KiB).
    uint64_t* hashArea() const { return reinterpret_cast<uint64_t*>(data_ + pool_->bufferBytes_); }

   private:
    StagingPool* pool_;
    uint8_t* data_;
  };

  Lease acquire();  // throws std::bad_alloc when no memory at all
  size_t bufferBytes() const { return bufferBytes_; }

 private:
  bool isPageLocked(const uint8_t* data);

  const size_t bufferBytes_;
  std::mutex mutex_;
  std::vector<uint8_t*> free_;
  std::vector<const uint8_t*> plain_;  // those the driver would not page-lock (few: a fallback)
};

// What a snapshot stored: Content fields, ready to be copied into an event.
struct StoredContent {
  uint64_t size = 0;
  uint32_t pieceSize = 0;
  std::vector<format::Hash128> pieces;

  void writeTo(schema::Content::Builder out) const;
};

// How a trace names the kind of a tracked allocation.
inline schema::MemoryKind memoryKind(AllocationKind kind) {
  switch (kind) {
    case AllocationKind::kDevice:
      return schema::MemoryKind::ALLOCATION;
    case AllocationKind::kManaged:
      return schema::MemoryKind::MANAGED;
    case AllocationKind::kVmm:
      return schema::MemoryKind::VMM;
    case AllocationKind::kHostMapped:
      return schema::MemoryKind::HOST_MAPPED;
    case AllocationKind::kImported:
      return schema::MemoryKind::IMPORTED;
  }
  return schema::MemoryKind::UNKNOWN;
}

struct SnapshotRange {
  uint64_t address = 0;
  uint64_t size = 0;
  uint64_t allocationBase = 0;
  schema::MemoryKind kind = schema::MemoryKind::ALLOCATION;
};

// A range and its stored content, as a launch's pre or post lists it.
struct TakenRange {
  SnapshotRange range;
  StoredContent content;
};
void writeRanges(capnp::List<schema::MemoryRange>::Builder list, const std::vector<TakenRange>& taken);

// Page-locks the writer's direct blocks (TraceWriter::takeDirectBlocks)
// with the driver (cuMemHostRegister): device-hashed segments are copied
// into them straight from the device.
format::PageLocker& driverPageLocker();

// Copies `range` from the device (host-mapped memory: read directly) and
// stores it. When `hostCopy` is given, the bytes are also left there (for
// scanning small buffers for pointers). `deviceHashing`: the range may be
// hashed on the device first (--hash device). `ownStreamOnly`: every copy
// goes through kcap's own non-blocking stream, never a synchronous copy
// (which waits on the legacy stream, and so on any blocking stream: one
// capturing into a graph would have its capture invalidated); fails when
// that stream cannot be had. Returns the first failing copy's result (the
// content is then incomplete and must not be used).
CUresult snapshot(format::TraceWriter& writer, StagingPool& staging, const SnapshotRange& range, StoredContent& out,
                  std::vector<uint8_t>* hostCopy, bool deviceHashing, bool ownStreamOnly = false);

}  // namespace kcap
