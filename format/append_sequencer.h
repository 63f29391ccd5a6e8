// AppendSequencer: how producers hand events to a TraceWriter without a
// lock. Both writers own one: the file writer (trace_writer_impl.h) and the
// flight recorder's ring (ring_trace_writer.h); each is its Consumer.
//
// Each producer takes its seq numbers with one fetch_add on a ticket count
// and puts its entry in the ring slot of its first seq (a cache line only
// it and the merger touch); the merger thread takes the entries in seq
// order, waiting for a seq taken but not yet in its slot, and hands them
// to the consumer (Consumer::merge), calling each deferred event's
// sequenced() first. A producer waits only when its slot's previous entry
// (kSlots seqs back) is not merged yet.
//
// Why one ring indexed by seq rather than a queue per producer thread: the
// producer's cost is the same (the ticket, then stores to a line only it
// and the merger touch), while the merger finds seq n at a fixed place
// instead of comparing the heads of every thread's queue, and there is no
// queue to find, create or hand over when threads come and go.
//
// Closing: markClosed() and drainToCut() refuse appends from a cut on
// (every seq below it is merged, none from it on) and wait for the merger
// to reach the cut. The merger outlives them until stop(): an append
// racing with the close takes its seqs after the cut, and the merger
// takes its (void) entry.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <capnp/message.h>

#include "thread_placement.h"
#include "trace_writer.h"

namespace kcap::format {

class AppendSequencer {
 public:
  enum class EntryKind : uint8_t {
    kEvent,    // a deferred event: `event`
    kMessage,  // a built message in flat form: `flat` (its seq: first + count - 1)
    kVoid,     // a refused append (closed or failed): nothing, the seqs are a gap
  };
  // One producer's append: seq numbers [first, first + count).
  struct Entry {
    uint64_t first = 0;
    uint64_t count = 0;
    EntryKind kind = EntryKind::kVoid;
    DeferredEventPtr event;
    std::unique_ptr<std::vector<uint8_t>> flat;
  };

  // The merger's entries of one wake, in seq order (at most kRunLimit).
  class Run {
   public:
    // The next entry, once its producer put it in place; false at the
    // first seq not yet in place, or at the run's limit.
    bool take(Entry& entry) noexcept;

   private:
    friend class AppendSequencer;
    Run(AppendSequencer& sequencer, uint64_t next) : sequencer_(sequencer), next_(next) {}
    AppendSequencer& sequencer_;
    uint64_t next_;
    unsigned taken_ = 0;
  };

  class Consumer {
   public:
    // On the merger thread: takes the entries of `run` (Run::take until it
    // returns false); every deferred event's sequenced() has been called,
    // in seq order. Must not throw; must not wait for producers.
    virtual void merge(Run& run) noexcept = 0;
    // Why an append is refused (the writer failed or is closed): throws it.
    [[noreturn]] virtual void throwRefused() const = 0;

   protected:
    ~Consumer() = default;
  };

  // `name` starts the errors the appends throw (a path, or what the writer is).
  AppendSequencer(Consumer& consumer, std::string name);
  ~AppendSequencer();
  AppendSequencer(const AppendSequencer&) = delete;
  AppendSequencer& operator=(const AppendSequencer&) = delete;

  // Starts the merger thread: once the consumer is ready for merge().
  void start(const char* threadName, const ThreadPlacement& placement);
  // Ends the merger, after what was published: before the consumer goes.
  void stop() noexcept;

  // A producer's appends (TraceWriter::append, appendNumbered). A refused
  // one throws (Consumer::throwRefused); its seqs are a gap.
  uint64_t append(DeferredEventPtr event);
  uint64_t append(capnp::MessageBuilder& message, bool numbered);

  // From now on every append is refused (the writer failed).
  void refuseAll() noexcept { refuseAll_.store(true, std::memory_order_release); }
  // Closing, in two steps, so that a writer can mark it under a lock of
  // its own (one closer): appends are refused from a cut on, which
  // drainToCut() takes, then waits for the merger to take every entry
  // below it.
  void markClosed() noexcept { closed_.store(true, std::memory_order_seq_cst); }
  void drainToCut() noexcept;
  bool closed() const noexcept { return closed_.load(std::memory_order_seq_cst); }

  uint64_t tickets() const noexcept { return tickets_.load(std::memory_order_seq_cst); }
  // Blocks until the merger has taken every entry below `target`.
  void waitMerged(uint64_t target) const noexcept;
  // Every append made so far is merged.
  void settle() const noexcept { waitMerged(tickets()); }
  // Time producers spent waiting for a full ring (Stats::producerWaitNs).
  uint64_t producerWaitNs() const noexcept { return ringWaitNs_.load(std::memory_order_relaxed); }

 private:
  struct alignas(64) Slot {           // a line each: producers of consecutive seqs write different lines
    std::atomic<uint64_t> filled{0};  // first + 1 once the entry for `first` is in place
    EntryKind kind = EntryKind::kVoid;
    uint64_t count = 0;
    DeferredEvent* event = nullptr;        // kEvent, owned while in the ring
    std::vector<uint8_t>* flat = nullptr;  // kMessage
  };
  static constexpr uint64_t kSlots = 2048;     // a power of two; the bound on entries not yet merged
  static constexpr unsigned kRunLimit = 1024;  // entries handed to the consumer in one merge()

  // Whether the append that took seqs from `first` on is refused; the
  // caller then publishes a void entry and throws.
  bool refusing(uint64_t first) const noexcept {
    if (refuseAll_.load(std::memory_order_relaxed)) return true;
    if (!closed_.load(std::memory_order_seq_cst)) [[likely]]
      return false;
    return first >= closedAt();
  }
  // The cut, published by drainToCut() right after closed_ was set.
  uint64_t closedAt() const noexcept;
  // Puts the entry for [first, first + count) in its slot (waiting while
  // the slot's previous entry is not merged) and tells the merger.
  void publish(uint64_t first, uint64_t count, EntryKind kind, DeferredEvent* event,
               std::vector<uint8_t>* flat) noexcept;
  void waitForSlot(uint64_t first) noexcept;
  void wake() const noexcept;  // a sleeping merger
  void mergeLoop();
  uint64_t mergeRun(uint64_t next);  // hands what is ready from `next` on; returns where it stopped

  Consumer& consumer_;
  const std::string name_;

  // Read on every append, written almost never: a line of their own.
  alignas(64) std::atomic<bool> refuseAll_{false};
  std::atomic<bool> closed_{false};
  static constexpr uint64_t kNotYetClosed = ~0ull;
  std::atomic<uint64_t> closedAt_{kNotYetClosed};
  const std::unique_ptr<Slot[]> ring_{new Slot[kSlots]};
  // Taken by every append: a line of its own.
  alignas(64) std::atomic<uint64_t> tickets_{0};
  // Written by the merger once a run: where it is (every seq below is merged).
  alignas(64) std::atomic<uint64_t> merged_{0};
  // The merger's sleep: 0 awake, 1 a short nap (it looks again soon), 2 a
  // long one (idle a while): a producer whose seq is a multiple of 64 wakes it.
  mutable std::atomic<int> mergerSleep_{0};
  mutable std::atomic<int> mergeWaiters_{0};   // threads in waitMerged
  alignas(64) mutable std::mutex mergeMutex_;  // waitMerged's sleep and the merger's
  mutable std::condition_variable mergedCv_;   // waiters: merged_ moved
  mutable std::condition_variable wakeCv_;     // the merger: wake up
  bool mergerStop_ = false;                    // under mergeMutex_
  std::atomic<uint64_t> ringWaitNs_{0};        // producers blocked on a full ring
  std::thread merger_;
};

}  // namespace kcap::format
