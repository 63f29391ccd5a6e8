// CheckpointGate: a checkpoint must sit at one point of the event order.
// Every call that changes device memory (launches, copies, memsets, graph
// launches) passes through the gate while checkpoint mode records; a
// checkpoint closes it, waits for the calls inside to leave, takes the
// checkpoint, and opens it. A call inside the gate has either handed its
// event to the writer before the checkpoint event, with its work queued
// before the checkpoint drains the device, or it arrives after and waits:
// so replay can restore a checkpoint and re-execute exactly the events
// after it.
//
// Passing costs the call two plain stores to its own thread's slot
// (ThreadWork) and the load of one flag; the closing side pays for the
// ordering with ThreadWork's asymmetric fence, as ending a recording does.
// Only the thread holding the gate closed may take a checkpoint, and it is
// itself inside the gate (a launch that found a checkpoint due), so it does
// not wait for itself.
#pragma once

#include "thread_work.h"

#include <atomic>
#include <chrono>

namespace kcap {

class CheckpointGate {
 public:
  // Checkpoint mode records: calls start passing through the gate.
  static void arm() noexcept { armed_.store(true, std::memory_order_relaxed); }
  static void disarm() noexcept { armed_.store(false, std::memory_order_relaxed); }
  static bool armed() noexcept { return armed_.load(std::memory_order_relaxed); }

  // The caller's side, around the whole call (its observers included).
  // Calls nest (NCCL's call holds the gate around the launches it makes):
  // an inner one passes, its thread being counted inside already.
  static void enter(ThreadWork::Slot& slot) noexcept {
    const auto outer = slot.gated.load(std::memory_order_relaxed);
    slot.gated.store(outer + 1, std::memory_order_relaxed);
    ThreadWork::workerFence();
    if (outer == 0 && closed_.load(std::memory_order_relaxed)) [[unlikely]] {
      waitWhileClosed(slot);
    }
  }
  static void leave(ThreadWork::Slot& slot) noexcept {
    slot.gated.store(slot.gated.load(std::memory_order_relaxed) - 1, std::memory_order_release);
  }

  // The checkpoint's side. Closes the gate and waits, at most `wait`, for
  // every other thread's call to leave it. False (the gate left open) when
  // another thread holds it closed or the calls did not leave in time.
  static bool close(const ThreadWork::Slot* own, std::chrono::milliseconds wait) noexcept;
  static void open() noexcept { closed_.store(false, std::memory_order_release); }

  // Holds the gate closed for a scope.
  class Closed {
   public:
    Closed(const ThreadWork::Slot* own, std::chrono::milliseconds wait) noexcept : held_(close(own, wait)) {}
    ~Closed() {
      if (held_) open();
    }
    Closed(const Closed&) = delete;
    Closed& operator=(const Closed&) = delete;
    explicit operator bool() const { return held_; }

   private:
    bool held_;
  };

 private:
  static void waitWhileClosed(ThreadWork::Slot& slot) noexcept;

  inline static std::atomic<bool> armed_{false};
  inline static std::atomic<bool> closed_{false};
};

}  // namespace kcap
