#include "trace_writer.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <capnp/serialize.h>
#include <zstd.h>

#include "trace_writer_impl.h"
#include "version.h"

namespace kcap::format {

std::string writeFailure(int error) {
  switch (error) {
    case ENOSPC:
      return "disk full (ENOSPC)";
    case EDQUOT:
      return "disk quota exceeded (EDQUOT)";
    case EFBIG:
      return "file size limit exceeded (EFBIG)";
    default:
      return std::strerror(error);
  }
}

TraceWriterImpl::TraceWriterImpl(std::string path, int fd, const Options& options)
    : path_(std::move(path)), fd_(fd), options_(options) {
  unsigned threads = options.compressionThreads;
  if (threads == 0) {
    // One thread compresses new data slower than the file takes it
    // (docs/benchmarks.md has the rates): up to half the machine, at most 8.
    // They sleep when there is nothing to compress.
    unsigned hw = std::max(2u, std::thread::hardware_concurrency());
    threads = std::min(8u, hw / 2);
  }
  // Named, so that top, gdb and py-spy tell kcap's threads from the program's.
  for (unsigned i = 0; i < threads; ++i) {
    workers_.emplace_back([this] { compressLoop(); });
    prepareThread(workers_.back(), "kcap-zstd", options.threads);
  }
  writerThread_ = std::thread([this] { writeLoop(); });
  prepareThread(writerThread_, "kcap-write", options.threads);
  sequencer_.start("kcap-merge", options.threads);
}

TraceWriterImpl::~TraceWriterImpl() {
  try {
    close();
  } catch (const FormatError&) {
    // Destructors must not throw; close() already recorded the problem.
  }
  // The merger outlives close(): an append racing with close() takes its
  // seq numbers after close drained the ring, and the merger takes its
  // (void) entry.
  sequencer_.stop();
}

void TraceWriterImpl::flush() {
  {
    std::lock_guard lock(mutex_);
    throwIfFailed();
  }
  if (sequencer_.closed()) return;  // close() flushed everything
  sequencer_.settle();              // what was appended before is in the batch (or written)
  std::unique_lock batchLock(batchMutex_);
  cutBatch();
  std::unique_lock lock(mutex_);
  batchLock.unlock();  // the merger goes on while this waits
  uint64_t target = submittedJobs_;
  writtenCv_.wait(lock, [&] { return writtenJobs_ >= target || failed_; });
  throwIfFailed();
}

void TraceWriterImpl::close() {
  {
    std::lock_guard lock(mutex_);
    if (sequencer_.closed()) {
      throwIfFailed();
      return;
    }
    sequencer_.markClosed();  // one closer
  }
  // The file holds every seq below the cut and none from it on.
  sequencer_.drainToCut();
  {
    std::unique_lock batchLock(batchMutex_);
    // A failure already met makes cutBatch throw; the threads must be
    // stopped and joined all the same (a joinable std::thread destroyed
    // later would terminate the process), so it is reported at the end.
    try {
      cutBatch();
    } catch (const FormatError&) {}
    std::lock_guard lock(mutex_);
    stopping_ = true;
    workCv_.notify_all();
    doneCv_.notify_all();
  }
  for (auto& t : workers_) t.join();
  writerThread_.join();
  if (!failed_) writeIndexAndTrailer();
  if (::close(fd_) != 0 && !failed_) {
    error_ = path_ + ": close failed: " + std::strerror(errno);
    failed_ = true;
  }
  std::lock_guard lock(mutex_);
  throwIfFailed();
}

void TraceWriterImpl::waitSequenced() const { sequencer_.settle(); }

TraceWriter::Stats TraceWriterImpl::stats() const {
  sequencer_.settle();
  std::lock_guard batchLock(batchMutex_);
  std::lock_guard lock(mutex_);
  Stats all = stats_;
  all.events += batchStats_.events;
  all.recordRawBytes += batchStats_.recordRawBytes;
  all.producerWaitNs += sequencer_.producerWaitNs();
  return all;
}

void TraceWriterImpl::cutBatch() {
  if (batch_.eventCount == 0) return;
  auto job = std::make_unique<Job>(std::move(batch_));
  batch_ = Job{};
  batch_.raw.reserve(options_.batchBytes + (64u << 10));  // no regrowth while filling
  job->kind = ChunkKind::kRecords;
  std::unique_lock lock(mutex_);
  submit(lock, std::move(job));
}

std::unique_ptr<TraceWriter> TraceWriter::create(const std::string& path, const Options& options) {
  if (options.pieceSize < kMinPieceSize || options.pieceSize > kMaxPieceSize) {
    throw FormatError(path + ": piece size " + std::to_string(options.pieceSize) + " is outside [" +
                      std::to_string(kMinPieceSize) + ", " + std::to_string(kMaxPieceSize) + "]");
  }
  if (options.zstdLevel < ZSTD_minCLevel() || options.zstdLevel > ZSTD_maxCLevel()) {
    throw FormatError(path + ": zstd level " + std::to_string(options.zstdLevel) + " is outside [" +
                      std::to_string(ZSTD_minCLevel()) + ", " + std::to_string(ZSTD_maxCLevel()) + "]");
  }
  const int mode = options.exclusive ? O_EXCL : O_TRUNC;
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | mode | O_CLOEXEC, 0600);
  if (fd < 0 && options.exclusive && errno == EEXIST) throw PathExists(path + ": exists");
  if (fd < 0) throw FormatError(path + ": cannot create: " + std::strerror(errno));
  // Only this writer's descriptor holds the lock: a reader never takes it.
  if (options.exclusive) ::flock(fd, LOCK_EX | LOCK_NB);
  // O_CREAT's mode applies only to a new file; an existing one keeps its own.
  // Traces hold the program's memory: make them private either way.
  if (::fchmod(fd, 0600) != 0) {
    std::string why = std::strerror(errno);
    ::close(fd);
    throw FormatError(path + ": cannot make the trace private (chmod 0600): " + why);
  }
  // The header goes out before any thread starts, so it is always first.
  FileHeader header;
  std::string version = options.writerVersion.empty() ? std::string("kcap ") + kKcapVersion : options.writerVersion;
  std::strncpy(header.writerVersion, version.c_str(), kWriterVersionSize - 1);
  uint8_t bytes[kFileHeaderSize];
  encodeFileHeader(header, bytes);
  if (::write(fd, bytes, sizeof bytes) != static_cast<ssize_t>(sizeof bytes)) {
    std::string why = writeFailure(errno);
    // A file this call created holds nothing of anyone's: no trace is left
    // half-made under the name.
    if (options.exclusive) ::unlink(path.c_str());
    ::close(fd);
    throw FormatError(path + ": cannot write the header: " + why);
  }
  auto writer = std::make_unique<TraceWriterImpl>(path, fd, options);
  return writer;
}

}  // namespace kcap::format
