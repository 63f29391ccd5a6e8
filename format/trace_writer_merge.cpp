// The writer's side of the appends: the sequencer's merger (append_sequencer.h)
// hands it the producers' entries in seq order, which it puts into the
// record chunk being filled.
#include "cache_prefetch.h"
#include "trace_writer_impl.h"

namespace kcap::format {

void TraceWriterImpl::merge(AppendSequencer::Run& run) noexcept {
  std::unique_lock batchLock(batchMutex_);
  AppendSequencer::Entry entry;
  while (run.take(entry)) {
    try {
      mergeEntry(entry);
    } catch (const FormatError&) {
      // A write failed (failed_ is set): the events are dropped, the
      // producers learn it at their next append.
    } catch (const std::exception& e) {
      markFailed(e.what());
    }
  }
}

uint64_t TraceWriterImpl::append(DeferredEventPtr event) { return sequencer_.append(std::move(event)); }

uint64_t TraceWriterImpl::append(capnp::MessageBuilder& message) { return sequencer_.append(message, false); }

uint64_t TraceWriterImpl::appendNumbered(capnp::MessageBuilder& message) { return sequencer_.append(message, true); }

void TraceWriterImpl::throwRefused() const {
  if (failed_.load(std::memory_order_acquire)) {
    std::lock_guard lock(mutex_);
    throwIfFailed();
  }
  throw FormatError(path_ + ": the trace writer is closed");
}

void TraceWriterImpl::mergeEntry(AppendSequencer::Entry& entry) {
  const uint64_t first = entry.first;
  const uint64_t count = entry.count;
  if (entry.kind == AppendSequencer::EntryKind::kVoid) return;  // refused: closed or failed, nothing to write
  if (entry.kind == AppendSequencer::EntryKind::kEvent) {
    if (failed_.load(std::memory_order_relaxed)) return;
    DeferredEventPtr& event = entry.event;
    const size_t hint = event->sizeHint();
    // Seqs a refused append took are a gap: a chunk's events are numbered one by one.
    if (first != nextSeq_) cutBatch();
    // The hint is an estimate: leave room under the chunk limit for it to be off.
    if (batchBytes() + 2 * hint > kMaxRecordChunkRaw / 2) cutBatch();
    if (batch_.eventCount == 0) batch_.firstSeq = first;
    batch_.deferred.push_back({batch_.raw.size(), first, static_cast<unsigned>(count), std::move(event)});
    // The next slot's line, for the next event: the vector's memory was
    // last used by a compression thread (a freed batch).
    if (batch_.deferred.size() < batch_.deferred.capacity()) {
      prefetchLineForWrite(batch_.deferred.data() + batch_.deferred.size());
    }
    batch_.deferredHint += hint;
    batch_.eventCount += static_cast<uint32_t>(count);
    batchStats_.events += count;
    nextSeq_ = first + count;
  } else {
    if (failed_.load(std::memory_order_relaxed)) return;
    const std::vector<uint8_t>& flat = *entry.flat;
    const uint64_t seq = first + count - 1;
    // A record chunk's events are numbered from its firstSeq on, one by one.
    if (seq != nextSeq_) cutBatch();
    const size_t bytes = flat.size();
    if (batchBytes() + bytes > kMaxRecordChunkRaw) cutBatch();
    if (batch_.eventCount == 0) batch_.firstSeq = seq;
    batch_.raw.insert(batch_.raw.end(), flat.begin(), flat.end());
    batch_.eventCount++;
    batchStats_.events++;
    batchStats_.recordRawBytes += bytes;
    nextSeq_ = seq + 1;
  }
  if (batchBytes() >= options_.batchBytes) cutBatch();
}

void TraceWriterImpl::markFailed(const std::string& why) {
  std::lock_guard lock(mutex_);
  if (failed_) return;
  error_ = path_ + ": " + why;
  failed_ = true;
  sequencer_.refuseAll();
  spaceCv_.notify_all();
  writtenCv_.notify_all();
}

}  // namespace kcap::format
