#include "worker_pool.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <exception>

namespace kcap::format {

struct WorkerPool::Loop {
  size_t count = 0;
  const std::function<void(size_t)>* fn = nullptr;
  std::atomic<size_t> next{0};   // the next iteration to claim
  std::atomic<size_t> ended{0};  // iterations run (or skipped after a failure)
  std::atomic<bool> failed{false};
  std::mutex mutex;  // guards error, and the caller's wait
  std::condition_variable allEnded;
  std::exception_ptr error;
};

WorkerPool::WorkerPool(unsigned threads, const char* name, const ThreadPlacement& placement) : owner_(::getpid()) {
  sigset_t all;
  sigset_t old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);  // inherited by the threads made here
  try {
    for (unsigned i = 0; i < threads; ++i) {
      threads_.emplace_back([this] { work(); });
      prepareThread(threads_.back(), name, placement);  // before it first runs
    }
  } catch (...) {
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    for (auto& t : threads_) t.join();
    throw;
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

WorkerPool::~WorkerPool() {
  if (::getpid() != owner_) {
    // A forked child: the threads are the parent's, joining them would fail
    // (and a lock may be held by one of them). They stay unjoined, unreachable.
    (void)new std::vector<std::thread>(std::move(threads_));
    return;
  }
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& t : threads_) t.join();
}

// Claims and runs iterations of `loop` until none is left.
void WorkerPool::runSome(Loop& loop) {
  for (size_t i = loop.next++; i < loop.count; i = loop.next++) {
    if (!loop.failed.load(std::memory_order_relaxed)) {
      try {
        (*loop.fn)(i);
      } catch (...) {
        std::lock_guard lock(loop.mutex);
        if (!loop.error) loop.error = std::current_exception();
        loop.failed.store(true, std::memory_order_relaxed);
      }
    }
    if (loop.ended.fetch_add(1) + 1 == loop.count) {
      std::lock_guard lock(loop.mutex);
      loop.allEnded.notify_all();
    }
  }
}

void WorkerPool::work() {
  std::unique_lock lock(mutex_);
  for (;;) {
    wake_.wait(lock, [&] { return stopping_ || !loops_.empty(); });
    if (loops_.empty()) return;  // stopping
    std::shared_ptr<Loop> loop = loops_.front();
    if (loop->next.load() >= loop->count) {
      loops_.pop_front();  // every iteration is claimed: nothing left here for anyone
      continue;
    }
    lock.unlock();
    runSome(*loop);
    lock.lock();
  }
}

void WorkerPool::forEach(size_t count, const std::function<void(size_t)>& fn) {
  if (count == 0) return;
  auto loop = std::make_shared<Loop>();
  loop->count = count;
  loop->fn = &fn;
  if (count > 1 && !threads_.empty()) {
    {
      std::lock_guard lock(mutex_);
      loops_.push_back(loop);
    }
    if (count - 1 >= threads_.size()) {
      wake_.notify_all();
    } else {
      for (size_t i = 0; i + 1 < count; ++i) wake_.notify_one();
    }
  }
  runSome(*loop);
  {
    std::unique_lock lock(loop->mutex);
    loop->allEnded.wait(lock, [&] { return loop->ended.load() == loop->count; });
  }
  {
    std::lock_guard lock(mutex_);
    std::erase(loops_, loop);
  }
  if (loop->error) std::rethrow_exception(loop->error);
}

}  // namespace kcap::format
