// Recycler: per-thread pools of the objects that carry launch events to the
// trace writer (format::DeferredEvent).
//
// An event is made on the launching thread and released on one of the
// writer's threads. With plain new and delete every launch paid for memory
// crossing threads (malloc's arena locks and refills), a large part of what
// recording adds to a launch. Here a released event goes back to the pool it
// came from: writer threads push onto the pool's returned list (lock-free),
// and the pool's owner takes the whole list at once when its free list runs
// dry. Only the owner ever pops, so the ABA problem of lock-free stacks
// cannot arise. Vectors inside a recycled event keep their capacity.
//
// Pools are never freed (the writer may hold a pool's events after its
// thread exited) but they are not lost either: every pool is on one global
// list, and the pool of a thread that exited is adopted by the next thread
// that needs one. A thread past its thread_local destructors gets no pool;
// its events are plain new and delete.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "cache_prefetch.h"

namespace kcap {

// T: a DeferredEvent with `T* nextFree`, `Recycler<T>* home` (nullptr: not
// pooled) and `void clear()`.
template <class T>
class Recycler {
 public:
  // The calling thread's pool; nullptr once the thread is exiting.
  static Recycler* ofThisThread() {
    struct Owner {
      Recycler* pool = nullptr;
      bool gone = false;
      ~Owner() {
        gone = true;
        if (pool != nullptr) {
          pool->orphaned_.store(true, std::memory_order_release);  // for the next thread to adopt
          pool = nullptr;
        }
      }
    };
    thread_local Owner owner;
    if (owner.pool == nullptr && !owner.gone) {
      owner.pool = adoptOrMake();
    }
    return owner.pool;
  }

  // An event from `pool`, or a new unpooled one when there is none.
  static T* take(Recycler* pool) {
    if (pool == nullptr) {
      return new T;
    }
    if (pool->free_ == nullptr) {
      pool->free_ = pool->returned_.exchange(nullptr, std::memory_order_acquire);
    }
    if (pool->free_ == nullptr) {
      T* made = new T;
      made->home = pool;
      return made;
    }
    T* event = pool->free_;
    pool->free_ = event->nextFree;
    event->nextFree = nullptr;
    // The next take's object, for the next launch; this one's own
    // buffers (its object was asked for by the take before). A pooled
    // event comes back from a writer thread that wrote it last (clear())
    // and read its buffers: the launching thread's first stores to it
    // would wait for the lines to cross from that core, and whatever fence
    // comes next (the writer's seq ticket, the driver's lock) for those
    // stores. Asked for one launch ahead, the lines are here in time.
    if (pool->free_ != nullptr) {
      prefetchForWrite(pool->free_, sizeof(T));
    }
    if constexpr (requires { event->prefetchBuffers(); }) {
      event->prefetchBuffers();
    }
    return event;
  }

  // Any thread, once the writer is done with the event.
  static void release(T* event) noexcept {
    Recycler* pool = event->home;
    if (pool == nullptr) {
      delete event;
      return;
    }
    event->clear();
    event->nextFree = pool->returned_.load(std::memory_order_relaxed);
    while (!pool->returned_.compare_exchange_weak(event->nextFree, event, std::memory_order_release,
                                                  std::memory_order_relaxed)) {}
  }

 private:
  Recycler() = default;

  static Recycler* adoptOrMake() {
    for (Recycler* pool = all_.load(std::memory_order_acquire); pool != nullptr; pool = pool->nextPool_) {
      bool orphaned = true;
      if (pool->orphaned_.compare_exchange_strong(orphaned, false, std::memory_order_acq_rel)) {
        return pool;
      }
    }
    auto* made = new Recycler;
    made->nextPool_ = all_.load(std::memory_order_relaxed);
    while (!all_.compare_exchange_weak(made->nextPool_, made, std::memory_order_release, std::memory_order_relaxed)) {}
    return made;
  }

  inline static std::atomic<Recycler*> all_{nullptr};  // every pool ever made (never shrinks)
  // The owner's line: read and written on every take().
  alignas(64) T* free_ = nullptr;
  Recycler* nextPool_ = nullptr;
  std::atomic<bool> orphaned_{false};  // its thread exited: free for another to adopt
  // The writer threads' line: every release() writes it. Sharing the
  // owner's line, each release while the owner launches would pull that
  // line away from the launching thread's core.
  alignas(64) std::atomic<T*> returned_{nullptr};  // released by writer threads, not yet taken back
};

}  // namespace kcap
