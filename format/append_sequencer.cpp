// The producers' appends and the merger thread that orders them
// (append_sequencer.h says how they meet).
#include "append_sequencer.h"

#include <chrono>

#include <capnp/serialize.h>

#include "cache_prefetch.h"
#include "chunk_jobs.h"
#include "container.h"
#include "errors.h"

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
// kSlots entries, and a producer that finds it full wakes the merger.
// The short nap is as long as the ring allows at the fastest launch rates
// measured (docs/benchmarks.md): each wake takes a core for a moment, and
// with many launching threads that sleep inside the driver, a thread woken
// while the merger holds its core is moved to another, cold one.
constexpr auto kShortNap = std::chrono::microseconds(500);
constexpr auto kLongNap = std::chrono::milliseconds(2);
constexpr unsigned kNapsBeforeLong = 4;  // about kLongNap of idleness

}  // namespace

AppendSequencer::AppendSequencer(Consumer& consumer, std::string name) : consumer_(consumer), name_(std::move(name)) {}

AppendSequencer::~AppendSequencer() { stop(); }

void AppendSequencer::start(const char* threadName, const ThreadPlacement& placement) {
  merger_ = std::thread([this] { mergeLoop(); });
  prepareThread(merger_, threadName, placement);
}

void AppendSequencer::stop() noexcept {
  if (!merger_.joinable()) return;
  {
    std::lock_guard lock(mergeMutex_);
    mergerStop_ = true;
  }
  wakeCv_.notify_all();
  merger_.join();
}

uint64_t AppendSequencer::append(DeferredEventPtr event) {
  const unsigned count = event->eventCount();
  if (count == 0) throw FormatError(name_ + ": a deferred event standing for no event");
  const uint64_t seq = tickets_.fetch_add(count, std::memory_order_seq_cst);
  if (refusing(seq)) [[unlikely]] {
    publish(seq, count, EntryKind::kVoid, nullptr, nullptr);
    consumer_.throwRefused();  // `event` goes back to its owner's pool
  }
  publish(seq, count, EntryKind::kEvent, event.release(), nullptr);
  return seq;
}

uint64_t AppendSequencer::append(capnp::MessageBuilder& message, bool numbered) {
  auto root = message.getRoot<schema::Event>();
  auto segments = message.getSegmentsForOutput();
  const size_t bytes = capnp::computeSerializedSizeInWords(segments) * sizeof(capnp::word);
  if (bytes > kMaxRecordChunkRaw) {
    throw FormatError(name_ + ": an event of " + std::to_string(bytes) + " bytes is over the record chunk limit");
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
        throw FormatError(name_ + ": event " + std::to_string(seq) + " appended after " + std::to_string(first - 1));
      }
    } while (!tickets_.compare_exchange_weak(first, seq + 1, std::memory_order_seq_cst, std::memory_order_relaxed));
  } else {
    first = tickets_.fetch_add(1, std::memory_order_seq_cst);
    seq = first;
  }
  const uint64_t count = seq + 1 - first;
  if (refusing(first)) [[unlikely]] {
    publish(first, count, EntryKind::kVoid, nullptr, nullptr);
    consumer_.throwRefused();
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

void AppendSequencer::drainToCut() noexcept {
  // closed_ is set before the ticket count is read, both sequentially
  // consistent: an append that did not see closed_ took its seqs before
  // the count was read, so they are below the cut and are merged; an
  // append that saw it compares its seqs with the cut (refusing()). Every
  // seq below the cut is merged.
  const uint64_t cut = tickets_.load(std::memory_order_seq_cst);
  closedAt_.store(cut, std::memory_order_seq_cst);
  waitMerged(cut);
}

uint64_t AppendSequencer::closedAt() const noexcept {
  // drainToCut() stores the cut right after closed_ is set: a producer
  // that saw closed_ waits that long at most.
  uint64_t at = closedAt_.load(std::memory_order_seq_cst);
  while (at == kNotYetClosed) {
    cpuRelax();
    at = closedAt_.load(std::memory_order_seq_cst);
  }
  return at;
}

void AppendSequencer::publish(uint64_t first, uint64_t count, EntryKind kind, DeferredEvent* event,
                              std::vector<uint8_t>* flat) noexcept {
  // The slot's previous entry (kSlots seqs back) must be merged: the
  // merger read it before it moved merged_ past it.
  if (first >= merged_.load(std::memory_order_acquire) + kSlots) [[unlikely]] {
    waitForSlot(first);
  }
  Slot& slot = ring_[first & (kSlots - 1)];
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
  if (first == t_nextSeq) prefetchLineForWrite(&ring_[(first + count) & (kSlots - 1)]);
  t_nextSeq = first + count;
  if ((first & 63) == 0 && mergerSleep_.load(std::memory_order_relaxed) == 2) [[unlikely]] {
    wake();
  }
}

void AppendSequencer::waitForSlot(uint64_t first) noexcept {
  const uint64_t target = first - kSlots + 1;
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

void AppendSequencer::wake() const noexcept {
  if (mergerSleep_.load(std::memory_order_relaxed) == 0) return;
  std::lock_guard lock(mergeMutex_);
  wakeCv_.notify_one();
}

void AppendSequencer::waitMerged(uint64_t target) const noexcept {
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

void AppendSequencer::mergeLoop() {
  uint64_t next = 0;
  unsigned naps = 0;
  for (;;) {
    if (ring_[next & (kSlots - 1)].filled.load(std::memory_order_acquire) == next + 1) {
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
    if (ring_[next & (kSlots - 1)].filled.load(std::memory_order_acquire) != next + 1) {
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

bool AppendSequencer::Run::take(Entry& entry) noexcept {
  if (taken_ == kRunLimit) return false;
  Slot& slot = sequencer_.ring_[next_ & (kSlots - 1)];
  if (slot.filled.load(std::memory_order_acquire) != next_ + 1) return false;
  entry.first = next_;
  entry.count = slot.count;
  entry.kind = slot.kind;
  entry.event.reset(slot.event);
  entry.flat.reset(slot.flat);
  slot.event = nullptr;
  slot.flat = nullptr;
  if (entry.kind == EntryKind::kEvent) entry.event->sequenced(next_);
  next_ += entry.count;
  ++taken_;
  return true;
}

uint64_t AppendSequencer::mergeRun(uint64_t next) {
  Run run(*this, next);
  consumer_.merge(run);
  // Entries the consumer left in place (it stopped early) are taken in
  // the next run.
  next = run.next_;
  merged_.store(next, std::memory_order_seq_cst);
  if (mergeWaiters_.load(std::memory_order_seq_cst) > 0) {
    std::lock_guard lock(mergeMutex_);
    mergedCv_.notify_all();
  }
  return next;
}

}  // namespace kcap::format
