#include "producer_queues.h"

#include "trace_writer.h"  // DeferredEvent

namespace kcap::format {
namespace {

std::atomic<uint64_t> g_nextId{1};

// The calling thread's ring. The cache is read on every queued append:
// trivially destructible, so that reading it is one load; the owner, whose
// destructor gives the ring up at thread exit, is touched only when the
// thread takes a ring.
struct RingCache {
  uint64_t queuesId = 0;  // the ProducerQueues `ring` belongs to; 0: none
  ProducerQueues::Ring* ring = nullptr;
};
// initial-exec: one %fs-relative load, in the preloaded shim as in the
// tools (the default model for position-independent code calls
// __tls_get_addr).
__attribute__((tls_model("initial-exec"))) thread_local RingCache t_cache;

}  // namespace

// The thread's hold on its ring (one reference, Ring::references_).
struct ProducerQueues::Owner {
  Ring* ring = nullptr;
  bool gone = false;  // the thread is past its thread_local destructors

  void giveUp() noexcept {
    t_cache = {};
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

ProducerQueues::Ring* ProducerQueues::mine() noexcept {
  if (t_cache.queuesId == id_) return t_cache.ring;
  thread_local Owner owner;
  if (owner.gone) return nullptr;
  owner.giveUp();  // a ring of other queues (another writer): free for its other threads
  owner.ring = adoptOrMake();
  if (owner.ring != nullptr) t_cache = {id_, owner.ring};
  return owner.ring;
}

const ProducerQueues::Ring* ProducerQueues::mineIfAny() const noexcept {
  return t_cache.queuesId == id_ ? t_cache.ring : nullptr;
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
