// TraceWriter::appendQueued: per-thread queues drained in stamp order
// (format/producer_queues.h). Order within a thread, the cut that keeps
// causality across threads, adoption of an exited thread's queue, and what
// close and destruction do with queued events.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include <capnp/message.h>

#include "errors.h"
#include "producer_queues.h"
#include "trace_files.h"
#include "trace_reader.h"
#include "trace_writer.h"

namespace kcap::test {
namespace {

// A KernelTiming event whose launchIndex says which event it is.
struct Tagged final : format::DeferredEvent {
  uint64_t tag = 0;
  std::atomic<int>* released = nullptr;
  size_t sizeHint() const override { return 64; }
  void build(schema::Event::Builder event, unsigned) const override { event.initKernelTiming().setLaunchIndex(tag); }
  void release() noexcept override {
    if (released != nullptr) released->fetch_add(1);
    delete this;
  }
};

format::DeferredEventPtr tagged(uint64_t tag, std::atomic<int>* released = nullptr) {
  auto* event = new Tagged;
  event->tag = tag;
  event->released = released;
  return format::DeferredEventPtr(event);
}

void appendImmediate(format::TraceWriter& writer, uint64_t tag) {
  capnp::MallocMessageBuilder message;
  message.initRoot<schema::Event>().initKernelTiming().setLaunchIndex(tag);
  writer.append(message);
}

// The tags in file order; checks that seq numbers run 0, 1, 2, ...
std::vector<uint64_t> tagsInFile(const std::string& path) {
  std::vector<uint64_t> tags;
  uint64_t seq = 0;
  for (const auto& owned : readAllEvents(path)) {
    const auto event = owned.get();
    EXPECT_EQ(event.getSeq(), seq++);
    EXPECT_TRUE(event.isKernelTiming());
    if (event.isKernelTiming()) tags.push_back(event.getKernelTiming().getLaunchIndex());
  }
  return tags;
}

// A clock the test sets: stamps and cuts are whatever it says.
struct ManualClock {
  std::atomic<uint64_t> now{0};
  format::TraceWriter::Options options() {
    format::TraceWriter::Options options;
    options.orderClock = [this] { return now.load(); };
    return options;
  }
};

// CLOCK_MONOTONIC read in order with the loads around it, as the shim's
// TraceClock::orderedStamp.
uint64_t orderedNow() {
#if defined(__x86_64__)
  _mm_lfence();
#endif
  const auto now = std::chrono::steady_clock::now().time_since_epoch();
#if defined(__x86_64__)
  _mm_lfence();
#else
  std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(now).count());
}

// One thread's queued and locked appends keep its order, across many drains
// (its queue fills every ProducerQueues::kCapacity events).
TEST(QueuedAppend, OneThreadKeepsItsOrderAmongLockedAppends) {
  TempDir dir;
  const auto path = dir.file("one.kcap");
  format::TraceWriter::Options options;
  options.orderClock = orderedNow;
  options.batchBytes = 4096;
  auto writer = format::TraceWriter::create(path, options);
  std::vector<uint64_t> expected;
  for (uint64_t tag = 0; tag < 1000; ++tag) {
    if (tag % 97 == 0) {
      appendImmediate(*writer, tag);
    } else if (tag % 89 == 0) {
      writer->append(tagged(tag));
    } else {
      writer->appendQueued(tagged(tag), orderedNow());
    }
    expected.push_back(tag);
  }
  writer->close();
  EXPECT_EQ(tagsInFile(path), expected);
  EXPECT_EQ(writer->stats().events, 1000u);
}

// Another thread's event stamped at or after a drain's cut stays queued: a
// drain cannot tell whether what happened before it is visible yet. Its
// events before the cut go in, in stamp order; the rest at the next drain.
// The thread has exited by then: its queue is drained all the same.
TEST(QueuedAppend, OthersEventsAtOrAfterTheCutWaitForTheNextDrain) {
  TempDir dir;
  const auto path = dir.file("cut.kcap");
  ManualClock clock;
  auto writer = format::TraceWriter::create(path, clock.options());
  std::thread([&] {
    writer->appendQueued(tagged(0), 10);
    writer->appendQueued(tagged(1), 50);
    writer->appendQueued(tagged(2), 100);
  }).join();
  clock.now = 50;
  appendImmediate(*writer, 3);  // drains 0 (10 < 50); 1 and 2 wait
  clock.now = 200;
  appendImmediate(*writer, 4);  // drains 1 and 2 first
  writer->close();
  EXPECT_EQ(tagsInFile(path), (std::vector<uint64_t>{0, 3, 1, 2, 4}));
}

// The draining thread's own queue goes in whole, whatever its stamps: it
// precedes what that thread appends next.
TEST(QueuedAppend, TheDrainersOwnQueueGoesInWhole) {
  TempDir dir;
  const auto path = dir.file("own.kcap");
  ManualClock clock;
  auto writer = format::TraceWriter::create(path, clock.options());
  writer->appendQueued(tagged(0), 1000);  // stamped "after" the cut of 0
  writer->appendQueued(tagged(1), 2000);
  appendImmediate(*writer, 2);
  writer->close();
  EXPECT_EQ(tagsInFile(path), (std::vector<uint64_t>{0, 1, 2}));
}

// Several threads' queues merge by stamp.
TEST(QueuedAppend, QueuesMergeByStamp) {
  TempDir dir;
  const auto path = dir.file("merge.kcap");
  ManualClock clock;
  auto writer = format::TraceWriter::create(path, clock.options());
  std::atomic<int> turn{0};
  auto producer = [&](int self, std::vector<uint64_t> stamps) {
    for (uint64_t stamp : stamps) {
      while (turn.load() != self) std::this_thread::yield();
      writer->appendQueued(tagged(stamp), stamp);
      turn.store(1 - self);
    }
  };
  std::thread a(producer, 0, std::vector<uint64_t>{1, 4, 5, 9});
  std::thread b(producer, 1, std::vector<uint64_t>{2, 3, 7, 8});
  a.join();
  b.join();
  clock.now = 100;
  writer->flush();
  writer->close();
  EXPECT_EQ(tagsInFile(path), (std::vector<uint64_t>{1, 2, 3, 4, 5, 7, 8, 9}));
}

// A thread that exits leaves its queue for the next thread: no queue is made
// per short-lived thread, and what the first left is written first.
TEST(QueuedAppend, AnExitedThreadsQueueIsAdopted) {
  TempDir dir;
  const auto path = dir.file("adopt.kcap");
  ManualClock clock;
  auto writer = format::TraceWriter::create(path, clock.options());
  for (uint64_t round = 0; round < 50; ++round) {
    std::thread([&] {
      writer->appendQueued(tagged(2 * round), 2 * round);
      writer->appendQueued(tagged(2 * round + 1), 2 * round + 1);
    }).join();
  }
  // 100 events, more than one queue holds: had each thread made its own
  // queue, nothing would have been drained yet; adopting, the threads
  // filled one queue and drained it themselves.
  EXPECT_GE(writer->stats().events, format::ProducerQueues::kCapacity);
  clock.now = 1000;
  writer->close();
  std::vector<uint64_t> expected(100);
  for (uint64_t i = 0; i < expected.size(); ++i) expected[i] = i;
  EXPECT_EQ(tagsInFile(path), expected);
}

// Events that happen before others (here: a token passed from thread to
// thread, each appending one event per token it holds) take lower seq
// numbers, while drains run concurrently on every thread and on a flusher.
// A drain that took every queued event without the cut would sometimes see
// a later thread's event before the event its producer waited for.
TEST(QueuedAppend, CausalOrderHoldsAcrossThreadsWithConcurrentDrains) {
  constexpr int kThreads = 4;
  constexpr uint64_t kTokens = 100000;
  TempDir dir;
  const auto path = dir.file("causal.kcap");
  format::TraceWriter::Options options;
  options.orderClock = orderedNow;
  options.batchBytes = 16384;
  auto writer = format::TraceWriter::create(path, options);
  std::atomic<uint64_t> token{0};
  std::atomic<bool> done{false};
  std::vector<std::thread> threads;
  for (int self = 0; self < kThreads; ++self) {
    threads.emplace_back([&, self] {
      for (;;) {
        const uint64_t held = token.load(std::memory_order_acquire);
        if (held >= kTokens) return;
        if (held % kThreads != static_cast<uint64_t>(self)) {  // someone else's turn
          std::this_thread::yield();
          continue;
        }
        writer->appendQueued(tagged(held), orderedNow());
        token.store(held + 1, std::memory_order_release);
      }
    });
  }
  std::thread flusher([&] {
    while (!done.load()) {
      writer->flush();
      std::this_thread::yield();
    }
  });
  for (auto& thread : threads) thread.join();
  done = true;
  flusher.join();
  writer->close();
  const std::vector<uint64_t> tags = tagsInFile(path);
  ASSERT_EQ(tags.size(), kTokens);
  uint64_t outOfOrder = 0;
  for (uint64_t i = 0; i < tags.size(); ++i) outOfOrder += tags[i] != i ? 1 : 0;
  EXPECT_EQ(outOfOrder, 0u);
}

// close() writes every queued event, whatever its stamp; events queued
// after it are released, at the latest when the writer goes, and a full
// queue then reports the closed writer.
TEST(QueuedAppend, CloseWritesWhatIsQueuedAndLaterEventsAreReleased) {
  TempDir dir;
  const auto path = dir.file("close.kcap");
  ManualClock clock;
  std::atomic<int> released{0};
  {
    auto writer = format::TraceWriter::create(path, clock.options());
    std::thread([&] {
      for (uint64_t tag = 0; tag < 3; ++tag) writer->appendQueued(tagged(tag, &released), 1000 + tag);
    }).join();
    writer->close();
    EXPECT_EQ(released.load(), 3);
    EXPECT_EQ(tagsInFile(path), (std::vector<uint64_t>{0, 1, 2}));
    for (uint64_t tag = 0; tag + 1 < format::ProducerQueues::kCapacity; ++tag) {
      writer->appendQueued(tagged(100 + tag, &released), 1);
    }
    EXPECT_THROW(writer->appendQueued(tagged(999, &released), 1), format::FormatError);
    EXPECT_EQ(released.load(), 3 + static_cast<int>(format::ProducerQueues::kCapacity));
    writer->appendQueued(tagged(1000, &released), 1);  // queued: the queue has room again
  }
  EXPECT_EQ(released.load(), 4 + static_cast<int>(format::ProducerQueues::kCapacity));
  EXPECT_EQ(tagsInFile(path), (std::vector<uint64_t>{0, 1, 2}));
}

// Without an order clock there are no queues: appendQueued is append.
TEST(QueuedAppend, WithoutAnOrderClockItIsAppend) {
  TempDir dir;
  const auto path = dir.file("plain.kcap");
  auto writer = format::TraceWriter::create(path);
  std::thread([&] { writer->appendQueued(tagged(0), UINT64_MAX); }).join();
  EXPECT_EQ(writer->stats().events, 1u);
  appendImmediate(*writer, 1);
  writer->close();
  EXPECT_EQ(tagsInFile(path), (std::vector<uint64_t>{0, 1}));
}

}  // namespace
}  // namespace kcap::test
