// ProducerQueues: a queue of deferred events per producer thread, so that
// the hottest producers (the shim's launches) append without a lock or an
// atomic read-modify-write (TraceWriter::appendQueued).
//
// The writer orders appends under one lock. Taking it costs a producer a
// locked instruction, 30-45 ns on the H200 host right after a driver call
// (it waits for the store buffer to drain: docs/benchmarks.md), a sixth of
// what recording adds to a launch. Here a producer only stores its event
// into its own single-producer ring; whoever next holds the writer's lock
// (any append, flush, close, or the producer itself once its ring is full)
// drains every ring into the record batch, and the events take their seq
// numbers then.
//
// Order. Each event carries a stamp, read by its producer from a clock that
// is monotonic across CPUs (the shim: the time-stamp counter, used only
// where the kernel found it synchronized), after everything the event must
// follow. A drain reads the clock once, ordered with its loads (`cut`), and
// takes:
//   - every event of the draining thread's own ring (they precede what the
//     drainer appends next, in program order);
//   - the events of other rings stamped before `cut`, merged in stamp order
//     (a ring's own order is its stamp order).
// Why that keeps causality: if event E1 (thread A) happens before E2
// (thread B), A stored E1 before it synchronized with B, and B read E2's
// stamp after that. A drain that takes E2 read `cut` after E2's stamp, so
// after A's store of E1 became visible to B, hence to every CPU (x86 and
// arm64 are multi-copy atomic): its later look at A's ring sees E1, which
// is stamped earlier and so is merged first (or was drained before). An
// event stamped before `cut` but stored after the drain looked is concurrent
// with everything that drain took: any place after them is correct.
// The stamp's own read needs no fence when it comes long after the
// synchronization (the shim stamps after the driver's launch call returns,
// thousands of instructions later: more than a CPU holds in flight).
//
// Rings are never freed while the queues live; the ring of a thread that
// exited is adopted by the next thread that needs one (its events are still
// drained: they precede everything the adopter does).
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

namespace kcap::format {

class DeferredEvent;

class ProducerQueues {
 public:
  // Events a ring holds. The producer drains once it is full: one lock per
  // this many events.
  static constexpr uint32_t kCapacity = 64;

  class Ring;

  ProducerQueues();
  ~ProducerQueues();  // releases the events still queued (nobody may push then)
  ProducerQueues(const ProducerQueues&) = delete;
  ProducerQueues& operator=(const ProducerQueues&) = delete;

  // The calling thread's ring, registered at its first call; nullptr once the
  // thread is past its thread_local destructors (it appends with the lock).
  Ring* mine() noexcept;

  // The calling thread's ring if it has taken one, else nullptr.
  const Ring* mineIfAny() const noexcept;

  // The producer's side (the ring's thread only). False: the ring is full
  // (a drain has not run since) and nothing was queued.
  static bool push(Ring& ring, DeferredEvent* event, uint64_t stamp) noexcept;
  static bool full(const Ring& ring) noexcept;

  // True when some ring holds events (a cheap look, for drains with nothing
  // to do). Any thread.
  bool anyQueued() const noexcept;

  // The drainer's side; one drainer at a time (the caller's lock). Takes
  // what the rules above allow: all of `own` (may be nullptr), and the other
  // rings' events stamped before `cut` (all of them with takeAll), in stamp
  // order, handing each to `take` (which owns it from then on). A `take`
  // that throws leaves the events after it queued.
  template <class Take>
  void drain(const Ring* own, uint64_t cut, bool takeAll, Take&& take);

  // Any thread; drainers excluded. Hands every queued event to `release`
  // (for a writer that failed or closed).
  template <class Release>
  void discardAll(Release&& release);

 private:
  struct Entry {
    DeferredEvent* event;
    uint64_t stamp;
  };
  struct Owner;
  struct Cursor {
    Ring* ring;
    uint64_t next;  // the next entry to take
    uint64_t end;   // one past the last one this drain takes
  };
  Ring* adoptOrMake() noexcept;
  static void unreference(Ring* ring) noexcept;
  static const Entry& at(const Ring& ring, uint64_t index) noexcept;
  static void taken(Ring& ring, uint64_t next) noexcept;  // entries before `next` are the drainer's
  void collect(const Ring* own, uint64_t cut, bool takeAll);

  const uint64_t id_;                  // tells this instance's rings from another's in a thread's cache
  std::atomic<Ring*> rings_{nullptr};  // every ring made, a list that only grows
  std::vector<Cursor> cursors_;        // the drainer's scratch
};

// A producer's ring: head written by its thread, tail by drainers, on
// separate cache lines.
class alignas(64) ProducerQueues::Ring {
 private:
  friend class ProducerQueues;
  friend struct ProducerQueues::Owner;
  std::atomic<uint64_t> head_{0};  // entries pushed
  Ring* next_ = nullptr;           // in rings_
  // Set when the owning thread exits (or moves on to another writer): the
  // next thread that needs a ring may adopt it.
  std::atomic<bool> orphaned_{false};
  // The list's reference and the owning thread's: a thread may exit after
  // the queues are gone (its ring then goes with it), or the other way.
  std::atomic<int> references_{1};
  alignas(64) std::atomic<uint64_t> tail_{0};  // entries taken by drainers
  alignas(64) Entry entries_[kCapacity];
};

inline const ProducerQueues::Entry& ProducerQueues::at(const Ring& ring, uint64_t index) noexcept {
  return ring.entries_[index % kCapacity];
}

inline void ProducerQueues::taken(Ring& ring, uint64_t next) noexcept {
  ring.tail_.store(next, std::memory_order_release);  // the producer may reuse the slots
}

inline bool ProducerQueues::push(Ring& ring, DeferredEvent* event, uint64_t stamp) noexcept {
  const uint64_t head = ring.head_.load(std::memory_order_relaxed);
  if (head - ring.tail_.load(std::memory_order_acquire) >= kCapacity) return false;
  ring.entries_[head % kCapacity] = {event, stamp};
  ring.head_.store(head + 1, std::memory_order_release);
  return true;
}

inline bool ProducerQueues::full(const Ring& ring) noexcept {
  return ring.head_.load(std::memory_order_relaxed) - ring.tail_.load(std::memory_order_acquire) >= kCapacity;
}

template <class Take>
void ProducerQueues::drain(const Ring* own, uint64_t cut, bool takeAll, Take&& take) {
  collect(own, cut, takeAll);
  if (cursors_.size() == 1) {  // the common case: one launching thread
    Cursor& only = cursors_.front();
    while (only.next != only.end) {
      DeferredEvent* event = at(*only.ring, only.next).event;
      taken(*only.ring, ++only.next);
      take(event);
    }
    return;
  }
  // Merge by stamp: a handful of rings, so a linear look for the smallest.
  for (;;) {
    Cursor* first = nullptr;
    for (Cursor& cursor : cursors_) {
      if (cursor.next != cursor.end &&
          (first == nullptr || at(*cursor.ring, cursor.next).stamp < at(*first->ring, first->next).stamp)) {
        first = &cursor;
      }
    }
    if (first == nullptr) return;
    DeferredEvent* event = at(*first->ring, first->next).event;
    taken(*first->ring, ++first->next);
    take(event);
  }
}

template <class Release>
void ProducerQueues::discardAll(Release&& release) {
  collect(nullptr, 0, true);
  for (Cursor& cursor : cursors_) {
    while (cursor.next != cursor.end) {
      DeferredEvent* event = at(*cursor.ring, cursor.next).event;
      taken(*cursor.ring, ++cursor.next);
      release(event);
    }
  }
}

}  // namespace kcap::format
