#include "hooks/stats.h"

#include "hooks/shim_log.h"
#include "record/code_registry.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace kcap {

namespace detail {
std::atomic<std::uint64_t> g_callCounts[kHookCount] = {};
std::atomic<int> g_counting{kUndecided};

int decideCounting() noexcept {
  const char* path = std::getenv("KCAP_STATS_FILE");
  const int state = path != nullptr && path[0] != '\0' ? kOn : kOff;
  g_counting.store(state, std::memory_order_relaxed);
  return state;
}
}  // namespace detail

std::uint64_t callCount(HookId id) noexcept { return detail::g_callCounts[slotOf(id)].load(std::memory_order_relaxed); }

namespace {

struct SnapshotProfile {
  std::atomic<std::uint64_t> ranges{0}, bytes{0}, chunks{0}, buffersMade{0};
  std::atomic<std::uint64_t> ns[4] = {};
  std::atomic<std::uint64_t> bytesBy[3] = {};  // by SnapshotBytes
};
SnapshotProfile g_snapshots;

std::mutex g_writerMutex;
bool g_writerNoted = false;
WriterFigures g_writer{};

unsigned long long ull(const std::atomic<std::uint64_t>& value) {
  return static_cast<unsigned long long>(value.load(std::memory_order_relaxed));
}

}  // namespace

void countSnapshotRange(std::uint64_t bytes) noexcept {
  if (counting()) {
    g_snapshots.ranges.fetch_add(1, std::memory_order_relaxed);
    g_snapshots.bytes.fetch_add(bytes, std::memory_order_relaxed);
  }
}

void countSnapshotChunk() noexcept {
  if (counting()) {
    g_snapshots.chunks.fetch_add(1, std::memory_order_relaxed);
  }
}

void countSnapshotBytes(SnapshotBytes what, std::uint64_t bytes) noexcept {
  if (counting()) {
    g_snapshots.bytesBy[static_cast<int>(what)].fetch_add(bytes, std::memory_order_relaxed);
  }
}

void countSnapshotTime(SnapshotTime what, std::uint64_t ns) noexcept {
  if (counting()) {
    g_snapshots.ns[static_cast<int>(what)].fetch_add(ns, std::memory_order_relaxed);
  }
}

void countStagingBufferMade() noexcept {
  if (counting()) {
    g_snapshots.buffersMade.fetch_add(1, std::memory_order_relaxed);
  }
}

void noteWriterStats(const WriterFigures& figures) noexcept {
  if (counting()) {
    std::lock_guard lock(g_writerMutex);
    g_writer = figures;
    g_writerNoted = true;
  }
}

namespace {

void writeStats(const char* path) {
  std::FILE* out = std::fopen(path, "w");
  if (out == nullptr) {
    logMessage("cannot write KCAP_STATS_FILE %s: %s", path, std::strerror(errno));
    return;
  }
  std::fprintf(out, "kcap-stats 1\n");
  for (std::size_t i = 0; i < kHookCount; ++i) {
    const auto id = static_cast<HookId>(i);
    if (const std::uint64_t calls = callCount(id)) {
      std::fprintf(out, "call %s %llu\n", spec(id).symbol.data(), static_cast<unsigned long long>(calls));
    }
  }
  for (const auto& [name, launches] : CodeRegistry::instance().launchCounts()) {
    std::fprintf(out, "kernel %s %llu\n", name.c_str(), static_cast<unsigned long long>(launches));
  }
  const SnapshotProfile& s = g_snapshots;
  if (s.ranges.load() > 0) {
    std::fprintf(out, "snapshot ranges %llu bytes %llu chunks %llu device_hashed %llu copied %llu direct %llu\n",
                 ull(s.ranges), ull(s.bytes), ull(s.chunks),
                 ull(s.bytesBy[static_cast<int>(SnapshotBytes::kDeviceHashed)]),
                 ull(s.bytesBy[static_cast<int>(SnapshotBytes::kCopied)]),
                 ull(s.bytesBy[static_cast<int>(SnapshotBytes::kDirect)]));
    std::fprintf(out, "snapshot_ns copy_wait %llu store %llu staging %llu buffers_made %llu device_hash %llu\n",
                 ull(s.ns[static_cast<int>(SnapshotTime::kCopyWait)]),
                 ull(s.ns[static_cast<int>(SnapshotTime::kStore)]), ull(s.ns[static_cast<int>(SnapshotTime::kStaging)]),
                 ull(s.buffersMade), ull(s.ns[static_cast<int>(SnapshotTime::kDeviceHash)]));
  }
  {
    std::lock_guard lock(g_writerMutex);
    if (g_writerNoted) {
      std::fprintf(out, "writer unique_bytes %llu reused_buffers %llu wait_ns %llu page_locked %llu lock_ns %llu\n",
                   ull(g_writer.uniqueBytes), ull(g_writer.reusedBuffers), ull(g_writer.producerWaitNs),
                   ull(g_writer.pageLockedBytes), ull(g_writer.pageLockNs));
    }
  }
  if (std::fclose(out) != 0) {
    logMessage("cannot write KCAP_STATS_FILE %s: %s", path, std::strerror(errno));
  }
}

// Runs when the shim is unloaded at exit, after the program's own exit
// handlers, and last of the shim's: a destructor with a priority runs after
// those without one, such as the one that ends the trace (process/lifecycle.cpp),
// whose writer statistics this reports. Threads the program left running may
// still be counting.
[[gnu::destructor(101)]] void writeStatsAtExit() noexcept {
  const char* path = std::getenv("KCAP_STATS_FILE");
  if (!counting() || path == nullptr || path[0] == '\0') {
    return;
  }
  try {
    writeStats(path);
  } catch (...) {
    logMessage("cannot write KCAP_STATS_FILE %s: out of memory", path);
  }
}

}  // namespace
}  // namespace kcap
