#include "thread_work.h"

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <new>

namespace kcap {
namespace {

long membarrier(int command) { return ::syscall(__NR_membarrier, command, 0u, 0); }

}  // namespace

// The thread's first call (or one after its thread_local destructors ran).
ThreadWork::Slot* ThreadWork::mineFirst() noexcept {
  // Gives the slot up when the thread exits.
  struct Owner {
    bool gone = false;
    ~Owner() {
      gone = true;
      if (Slot* const slot = t_slot) {
        t_slot = nullptr;
        slot->orphaned.store(true, std::memory_order_release);  // for the next thread to adopt
      }
    }
  };
  thread_local Owner owner;
  if (owner.gone) {
    return nullptr;
  }
  t_slot = adoptOrMake();
  return t_slot;
}

ThreadWork::Slot* ThreadWork::adoptOrMake() noexcept {
  for (Slot* slot = all_.load(std::memory_order_acquire); slot != nullptr; slot = slot->next) {
    bool orphaned = true;
    if (slot->orphaned.compare_exchange_strong(orphaned, false, std::memory_order_acq_rel)) {
      return slot;
    }
  }
  auto* made = new (std::nothrow) Slot;
  if (made == nullptr) {
    return nullptr;
  }
  made->next = all_.load(std::memory_order_relaxed);
  while (!all_.compare_exchange_weak(made->next, made, std::memory_order_release, std::memory_order_relaxed)) {}
  return made;
}

void ThreadWork::prepare() noexcept {
  const bool registered = membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0;
  asymmetric_.store(registered, std::memory_order_seq_cst);
}

void ThreadWork::endingFence() noexcept {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (asymmetric_.load(std::memory_order_relaxed) && membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0) {
    // Refused after registering (cannot happen short of a kernel bug):
    // workers that entered before now have long made their stores
    // visible; a store buffer drains in far less than this.
    ::usleep(1000);
  }
}

bool ThreadWork::anyBusy(const Slot* except) noexcept {
  for (Slot* slot = all_.load(std::memory_order_acquire); slot != nullptr; slot = slot->next) {
    if (slot != except && slot->depth.load(std::memory_order_acquire) != 0) {
      return true;
    }
  }
  return false;
}

bool ThreadWork::anyGated(const Slot* except) noexcept {
  for (Slot* slot = all_.load(std::memory_order_acquire); slot != nullptr; slot = slot->next) {
    if (slot != except && slot->gated.load(std::memory_order_acquire) != 0) {
      return true;
    }
  }
  return false;
}

bool ThreadWork::anyHazard(const void* object) noexcept {
  for (Slot* slot = all_.load(std::memory_order_acquire); slot != nullptr; slot = slot->next) {
    if (slot->hazard.load(std::memory_order_acquire) == object) {
      return true;
    }
  }
  return false;
}

void ThreadWork::forgetOtherThreads() noexcept {
  Slot* const own = mine();
  for (Slot* slot = all_.load(std::memory_order_acquire); slot != nullptr; slot = slot->next) {
    if (slot != own) {
      slot->depth.store(0, std::memory_order_relaxed);
      slot->gated.store(0, std::memory_order_relaxed);
      slot->hazard.store(nullptr, std::memory_order_relaxed);
      slot->orphaned.store(true, std::memory_order_relaxed);
    }
  }
}

}  // namespace kcap
