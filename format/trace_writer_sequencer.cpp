// The producers' appends and the merger thread that orders them
// (trace_writer_impl.h says how they meet).
//
// Why one ring indexed by seq rather than a queue per producer thread: the
// producer's cost is the same (the ticket, then stores to a line only it
// and the merger touch), while the merger finds seq n at a fixed place
// instead of comparing the heads of every thread's queue, and there is no
// queue to find, create or hand over when threads come and go.
#include <algorithm>
#include <chrono>
#include <thread>

#include <capnp/serialize.h>

#include "trace_writer_impl.h"

namespace kcap::format {
namespace {

void cpuRelax() {
#if defined(__x86_64__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// The merger's naps while the ring is empty: short ones while appends
// come (a producer never wakes it then: no system call on the launch
// path), long ones once it has been idle a while (then the producer of
// every 64th seq wakes it). A nap only delays the merge: the ring holds
// kRingSlots entries, and a producer that finds it full wakes the merger.
// The short nap is as long as the ring allows at the fastest launch rates
// measured (docs/benchmarks.md): each wake takes a core for a moment, and
// with many launching threads that sleep inside the driver, a thread woken
// while the merger holds its core is moved to another, cold one.
constexpr auto kShortNap = std::chrono::microseconds(500);
constexpr auto kLongNap = std::chrono::milliseconds(2);
constexpr unsigned kNapsBeforeLong = 4;  // about kLongNap of idleness
constexpr unsigned kRunLimit = 1024;     // entries merged under one hold of batchMutex_

}  // namespace

uint64_t TraceWriterImpl::append(DeferredEventPtr event) {
  const unsigned count = event->eventCount();
  if (count == 0) throw FormatError(path_ + ": a deferred event standing for no event");
  const uint64_t seq = tickets_.fetch_add(count, std::memory_order_seq_cst);
  if (refusing(seq)) [[unlikely]] {
    publish(seq, count, EntryKind::kVoid, nullptr, nullptr);
    throwRefused();  // `event` goes back to its owner's pool
  }
  publish(seq, count, EntryKind::kEvent, event.release(), nullptr);
  return seq;
}

uint64_t TraceWriterImpl::append(capnp::MessageBuilder& message) { return appendAt(message, false); }

uint64_t TraceWriterImpl::appendNumbered(capnp::MessageBuilder& message) { return appendAt(message, true); }

uint64_t TraceWriterImpl::appendAt(capnp::MessageBuilder& message, bool numbered) {
  auto root = message.getRoot<schema::Event>();
  auto segments = message.getSegmentsForOutput();
  const size_t bytes = capnp::computeSerializedSizeInWords(segments) * sizeof(capnp::word);
  if (bytes > kMaxRecordChunkRaw) {
    throw FormatError(path_ + ": an event of " + std::to_string(bytes) + " bytes is over the record chunk limit");
  }
  // A numbered event takes every seq from the next one to its own: the
  // ones it skips are a gap in the trace.
  uint64_t first = 0;
  uint64_t seq = 0;
  if (numbered) {
    seq = root.getSeq();
    first = tickets_.load(std::memory_order_relaxed);
    do {
      if (seq < first) {
        throw FormatError(path_ + ": event " + std::to_string(seq) + " appended after " + std::to_string(first - 1));
      }
    } while (!tickets_.compare_exchange_weak(first, seq + 1, std::memory_order_seq_cst, std::memory_order_relaxed));
  } else {
    first = tickets_.fetch_add(1, std::memory_order_seq_cst);
    seq = first;
  }
  const uint64_t count = seq + 1 - first;
  if (refusing(first)) [[unlikely]] {
    publish(first, count, EntryKind::kVoid, nullptr, nullptr);
    throwRefused();
  }
  // The seq numbers are taken: whatever happens now, their entry must
  // reach the merger, which waits for it.
  std::unique_ptr<std::vector<uint8_t>> flat;
  try {
    if (!numbered) root.setSeq(seq);  // in place: the segments above see it
    flat = std::make_unique<std::vector<uint8_t>>();
    flat->reserve(bytes);
    appendFlat(segments, *flat);
  } catch (...) {
    publish(first, count, EntryKind::kVoid, nullptr, nullptr);
    throw;
  }
  publish(first, count, EntryKind::kMessage, nullptr, flat.release());
  return seq;
}

uint64_t TraceWriterImpl::closedAt() const noexcept {
  // close() stores the cut right after closed_: a producer that saw
  // closed_ waits that long at most.
  uint64_t at = closedAt_.load(std::memory_order_seq_cst);
  while (at == kNotYetClosed) {
    cpuRelax();
    at = closedAt_.load(std::memory_order_seq_cst);
  }
  return at;
}

void TraceWriterImpl::publish(uint64_t first, uint64_t count, EntryKind kind, DeferredEvent* event,
                              std::vector<uint8_t>* flat) noexcept {
  // The slot's previous entry (kRingSlots seqs back) must be merged: the
  // merger read it before it moved merged_ past it.
  if (first >= merged_.load(std::memory_order_acquire) + kRingSlots) [[unlikely]] {
    waitForSlot(first);
  }
  RingSlot& slot = ring_[first & (kRingSlots - 1)];
  slot.kind = kind;
  slot.count = count;
  slot.event = event;
  slot.flat = flat;
  slot.filled.store(first + 1, std::memory_order_release);
  // A thread that appends alone (no one took a seq since its last append)
  // most likely fills the next slot next: its line, last read by the
  // merger, is asked for now rather than at the next append's store.
  // Not otherwise: the line would be taken from the producer that fills it.
  // Initial exec: no call to __tls_get_addr on the append path of the
  // shim, which is loaded at process start.
  [[gnu::tls_model("initial-exec")]] thread_local uint64_t t_nextSeq = ~0ull;
  if (first == t_nextSeq) __builtin_prefetch(&ring_[(first + count) & (kRingSlots - 1)], 1, 3);
  t_nextSeq = first + count;
  if ((first & 63) == 0 && mergerSleep_.load(std::memory_order_relaxed) == 2) [[unlikely]] {
    wakeMerger();
  }
}

void TraceWriterImpl::waitForSlot(uint64_t first) noexcept {
  const uint64_t target = first - kRingSlots + 1;
  for (int spin = 0; spin < 256; ++spin) {
    if (merged_.load(std::memory_order_acquire) >= target) return;
    cpuRelax();
  }
  const auto start = std::chrono::steady_clock::now();
  waitMerged(target);
  ringWaitNs_.fetch_add(
      static_cast<uint64_t>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count()),
      std::memory_order_relaxed);
}

void TraceWriterImpl::throwRefused() const {
  if (failed_.load(std::memory_order_acquire)) {
    std::lock_guard lock(mutex_);
    throwIfFailed();
  }
  throw FormatError(path_ + ": the trace writer is closed");
}

void TraceWriterImpl::wakeMerger() const noexcept {
  if (mergerSleep_.load(std::memory_order_relaxed) == 0) return;
  std::lock_guard lock(mergeMutex_);
  wakeCv_.notify_one();
}

void TraceWriterImpl::waitMerged(uint64_t target) const noexcept {
  if (merged_.load(std::memory_order_acquire) >= target) return;
  std::unique_lock lock(mergeMutex_);
  // Counted before merged_ is read again; the merger stores merged_ before
  // it reads the count (both sequentially consistent): one of the two
  // sees the other, so no notification is missed.
  mergeWaiters_.fetch_add(1, std::memory_order_seq_cst);
  wakeCv_.notify_one();
  while (merged_.load(std::memory_order_seq_cst) < target) {
    mergedCv_.wait_for(lock, std::chrono::milliseconds(10));
  }
  mergeWaiters_.fetch_sub(1, std::memory_order_relaxed);
}

void TraceWriterImpl::mergeLoop() {
  uint64_t next = 0;
  unsigned naps = 0;
  for (;;) {
    if (ring_[next & (kRingSlots - 1)].filled.load(std::memory_order_acquire) == next + 1) {
      next = mergeRun(next);
      naps = 0;
      continue;
    }
    std::unique_lock lock(mergeMutex_);
    if (mergerStop_) break;
    // Someone waits for an entry that is on its way: look again soon.
    const bool waited = mergeWaiters_.load(std::memory_order_relaxed) > 0;
    const bool deep = !waited && naps >= kNapsBeforeLong;
    mergerSleep_.store(deep ? 2 : 1, std::memory_order_seq_cst);
    if (ring_[next & (kRingSlots - 1)].filled.load(std::memory_order_acquire) != next + 1) {
      if (waited) {
        lock.unlock();
        std::this_thread::yield();
        lock.lock();
      } else if (deep) {
        wakeCv_.wait_for(lock, kLongNap);
      } else {
        wakeCv_.wait_for(lock, kShortNap);
      }
    }
    mergerSleep_.store(0, std::memory_order_relaxed);
    ++naps;
  }
}

uint64_t TraceWriterImpl::mergeRun(uint64_t next) {
  {
    std::unique_lock batchLock(batchMutex_);
    for (unsigned n = 0; n < kRunLimit; ++n) {
      RingSlot& slot = ring_[next & (kRingSlots - 1)];
      if (slot.filled.load(std::memory_order_acquire) != next + 1) break;
      const uint64_t count = slot.count;
      const EntryKind kind = slot.kind;
      DeferredEventPtr event(slot.event);
      std::unique_ptr<std::vector<uint8_t>> flat(slot.flat);
      slot.event = nullptr;
      slot.flat = nullptr;
      try {
        mergeEntry(next, count, kind, std::move(event), std::move(flat));
      } catch (const FormatError&) {
        // A write failed (failed_ is set): the events are dropped, the
        // producers learn it at their next append.
      } catch (const std::exception& e) {
        markFailed(e.what());
      }
      next += count;
    }
  }
  merged_.store(next, std::memory_order_seq_cst);
  if (mergeWaiters_.load(std::memory_order_seq_cst) > 0) {
    std::lock_guard lock(mergeMutex_);
    mergedCv_.notify_all();
  }
  return next;
}

void TraceWriterImpl::mergeEntry(uint64_t first, uint64_t count, EntryKind kind, DeferredEventPtr event,
                                 std::unique_ptr<std::vector<uint8_t>> flat) {
  if (kind == EntryKind::kVoid) return;  // refused: closed or failed, nothing to write
  if (kind == EntryKind::kEvent) {
    event->sequenced(first);
    if (failed_.load(std::memory_order_relaxed)) return;
    const size_t hint = event->sizeHint();
    // Seqs a refused append took are a gap: a chunk's events are numbered one by one.
    if (first != nextSeq_) cutBatch();
    // The hint is an estimate: leave room under the chunk limit for it to be off.
    if (batchBytes() + 2 * hint > kMaxRecordChunkRaw / 2) cutBatch();
    if (batch_.eventCount == 0) batch_.firstSeq = first;
    batch_.deferred.push_back({batch_.raw.size(), first, static_cast<unsigned>(count), std::move(event)});
    // The next slot's line, for the next event: the vector's memory was
    // last used by a compression thread (a freed batch).
    if (batch_.deferred.size() < batch_.deferred.capacity()) {
      __builtin_prefetch(batch_.deferred.data() + batch_.deferred.size(), 1, 3);
    }
    batch_.deferredHint += hint;
    batch_.eventCount += static_cast<uint32_t>(count);
    batchStats_.events += count;
    nextSeq_ = first + count;
  } else {
    if (failed_.load(std::memory_order_relaxed)) return;
    const uint64_t seq = first + count - 1;
    // A record chunk's events are numbered from its firstSeq on, one by one.
    if (seq != nextSeq_) cutBatch();
    const size_t bytes = flat->size();
    if (batchBytes() + bytes > kMaxRecordChunkRaw) cutBatch();
    if (batch_.eventCount == 0) batch_.firstSeq = seq;
    batch_.raw.insert(batch_.raw.end(), flat->begin(), flat->end());
    batch_.eventCount++;
    batchStats_.events++;
    batchStats_.recordRawBytes += bytes;
    nextSeq_ = seq + 1;
  }
  if (batchBytes() >= options_.batchBytes) cutBatch();
}

void TraceWriterImpl::markFailed(const std::string& why) {
  std::lock_guard lock(mutex_);
  if (failed_) return;
  error_ = path_ + ": " + why;
  failed_ = true;
  spaceCv_.notify_all();
  writtenCv_.notify_all();
}

}  // namespace kcap::format
