// RingTraceWriter's appends: deferred events queued for its builder thread,
// other events filed by their producer after everything queued before them.
#include <chrono>
#include <exception>
#include <system_error>
#include <utility>

#include "ring_trace_writer.h"
#include "worker_pool.h"

namespace kcap::format {
namespace {

// The builder wakes when this many events wait, or after kBuildPeriod: the
// hang watchdog learns of launches when they are filed (RingOptions::
// launched), so they must not wait long.
constexpr size_t kBuildBatch = 256;
constexpr auto kBuildPeriod = std::chrono::milliseconds(5);
// Past this many queued events (a builder that cannot keep up) the
// producer files them itself: memory stays bounded.
constexpr size_t kMaxQueued = size_t{1} << 16;

using BuiltEvents = std::vector<std::pair<uint64_t, std::unique_ptr<capnp::MallocMessageBuilder>>>;

}  // namespace

void RingTraceWriter::buildAll(const std::vector<PendingEvent>& batch, BuiltEvents& built) {
  for (const PendingEvent& pending : batch) {
    const unsigned count = pending.event->eventCount();
    for (unsigned part = 0; part < count; ++part) {
      const uint64_t seq = pending.seq + part;
      auto message = std::make_unique<capnp::MallocMessageBuilder>(256);
      auto event = message->initRoot<schema::Event>();
      event.setSeq(seq);
      try {
        pending.event->build(event, part);
      } catch (const std::exception& e) {
        // The seq is taken: it stays, saying why (as the file writer does).
        event = message->initRoot<schema::Event>();
        event.setSeq(seq);
        auto note = event.initMessage();
        note.setLevel(schema::Message::Level::ERROR);
        note.setText(std::string("an event could not be encoded: ") + e.what());
      }
      built.emplace_back(seq, std::move(message));
    }
  }
}

void RingTraceWriter::fileBuilt(BuiltEvents& built) {
  for (auto& [seq, message] : built) keep(*message, seq);
  built.clear();
}

void RingTraceWriter::fileQueued(std::unique_lock<std::mutex>& lock) {
  filedCv_.wait(lock, [&] { return !building_; });
  if (queued_.empty()) return;
  std::vector<PendingEvent> batch;
  batch.swap(queued_);
  BuiltEvents built;
  buildAll(batch, built);
  fileBuilt(built);
}

void RingTraceWriter::builderLoop() {
  std::unique_lock queue(queueMutex_);
  std::vector<PendingEvent> batch;
  BuiltEvents built;
  while (true) {
    queuedCv_.wait_for(queue, kBuildPeriod, [&] { return stopBuilding_ || queued_.size() >= kBuildBatch; });
    if (queued_.empty()) {
      if (stopBuilding_) return;
      continue;
    }
    batch.swap(queued_);
    {
      // Still under queueMutex_: whoever files next waits for this batch.
      std::lock_guard lock(mutex_);
      building_ = true;
    }
    queue.unlock();
    buildAll(batch, built);
    {
      std::lock_guard lock(mutex_);
      try {
        fileBuilt(built);
      } catch (const std::exception& e) {
        if (failure_.empty()) failure_ = e.what();
        refusing_.store(true, std::memory_order_relaxed);
        built.clear();
      }
      building_ = false;
    }
    filedCv_.notify_all();
    batch.clear();  // the events go back to their producers' pools off both locks
    queue.lock();
  }
}

void RingTraceWriter::stopBuilder(std::unique_lock<std::mutex>& queue) {
  stopBuilding_ = true;
  if (!builder_.joinable()) return;
  std::thread builder = std::move(builder_);  // a second close() finds none to join
  queuedCv_.notify_all();
  queue.unlock();
  builder.join();
  queue.lock();
}

void RingTraceWriter::throwRefused() const {
  std::lock_guard lock(mutex_);
  throwIfClosed();
  throw FormatError("the flight recorder's ring is closed");
}

uint64_t RingTraceWriter::append(capnp::MessageBuilder& message) {
  std::unique_lock queue(queueMutex_);
  std::unique_lock lock(mutex_);
  throwIfClosed();
  fileQueued(lock);
  const uint64_t seq = nextSeq_++;
  message.getRoot<schema::Event>().setSeq(seq);
  keep(message, seq);
  return seq;
}

uint64_t RingTraceWriter::appendNumbered(capnp::MessageBuilder& message) {
  std::unique_lock queue(queueMutex_);
  std::unique_lock lock(mutex_);
  throwIfClosed();
  const uint64_t seq = message.getRoot<schema::Event>().getSeq();
  if (seq < nextSeq_) {
    throw FormatError("event " + std::to_string(seq) + " appended after " + std::to_string(nextSeq_ - 1));
  }
  fileQueued(lock);
  nextSeq_ = seq + 1;
  keep(message, seq);
  return seq;
}

uint64_t RingTraceWriter::append(DeferredEventPtr event) {
  const unsigned count = event->eventCount();
  if (count == 0) throw FormatError("a deferred event standing for no event");
  // queueMutex_ only: the builder files its batches under mutex_, and a
  // launch waits for neither.
  std::unique_lock queue(queueMutex_);
  if (refusing_.load(std::memory_order_relaxed)) [[unlikely]] {
    throwRefused();
  }
  if (!builder_.joinable() && !stopBuilding_) [[unlikely]] {
    try {
      builder_ = std::thread([this] { builderLoop(); });
      prepareThread(builder_, "kcap-ring-build", options_.threads);
    } catch (const std::system_error&) {
      // No thread to be had: the producers file the events themselves.
    }
  }
  // A producer files what others queued before queueing its own event:
  // building may wait for what the producer does after this append (a
  // launch's outcome, after its call: DeferredEvent::build).
  if (!builder_.joinable() || queued_.size() >= kMaxQueued) [[unlikely]] {
    std::unique_lock lock(mutex_);
    fileQueued(lock);
  }
  const uint64_t first = nextSeq_;
  nextSeq_ += count;
  event->sequenced(first);
  queued_.push_back({first, std::move(event)});
  if (queued_.size() == kBuildBatch) {
    queuedCv_.notify_one();
  }
  return first;
}

}  // namespace kcap::format
