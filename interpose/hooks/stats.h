// Per-entry-point call counts, and the KCAP_STATS_FILE report.
//
// KCAP_STATS_FILE=<path>: at exit the shim writes how often each hooked entry
// point was called and how many launches each kernel name had, one fact a
// line:
//
//   kcap-stats 1
//   call cuLaunchKernel 12
//   kernel axpy 10
//   snapshot ranges 4 bytes 8589934592 chunks 256 device_hashed 8589934592 copied 4294967296 direct 4294967296
//   snapshot_ns copy_wait 1200000 store 380000000 staging 2500000 buffers_made 2 device_hash 9000000
//   writer unique_bytes 4294967296 reused_buffers 4096 wait_ns 0 page_locked 4294967296 lock_ns 180000000
//
// The snapshot lines say where capturing device memory spent its time, on
// the launching threads (memory_snapshot.cpp): bytes hashed on the device
// and bytes copied to the host (direct: of those, copied straight into the
// writer's page-locked blocks); waiting for the copies from the device,
// storing the staged chunks (hashing, copying new pieces, queueing them),
// making staging buffers (page-locked allocation), hashing on the device
// (the kernel and waiting for it). The
// writer line is its statistics at the end of the trace (wait_ns: producers
// blocked on --buffer; page_locked, lock_ns: its direct memory, and the
// time spent touching and page-locking it).
//
// Tests assert on it; it is also a quick way to see whether a program's
// launches reach the shim at all. Without KCAP_STATS_FILE nothing is counted:
// counters shared by all threads would cost every launch a contended write.
#pragma once

#include "hooks/hook_table.h"

#include <cstdint>

namespace kcap {

namespace detail {
extern std::atomic<std::uint64_t> g_callCounts[kHookCount];
enum : int { kUndecided, kOff, kOn };
extern std::atomic<int> g_counting;
int decideCounting() noexcept;  // reads KCAP_STATS_FILE once
}  // namespace detail

// Decided at the first call, not in a constructor: libraries loaded with the
// program run their constructors (which may call the driver) before ours.
inline bool counting() noexcept {
  const int state = detail::g_counting.load(std::memory_order_relaxed);
  return (state == detail::kUndecided ? detail::decideCounting() : state) == detail::kOn;
}

inline void countCall(HookId id) noexcept {
  if (counting()) {
    detail::g_callCounts[slotOf(id)].fetch_add(1, std::memory_order_relaxed);
  }
}

std::uint64_t callCount(HookId id) noexcept;

// The snapshot profile (counted only with KCAP_STATS_FILE).
enum class SnapshotTime { kCopyWait, kStore, kStaging, kDeviceHash };
enum class SnapshotBytes { kDeviceHashed, kCopied, kDirect };
void countSnapshotRange(std::uint64_t bytes) noexcept;
void countSnapshotChunk() noexcept;
void countSnapshotBytes(SnapshotBytes what, std::uint64_t bytes) noexcept;
void countSnapshotTime(SnapshotTime what, std::uint64_t ns) noexcept;
void countStagingBufferMade() noexcept;
// The writer's statistics as the trace ended (the last trace's, after a
// fork): the figures of format::TraceWriter::Stats the report prints. Plain
// numbers: every hook includes this header, the writer's is heavier.
struct WriterFigures {
  std::uint64_t uniqueBytes;
  std::uint64_t reusedBuffers;
  std::uint64_t producerWaitNs;
  std::uint64_t pageLockedBytes;
  std::uint64_t pageLockNs;
};
void noteWriterStats(const WriterFigures& figures) noexcept;

}  // namespace kcap
