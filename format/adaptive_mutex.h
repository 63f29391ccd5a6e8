// AdaptiveMutex: the lock of the trace writer's record chunk being filled
// (trace_writer_impl.h), held by its merger thread and by flush, close and
// stats. Producers took it on every append before the writer's appends
// became lock-free; what follows explains its design for that use.
#pragma once

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <ctime>

namespace kcap::format {

// The producers' lock: it spins a little before sleeping. Producers hold it
// for a fraction of a microsecond (an append), and with many launching
// threads a sleep and wake-up in the kernel costs far more than that wait.
// Uncontended, lock is one atomic instruction and unlock none: a plain
// store, then a load that finds no sleeper. Locked instructions are what an
// append costs most right after the driver's launch call, whose stores they
// must wait for (docs/benchmarks.md, launch overhead); glibc's adaptive
// mutex, used before, costs a call into the library and a futex mutex whose
// unlock is an exchange one locked instruction more.
//
// The price of the plain-store unlock: the unlocking thread may read
// sleepers_ before its store of state_ is visible, while a waiter counts
// itself in sleepers_ and still sees the lock held; that waiter then sleeps
// with no one to wake it. The kernel's own check of state_ at FUTEX_WAIT
// closes most of that window (the store lands long before the system call
// does), and every sleep is bounded, so that a missed wake-up costs at most
// kSleep.
class AdaptiveMutex {
 public:
  AdaptiveMutex() = default;
  AdaptiveMutex(const AdaptiveMutex&) = delete;
  AdaptiveMutex& operator=(const AdaptiveMutex&) = delete;
  void lock() {
    if (!try_lock()) lockContended();
  }
  void unlock() {
    state_.store(0, std::memory_order_release);
    if (sleepers_.load(std::memory_order_relaxed) != 0) [[unlikely]] {
      ::syscall(SYS_futex, word(), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
    }
  }
  bool try_lock() {
    uint32_t free = 0;
    return state_.compare_exchange_strong(free, 1, std::memory_order_acquire, std::memory_order_relaxed);
  }

 private:
  static constexpr timespec kSleep{0, 1'000'000};  // 1 ms

  void lockContended() {
    for (;;) {
      for (int spin = 0; spin < 128; ++spin) {
        if (state_.load(std::memory_order_relaxed) == 0 && try_lock()) return;
#if defined(__x86_64__)
        __builtin_ia32_pause();
#elif defined(__aarch64__)
        asm volatile("yield");
#endif
      }
      // Count in sleepers_ before the last look at state_ (the read-modify-
      // write orders the two), so that an unlock after that look wakes us.
      sleepers_.fetch_add(1, std::memory_order_seq_cst);
      if (try_lock()) {
        sleepers_.fetch_sub(1, std::memory_order_relaxed);
        return;
      }
      ::syscall(SYS_futex, word(), FUTEX_WAIT_PRIVATE, 1, &kSleep, nullptr, 0);
      sleepers_.fetch_sub(1, std::memory_order_relaxed);
    }
  }
  uint32_t* word() { return reinterpret_cast<uint32_t*>(&state_); }

  static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t), "the futex word is the atomic's storage");
  std::atomic<uint32_t> state_{0};     // 0 free, 1 held
  std::atomic<uint32_t> sleepers_{0};  // threads in or about to enter FUTEX_WAIT; same cache line as state_
};

}  // namespace kcap::format
