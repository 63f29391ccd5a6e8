// Recycler: the per-thread pools of launch events (interpose/core/event_recycler.h).
// Events are taken on a launching thread and released on the writer's
// threads; these tests hold the pool to what the launch path relies on.
#include "event_recycler.h"

#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <thread>
#include <vector>

namespace kcap {
namespace {

// A stand-in for LaunchEventData: what Recycler asks of T, and a payload
// whose state tells whether the event came back cleared.
struct Event {
  Event* nextFree = nullptr;
  Recycler<Event>* home = nullptr;
  int value = 0;
  std::vector<int> items;

  void clear() {
    value = 0;
    items.clear();
  }
};

TEST(EventRecycler, AReleasedEventComesBackClearedWithItsCapacity) {
  Recycler<Event>* pool = Recycler<Event>::ofThisThread();
  ASSERT_NE(pool, nullptr);
  EXPECT_EQ(Recycler<Event>::ofThisThread(), pool);  // one pool a thread

  Event* event = Recycler<Event>::take(pool);
  EXPECT_EQ(event->home, pool);
  event->value = 7;
  event->items.assign(100, 1);
  const size_t capacity = event->items.capacity();
  std::thread([event] { Recycler<Event>::release(event); }).join();  // as the writer does

  Event* again = Recycler<Event>::take(pool);
  EXPECT_EQ(again, event);  // the pool's own event, not a new one
  EXPECT_EQ(again->value, 0);
  EXPECT_TRUE(again->items.empty());
  EXPECT_EQ(again->items.capacity(), capacity);
  EXPECT_EQ(again->nextFree, nullptr);
  Recycler<Event>::release(again);
}

TEST(EventRecycler, AnEventWithoutAPoolIsDeleted) {
  Event* event = Recycler<Event>::take(nullptr);  // a thread past its thread_local destructors
  EXPECT_EQ(event->home, nullptr);
  Recycler<Event>::release(event);  // deleted: ASan tells if it were not
}

TEST(EventRecycler, AnExitedThreadsPoolIsAdoptedWithItsEvents) {
  Recycler<Event>* exited = nullptr;
  Event* kept = nullptr;
  std::thread([&] {
    exited = Recycler<Event>::ofThisThread();
    kept = Recycler<Event>::take(exited);  // still held by "the writer" when the thread exits
  }).join();
  ASSERT_NE(exited, nullptr);
  Recycler<Event>::release(kept);  // after its thread is gone: back to the orphaned pool

  // Some thread made after the exit adopts that pool (pools are never
  // freed), and the event released there is among what it takes.
  bool adopted = false;
  for (int attempt = 0; attempt < 8 && !adopted; ++attempt) {
    std::thread([&] {
      Recycler<Event>* pool = Recycler<Event>::ofThisThread();
      if (pool == exited) {
        adopted = true;
        std::vector<Event*> taken;
        bool found = false;
        for (int i = 0; i < 4 && !found; ++i) {
          taken.push_back(Recycler<Event>::take(pool));
          found = taken.back() == kept;
        }
        EXPECT_TRUE(found);
        for (Event* event : taken) {
          Recycler<Event>::release(event);
        }
      }
    }).join();
  }
  EXPECT_TRUE(adopted);
}

TEST(EventRecycler, EventsCirculateBetweenAProducerAndReleasingThreads) {
  // One producer takes events and hands them to two "writer" threads,
  // which release them while it takes more: no event is ever held twice,
  // and once the pool is warm the producer stops making new ones.
  constexpr int kRounds = 5000;
  std::atomic<Event*> slots[2] = {nullptr, nullptr};
  std::atomic<bool> done{false};
  std::vector<std::thread> writers;
  for (auto& slot : slots) {
    writers.emplace_back([&slot, &done] {
      while (!done.load(std::memory_order_acquire) || slot.load(std::memory_order_acquire) != nullptr) {
        if (Event* event = slot.exchange(nullptr, std::memory_order_acq_rel)) {
          EXPECT_EQ(event->value, 1);  // nobody else touched it while it was held
          Recycler<Event>::release(event);
        } else {
          std::this_thread::yield();  // CI machines have two cores for three threads
        }
      }
    });
  }
  std::set<Event*> seen;
  Recycler<Event>* pool = Recycler<Event>::ofThisThread();
  for (int i = 0; i < kRounds; ++i) {
    Event* event = Recycler<Event>::take(pool);
    ASSERT_EQ(event->value, 0) << "taken while still held, or not cleared";
    event->value = 1;
    seen.insert(event);
    std::atomic<Event*>& slot = slots[i % 2];
    Event* expected = nullptr;
    while (!slot.compare_exchange_weak(expected, event, std::memory_order_acq_rel)) {
      expected = nullptr;
      std::this_thread::yield();
    }
  }
  done.store(true, std::memory_order_release);
  for (std::thread& writer : writers) {
    writer.join();
  }
  // At most a handful in flight at once (two slots, the lists between
  // release and take): far fewer distinct events than launches.
  EXPECT_LT(seen.size(), 64u);
}

}  // namespace
}  // namespace kcap
