#include "producer_queues.h"

#include "trace_writer.h"  // DeferredEvent

namespace kcap::format {
namespace {

std::atomic<uint64_t> g_nextId{1};

}  // namespace

// The thread's hold on its ring (one reference, Ring::references_).
struct ProducerQueues::Owner {
  Ring* ring = nullptr;
  bool gone = false;  // the thread is past its thread_local destructors

  void giveUp() noexcept {
    cache_ = RingCache{0, nullptr};
    if (ring != nullptr) {
      ring->orphaned_.store(true, std::memory_order_release);  // its pushes happen before an adopter's
      unreference(ring);
      ring = nullptr;
    }
  }
  ~Owner() {
    gone = true;
    giveUp();
  }
};

ProducerQueues::ProducerQueues() : id_(g_nextId.fetch_add(1, std::memory_order_relaxed)) {}

ProducerQueues::~ProducerQueues() {
  discardAll([](DeferredEvent* event) { event->release(); });
  Ring* ring = rings_.load(std::memory_order_acquire);
  while (ring != nullptr) {
    Ring* const next = ring->next_;
    unreference(ring);
    ring = next;
  }
}

void ProducerQueues::unreference(Ring* ring) noexcept {
  if (ring->references_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete ring;
}

ProducerQueues::Ring* ProducerQueues::mineFirst() noexcept {
  thread_local Owner owner;
  if (owner.gone) return nullptr;
  owner.giveUp();  // a ring of other queues (another writer): free for its other threads
  owner.ring = adoptOrMake();
  if (owner.ring != nullptr) cache_ = RingCache{id_, owner.ring};
  return owner.ring;
}

const ProducerQueues::Ring* ProducerQueues::mineIfAny() const noexcept {
  return cache_.queuesId == id_ ? cache_.ring : nullptr;
}

ProducerQueues::Ring* ProducerQueues::adoptOrMake() noexcept {
  for (Ring* ring = rings_.load(std::memory_order_acquire); ring != nullptr; ring = ring->next_) {
    bool orphaned = true;
    if (ring->orphaned_.compare_exchange_strong(orphaned, false, std::memory_order_acq_rel)) {
      ring->references_.fetch_add(1, std::memory_order_relaxed);
      return ring;
    }
  }
  auto* made = new (std::nothrow) Ring;
  if (made == nullptr) return nullptr;
  made->references_.store(2, std::memory_order_relaxed);  // the list's and the thread's
  made->next_ = rings_.load(std::memory_order_relaxed);
  while (!rings_.compare_exchange_weak(made->next_, made, std::memory_order_release, std::memory_order_relaxed)) {
  }
  return made;
}

bool ProducerQueues::anyQueued() const noexcept {
  for (const Ring* ring = rings_.load(std::memory_order_acquire); ring != nullptr; ring = ring->next_) {
    if (ring->head_.load(std::memory_order_relaxed) != ring->tail_.load(std::memory_order_relaxed)) return true;
  }
  return false;
}

void ProducerQueues::collect(const Ring* own, uint64_t cut, bool takeAll) {
  cursors_.clear();
  for (Ring* ring = rings_.load(std::memory_order_acquire); ring != nullptr; ring = ring->next_) {
    const uint64_t tail = ring->tail_.load(std::memory_order_relaxed);  // the drainer's own
    const uint64_t head = ring->head_.load(std::memory_order_acquire);  // and the entries before it
    uint64_t end = head;
    if (!takeAll && ring != own) {
      while (end != tail && at(*ring, end - 1).stamp >= cut) --end;  // a ring's stamps ascend
    }
    if (end != tail) cursors_.push_back({ring, tail, end});
  }
}

}  // namespace kcap::format
