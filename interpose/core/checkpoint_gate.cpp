#include "checkpoint_gate.h"

#include <thread>

namespace kcap {

bool CheckpointGate::close(const ThreadWork::Slot* own, std::chrono::milliseconds wait) noexcept {
  bool expected = false;
  if (!closed_.compare_exchange_strong(expected, true, std::memory_order_acq_rel)) {
    return false;
  }
  ThreadWork::endingFence();
  const auto deadline = std::chrono::steady_clock::now() + wait;
  while (ThreadWork::anyGated(own)) {
    if (std::chrono::steady_clock::now() >= deadline) {
      open();
      return false;
    }
    std::this_thread::yield();
  }
  return true;
}

void CheckpointGate::waitWhileClosed(ThreadWork::Slot& slot) noexcept {
  // Step out while the checkpoint is taken (the closing thread waits for
  // this slot to be empty), then in again.
  while (closed_.load(std::memory_order_acquire)) {
    leave(slot);
    while (closed_.load(std::memory_order_acquire)) {
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
    slot.gated.store(slot.gated.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    ThreadWork::workerFence();
  }
}

}  // namespace kcap
