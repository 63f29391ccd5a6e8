#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>

#include "trace_writer_impl.h"

namespace kcap::format {

void TraceWriterImpl::submit(std::unique_lock<std::mutex>& lock, std::unique_ptr<Job> job) {
  const size_t cost = job->done ? job->encoded.size() : job->raw.size() + job->deferredHint;
  waitForSpace(lock, cost);
  enqueue(std::move(job), cost);
}

void TraceWriterImpl::waitForSpace(std::unique_lock<std::mutex>& lock, size_t cost) {
  auto room = [&] { return pendingBytes_ == 0 || pendingBytes_ + cost <= options_.maxPendingBytes || failed_; };
  if (!room()) {
    const auto start = std::chrono::steady_clock::now();
    spaceCv_.wait(lock, room);
    stats_.producerWaitNs += static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count());
  }
  throwIfFailed();
}

void TraceWriterImpl::enqueue(std::unique_ptr<Job> job, size_t cost) {
  pendingBytes_ += cost;
  jobCost_.push_back(cost);
  const bool encoded = job->done;
  if (!encoded) unclaimed_.push_back(job.get());
  queue_.push_back(std::move(job));
  submittedJobs_++;
  if (encoded) {
    doneCv_.notify_all();
  } else {
    workCv_.notify_one();
  }
}

void TraceWriterImpl::compressLoop() {
  std::unique_lock lock(mutex_);
  // Owned by the writer, not by this thread's stack: in the child of a
  // fork, where this thread does not exist, an abandoned writer still owns
  // it (and leak checkers see it so).
  Compressor& compressor = *compressors_.emplace_back(std::make_unique<Compressor>());
  for (;;) {
    // The writer thread waits for every queued job.
    workCv_.wait(lock, [&] { return !unclaimed_.empty() || stopping_; });
    if (unclaimed_.empty()) break;
    Job* job = unclaimed_.front();
    unclaimed_.pop_front();
    lock.unlock();
    const bool blob = job->kind == ChunkKind::kBlob;
    if (blob && job->encoded.capacity() == 0) job->encoded = spareEncoded_.take();
    encodeJob(compressor, options_.zstdLevel, *job);
    // The memory bound counts raw bytes: they go back (or are released) early.
    job->piece.release();
    job->raw = {};
    lock.lock();
    stats_.recordRawBytes += job->deferredBytes;
    job->done = true;
    doneCv_.notify_all();
  }
  const auto it = std::find_if(compressors_.begin(), compressors_.end(),
                               [&](const auto& owned) { return owned.get() == &compressor; });
  const std::unique_ptr<Compressor> mine = std::move(*it);
  compressors_.erase(it);
  lock.unlock();  // freed after, outside the lock
}

void TraceWriterImpl::writeLoop() {
  std::unique_lock lock(mutex_);
  for (;;) {
    doneCv_.wait(lock, [&] { return (!queue_.empty() && queue_.front()->done) || (stopping_ && queue_.empty()); });
    if (queue_.empty()) break;
    std::unique_ptr<Job> job = std::move(queue_.front());
    queue_.pop_front();
    size_t cost = jobCost_.front();
    jobCost_.pop_front();
    lock.unlock();
    uint64_t offset = fileOffset_;
    writeAll(job->encoded.data(), job->encoded.size());
    lock.lock();
    uint64_t stored = job->encoded.size() - kChunkHeaderSize;
    if (job->kind == ChunkKind::kRecords) {
      chunkIndex_.push_back({offset, job->firstSeq, job->eventCount, stored, job->rawSize});
      stats_.storedRecordBytes += job->encoded.size() - kChunkHeaderSize;
    } else {
      blobIndex_.push_back({job->hash, offset, stored, job->rawSize});
      stats_.blobChunks++;
      stats_.storedBlobBytes += job->encoded.size() - kChunkHeaderSize;
      spareEncoded_.giveBack(job->encoded);
    }
    stats_.fileBytes = fileOffset_;
    pendingBytes_ -= cost;
    writtenJobs_++;
    spaceCv_.notify_all();
    writtenCv_.notify_all();
  }
}

void TraceWriterImpl::writeAll(const uint8_t* data, size_t size) {
  if (failed_) return;
  while (size > 0) {
    ssize_t n = ::write(fd_, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      std::string why = n < 0 ? writeFailure(errno) : "no space written";
      std::lock_guard lock(mutex_);
      error_ = describeAt(path_, fileOffset_, "write failed: " + why);
      failed_ = true;
      sequencer_.refuseAll();
      spaceCv_.notify_all();
      writtenCv_.notify_all();
      return;
    }
    data += n;
    size -= static_cast<size_t>(n);
    fileOffset_ += static_cast<uint64_t>(n);
  }
}

void TraceWriterImpl::writeIndexAndTrailer() {
  Job job = indexJob(nextSeq_, chunkIndex_, blobIndex_);
  Compressor compressor;
  encodeJob(compressor, options_.zstdLevel, job);
  Trailer trailer;
  trailer.indexOffset = fileOffset_;
  writeAll(job.encoded.data(), job.encoded.size());
  uint8_t bytes[kTrailerSize];
  encodeTrailer(trailer, bytes);
  writeAll(bytes, sizeof bytes);
  std::lock_guard lock(mutex_);
  stats_.fileBytes = fileOffset_;
}

}  // namespace kcap::format
