// RingTraceWriter's appends: the sequencer's merger queues them in seq
// order, the builder thread builds and files them in batches.
#include <chrono>
#include <exception>
#include <utility>

#include "chunk_jobs.h"
#include "ring_trace_writer.h"

namespace kcap::format {
namespace {

// The builder wakes when this many events wait, or after kBuildPeriod: the
// hang watchdog learns of launches when they are filed (RingOptions::
// launched), so they must not wait long.
constexpr size_t kBuildBatch = 256;
constexpr auto kBuildPeriod = std::chrono::milliseconds(5);
// Past this many queued events (a builder that cannot keep up) the merger
// files them itself, and the producers wait for it: memory stays bounded.
constexpr size_t kMaxQueued = size_t{1} << 16;

}  // namespace

uint64_t RingTraceWriter::append(DeferredEventPtr event) { return sequencer_.append(std::move(event)); }

uint64_t RingTraceWriter::append(capnp::MessageBuilder& message) { return appendMessage(message, false); }

uint64_t RingTraceWriter::appendNumbered(capnp::MessageBuilder& message) { return appendMessage(message, true); }

uint64_t RingTraceWriter::appendMessage(capnp::MessageBuilder& message, bool numbered) {
  // Counted before the append, so that the builder never files more than
  // were counted (producerSegment).
  const bool checkpoint = message.getRoot<schema::Event>().isCheckpoint();
  if (checkpoint) checkpointsAppended_.fetch_add(1, std::memory_order_acq_rel);
  try {
    return sequencer_.append(message, numbered);
  } catch (...) {
    if (checkpoint) checkpointsAppended_.fetch_sub(1, std::memory_order_acq_rel);
    throw;
  }
}

void RingTraceWriter::failWith(const std::exception& e) {
  if (failure_.empty()) failure_ = e.what();
  sequencer_.refuseAll();
}

void RingTraceWriter::throwRefused() const {
  std::lock_guard lock(mutex_);
  throwIfClosed();
  throw FormatError("the flight recorder's ring is closed");
}

void RingTraceWriter::merge(AppendSequencer::Run& run) noexcept {
  std::unique_lock queue(queueMutex_);
  AppendSequencer::Entry entry;
  while (run.take(entry)) {
    // A refused append's seqs are a gap, as in the file writer.
    try {
      if (entry.kind == AppendSequencer::EntryKind::kEvent) {
        queued_.push_back({entry.first, std::move(entry.event), nullptr});
      } else if (entry.kind == AppendSequencer::EntryKind::kMessage) {
        queued_.push_back({entry.first + entry.count - 1, nullptr, std::move(entry.flat)});
      }
    } catch (const std::exception& e) {
      // No memory for the queue: the ring fails (appends throw), the
      // program goes on.
      std::lock_guard lock(mutex_);
      failWith(e);
    }
  }
  if (queued_.empty()) return;
  if (!builder_.joinable() || queued_.size() >= kMaxQueued) [[unlikely]] {
    std::unique_lock lock(mutex_);
    try {
      fileQueued(lock);
    } catch (const std::exception& e) {
      failWith(e);
    }
    return;
  }
  if (queued_.size() >= kBuildBatch) queuedCv_.notify_one();
}

void RingTraceWriter::buildAll(std::vector<PendingEvent>& batch, BuiltEvents& built) {
  for (PendingEvent& pending : batch) {
    if (pending.flat) {
      built.emplace_back(pending.seq, std::move(*pending.flat));
      continue;
    }
    const unsigned count = pending.event->eventCount();
    for (unsigned part = 0; part < count; ++part) {
      const uint64_t seq = pending.seq + part;
      capnp::MallocMessageBuilder message(256);
      auto event = message.initRoot<schema::Event>();
      event.setSeq(seq);
      try {
        pending.event->build(event, part);
      } catch (const std::exception& e) {
        // The seq is taken: it stays, saying why (as the file writer does).
        event = message.initRoot<schema::Event>();
        event.setSeq(seq);
        auto note = event.initMessage();
        note.setLevel(schema::Message::Level::ERROR);
        note.setText(std::string("an event could not be encoded: ") + e.what());
      }
      std::vector<uint8_t> flat;
      appendFlat(message.getSegmentsForOutput(), flat);
      built.emplace_back(seq, std::move(flat));
    }
  }
}

void RingTraceWriter::fileBuilt(BuiltEvents& built) {
  for (auto& [seq, flat] : built) keep(std::move(flat), seq);
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

void RingTraceWriter::settle() {
  sequencer_.settle();
  std::unique_lock queue(queueMutex_);
  std::unique_lock lock(mutex_);
  fileQueued(lock);
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
        failWith(e);
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

}  // namespace kcap::format
