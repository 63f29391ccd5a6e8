// ThreadWork: which threads are inside recorder work, so that the end of a
// recording can wait for them, for two plain stores per piece of work.
//
// Recorder::Operation used to count work in one shared atomic, two locked
// read-modify-writes per operation and four per recorded launch, each a
// full barrier that waits for the driver's stores right before it. Here
// each thread counts its own work in its own cache line, and
// the ordering between "I am working" (the worker's store, then its load of
// `ending`) and "we are ending" (end's store, then its load of the counts)
// is an asymmetric fence: the workers order with a compiler barrier only,
// and the ending thread makes every running thread of the process execute a
// full barrier with membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED). Where the
// kernel refuses membarrier (older than 4.14, a seccomp filter), workers
// fall back to a full fence of their own.
//
// The same slots let readers of copy-on-write data (AllocationMap) announce
// what they read, for the price of two plain stores: a hazard pointer the
// writer checks, after the ending side's fence, before it frees an old copy.
//
// Slots are never freed: a thread that exits leaves its slot (at zero) for
// the next thread that needs one.
#pragma once

#include <atomic>
#include <cstdint>

namespace kcap {

class ThreadWork {
 public:
  struct alignas(64) Slot {
    std::atomic<uint32_t> depth{0};  // work in progress on the owning thread
    std::atomic<uint32_t> gated{0};  // calls inside the checkpoint gate (checkpoint_gate.h)
    std::atomic<bool> orphaned{false};
    // What this thread reads without a lock (AllocationMap's snapshot);
    // nullptr when nothing. Set, then workerFence(), then checked again.
    std::atomic<const void*> hazard{nullptr};
    Slot* next = nullptr;
  };

  // The calling thread's slot; nullptr once the thread is exiting (its
  // work then counts in the caller's shared fallback).
  static Slot* mine() noexcept {
    Slot* const slot = t_slot;
    return slot != nullptr ? slot : mineFirst();
  }

  // The worker's side: enter, then test `ending`; leave when done.
  static void enter(Slot& slot) noexcept {
    slot.depth.store(slot.depth.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    workerFence();
  }
  static void leave(Slot& slot) noexcept {
    slot.depth.store(slot.depth.load(std::memory_order_relaxed) - 1, std::memory_order_release);
  }
  // Between enter's store and the load of the ending flag.
  static void workerFence() noexcept {
    if (asymmetric_.load(std::memory_order_relaxed)) {
      std::atomic_signal_fence(std::memory_order_seq_cst);
    } else {
      std::atomic_thread_fence(std::memory_order_seq_cst);
    }
  }

  // The ending side: after storing the ending flag, before reading the
  // counts. Async-signal-safe.
  static void endingFence() noexcept;
  // True while a thread other than `except`'s has work in progress (the
  // ending thread may itself be inside work: it will not finish it while
  // it waits).
  static bool anyBusy(const Slot* except) noexcept;
  // The same for calls inside the checkpoint gate.
  static bool anyGated(const Slot* except) noexcept;
  // True when a thread's hazard names `object` (call endingFence() first,
  // after making `object` unreachable).
  static bool anyHazard(const void* object) noexcept;

  // Once per process (again in a fork child: the registration is the
  // parent's): asks the kernel for the asymmetric fence, else workers
  // take full fences. Call before the first enter().
  static void prepare() noexcept;
  // In a fork child: the other threads are gone, and with them their work.
  static void forgetOtherThreads() noexcept;

 private:
  static Slot* mineFirst() noexcept;
  static Slot* adoptOrMake() noexcept;

  // Trivially destructible, so that reading it is one load (a thread_local
  // with a destructor is reached through an initialization check). Initial
  // exec: read from this library's own code too (AllocationMap's readers)
  // without a call to __tls_get_addr; the libraries holding it are the
  // shim, loaded at process start, and programs.
  [[gnu::tls_model("initial-exec")]] inline static thread_local Slot* t_slot = nullptr;

  inline static std::atomic<Slot*> all_{nullptr};
  inline static std::atomic<bool> asymmetric_{false};
};

}  // namespace kcap
