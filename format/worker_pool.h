// WorkerPool: a few threads, kept for the life of their owner, that run the
// iterations of a loop for any number of callers at once.
//
// forEach(n, fn) runs fn(0) .. fn(n-1) on the pool's threads and on the
// calling thread, and returns when all have run. The caller always takes
// part, so a call finishes even while every pool thread is busy with another
// caller's loop. Used where one thread would bound the rate: hashing the
// pieces of a memory snapshot (TraceWriter).
//
// The threads block every signal (a program's asynchronous signal handlers
// never run on them) and are joined by the destructor. In the child of a
// fork they do not exist: there the pool must not be used (owner() says
// whose it is), and its destructor leaves them alone.
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "thread_placement.h"

namespace kcap::format {

class WorkerPool {
 public:
  // `name`: the threads' name, as top and gdb show it; `placement`: prepareThread.
  explicit WorkerPool(unsigned threads, const char* name = "kcap-worker", const ThreadPlacement& placement = {});
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Rethrows the first exception an iteration threw, once all have ended;
  // iterations not yet started when one threw are skipped.
  void forEach(size_t count, const std::function<void(size_t)>& fn);

  unsigned threads() const { return static_cast<unsigned>(threads_.size()); }
  pid_t owner() const { return owner_; }  // the process that made the threads

 private:
  struct Loop;
  void work();
  static void runSome(Loop& loop);

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<Loop>> loops_;  // with iterations not yet claimed
  bool stopping_ = false;
  const pid_t owner_;
  std::vector<std::thread> threads_;
};

}  // namespace kcap::format
