// WorkerPool: every iteration runs once, concurrent callers do not mix, the
// first failure comes back to the caller, and a pool without threads still works.
#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "worker_pool.h"

namespace kcap::test {
namespace {

TEST(WorkerPool, RunsEveryIterationOnceOnSeveralThreads) {
  format::WorkerPool pool(3);
  constexpr size_t kCount = 2000;
  std::vector<std::atomic<int>> runs(kCount);
  std::mutex mutex;
  std::set<std::thread::id> threads;
  pool.forEach(kCount, [&](size_t i) {
    runs[i]++;
    std::this_thread::sleep_for(std::chrono::microseconds(20));  // give the pool time to join in
    std::lock_guard lock(mutex);
    threads.insert(std::this_thread::get_id());
  });
  for (size_t i = 0; i < kCount; ++i) EXPECT_EQ(runs[i].load(), 1) << i;
  EXPECT_GT(threads.size(), 1u);
  EXPECT_TRUE(threads.count(std::this_thread::get_id())) << "the caller takes part";
}

TEST(WorkerPool, ConcurrentCallersEachGetTheirOwnIterations) {
  format::WorkerPool pool(2);
  constexpr unsigned kCallers = 6;
  constexpr size_t kCount = 500;
  std::vector<std::vector<std::atomic<int>>> runs(kCallers);
  for (auto& r : runs) r = std::vector<std::atomic<int>>(kCount);
  std::vector<std::thread> callers;
  for (unsigned c = 0; c < kCallers; ++c) {
    callers.emplace_back([&, c] {
      for (int round = 0; round < 5; ++round) pool.forEach(kCount, [&](size_t i) { runs[c][i]++; });
    });
  }
  for (auto& t : callers) t.join();
  for (unsigned c = 0; c < kCallers; ++c) {
    for (size_t i = 0; i < kCount; ++i) EXPECT_EQ(runs[c][i].load(), 5) << c << " " << i;
  }
}

TEST(WorkerPool, TheFirstFailureReachesTheCallerAfterEveryIterationEnded) {
  format::WorkerPool pool(3);
  std::atomic<int> running{0};
  try {
    pool.forEach(100, [&](size_t i) {
      running++;
      if (i == 10) {
        running--;
        throw std::runtime_error("iteration 10 failed");
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
      running--;
    });
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "iteration 10 failed");
  }
  EXPECT_EQ(running.load(), 0) << "forEach returned while iterations still ran";
  // The pool is still usable.
  std::atomic<size_t> sum{0};
  pool.forEach(10, [&](size_t i) { sum += i; });
  EXPECT_EQ(sum.load(), 45u);
}

TEST(WorkerPool, WithoutThreadsTheCallerRunsEverything) {
  format::WorkerPool pool(0);
  std::vector<int> order;
  pool.forEach(5, [&](size_t i) { order.push_back(static_cast<int>(i)); });
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));
  pool.forEach(0, [&](size_t) { FAIL(); });
}

}  // namespace
}  // namespace kcap::test
