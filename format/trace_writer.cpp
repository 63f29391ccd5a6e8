#include "trace_writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_set>
#include <vector>

#include <capnp/serialize.h>
#include <zstd.h>

#include "container.h"
#include "errors.h"
#include "version.h"

namespace kcap::format {
namespace {

// One chunk on its way to the file: queued by a producer, encoded (compressed,
// checksummed) by a compression thread, written by the writer thread.
struct Job {
  ChunkKind kind = ChunkKind::kRecords;
  std::vector<uint8_t> raw;
  Hash128 hash;             // blob chunks
  uint64_t firstSeq = 0;    // record chunks
  uint32_t eventCount = 0;  // record chunks
  std::vector<uint8_t> encoded;
  uint64_t rawSize = 0;     // size of `raw` before it was released
  bool done = false;
};

// Compresses `raw` into out[at...], falling back to storing it when zstd does
// not make it smaller (already-compressed or random memory).
Codec compressInto(ZSTD_CCtx* cctx, int level, const std::vector<uint8_t>& raw, std::vector<uint8_t>& out,
                   size_t at) {
  size_t bound = ZSTD_compressBound(raw.size());
  out.resize(at + bound);
  size_t n = ZSTD_compressCCtx(cctx, out.data() + at, bound, raw.data(), raw.size(), level);
  if (ZSTD_isError(n) || n >= raw.size()) {
    out.resize(at + raw.size());
    if (!raw.empty()) std::memcpy(out.data() + at, raw.data(), raw.size());
    return Codec::kNone;
  }
  out.resize(at + n);
  return Codec::kZstd;
}

void encodeJob(ZSTD_CCtx* cctx, int level, Job& job) {
  size_t prefix = job.kind == ChunkKind::kBlob ? kBlobHashSize : 0;
  ChunkHeader header;
  header.kind = job.kind;
  header.codec = compressInto(cctx, level, job.raw, job.encoded, kChunkHeaderSize + prefix);
  if (prefix) {
    std::memcpy(job.encoded.data() + kChunkHeaderSize, &job.hash.high, 8);
    std::memcpy(job.encoded.data() + kChunkHeaderSize + 8, &job.hash.low, 8);
  }
  header.storedSize = job.encoded.size() - kChunkHeaderSize;
  header.rawSize = job.raw.size();
  encodeChunkHeader(header, job.encoded.data());
  header.checksum = chunkChecksum(job.encoded.data(), job.encoded.data() + kChunkHeaderSize, header.storedSize);
  encodeChunkHeader(header, job.encoded.data());
  job.rawSize = job.raw.size();
  job.raw = {};  // the memory bound counts raw bytes; release them early
}

class TraceWriterImpl final : public TraceWriter {
 public:
  TraceWriterImpl(std::string path, int fd, const Options& options)
      : path_(std::move(path)), fd_(fd), options_(options) {
    unsigned threads = options.compressionThreads;
    if (threads == 0) {
      unsigned hw = std::max(2u, std::thread::hardware_concurrency());
      threads = std::min(4u, hw - 1);
    }
    for (unsigned i = 0; i < threads; ++i) workers_.emplace_back([this] { compressLoop(); });
    writerThread_ = std::thread([this] { writeLoop(); });
  }

  ~TraceWriterImpl() override {
    try {
      close();
    } catch (const FormatError&) {
      // Destructors must not throw; close() already recorded the problem.
    }
  }

  void storeContent(const void* data, size_t size, schema::Content::Builder out) override {
    const auto* bytes = static_cast<const uint8_t*>(data);
    size_t count = size == 0 ? 0 : (size + pieceSize() - 1) / pieceSize();
    out.setSize(size);
    out.setPieceSize(pieceSize());
    auto pieces = out.initPieces(static_cast<unsigned>(count));
    for (size_t i = 0; i < count; ++i) {
      size_t offset = i * pieceSize();
      size_t length = std::min<size_t>(pieceSize(), size - offset);
      Hash128 hash = contentHash(bytes + offset, length);
      pieces[static_cast<unsigned>(i)].setHigh(hash.high);
      pieces[static_cast<unsigned>(i)].setLow(hash.low);

      std::unique_lock lock(mutex_);
      throwIfFailed();
      throwIfClosed();
      stats_.contentBytes += length;
      if (!storedPieces_.insert(hash).second) continue;
      stats_.uniqueBytes += length;
      auto job = std::make_unique<Job>();
      job->kind = ChunkKind::kBlob;
      job->hash = hash;
      job->raw.assign(bytes + offset, bytes + offset + length);
      submit(lock, std::move(job));
    }
  }

  void storeEncodedPiece(const Hash128& hash, uint64_t rawSize, std::vector<uint8_t> chunk) override {
    if (chunk.size() < kChunkHeaderSize + kBlobHashSize) {
      throw FormatError(path_ + ": an encoded piece of " + std::to_string(chunk.size()) + " bytes is no blob chunk");
    }
    std::unique_lock lock(mutex_);
    throwIfFailed();
    throwIfClosed();
    stats_.contentBytes += rawSize;
    if (!storedPieces_.insert(hash).second) return;
    stats_.uniqueBytes += rawSize;
    auto job = std::make_unique<Job>();
    job->kind = ChunkKind::kBlob;
    job->hash = hash;
    job->encoded = std::move(chunk);
    job->rawSize = rawSize;
    job->done = true;  // nothing to compress: straight to the writer thread
    submit(lock, std::move(job));
  }

  uint64_t append(capnp::MessageBuilder& message) override {
    std::unique_lock lock(mutex_);
    throwIfFailed();
    throwIfClosed();
    uint64_t seq = nextSeq_++;
    message.getRoot<schema::Event>().setSeq(seq);
    kj::Array<capnp::word> words = capnp::messageToFlatArray(message);
    auto bytes = words.asBytes();
    if (bytes.size() > kMaxRecordChunkRaw) {
      throw FormatError(path_ + ": event " + std::to_string(seq) + " is " + std::to_string(bytes.size()) +
                        " bytes, over the record chunk limit");
    }
    if (batch_.raw.size() + bytes.size() > kMaxRecordChunkRaw) cutBatch(lock);
    if (batch_.eventCount == 0) batch_.firstSeq = seq;
    batch_.raw.insert(batch_.raw.end(), bytes.begin(), bytes.end());
    batch_.eventCount++;
    stats_.events++;
    stats_.recordRawBytes += bytes.size();
    if (batch_.raw.size() >= options_.batchBytes) cutBatch(lock);
    return seq;
  }

  void flush() override {
    std::unique_lock lock(mutex_);
    throwIfFailed();
    if (closed_) return;  // close() flushed everything
    cutBatch(lock);
    uint64_t target = submittedJobs_;
    writtenCv_.wait(lock, [&] { return writtenJobs_ >= target || failed_; });
    throwIfFailed();
  }

  void close() override {
    {
      std::unique_lock lock(mutex_);
      if (closed_) {
        throwIfFailed();
        return;
      }
      closed_ = true;
      // A failure already met makes cutBatch throw; the threads must be
      // stopped and joined all the same (a joinable std::thread destroyed
      // later would terminate the process), so it is reported at the end.
      try {
        cutBatch(lock);
      } catch (const FormatError&) {
      }
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

  Stats stats() const override {
    std::lock_guard lock(mutex_);
    return stats_;
  }
  const std::string& path() const override { return path_; }
  uint32_t pieceSize() const override { return options_.pieceSize; }

 private:
  // Caller holds the lock. Blocks while too many bytes wait to be written.
  void submit(std::unique_lock<std::mutex>& lock, std::unique_ptr<Job> job) {
    size_t cost = job->done ? job->encoded.size() : job->raw.size();
    spaceCv_.wait(lock, [&] {
      return pendingBytes_ == 0 || pendingBytes_ + cost <= options_.maxPendingBytes || failed_;
    });
    throwIfFailed();
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

  void cutBatch(std::unique_lock<std::mutex>& lock) {
    if (batch_.eventCount == 0) return;
    auto job = std::make_unique<Job>(std::move(batch_));
    batch_ = Job{};
    job->kind = ChunkKind::kRecords;
    submit(lock, std::move(job));
  }

  void compressLoop() {
    ZSTD_CCtx* cctx = ZSTD_createCCtx();
    std::unique_lock lock(mutex_);
    // Kept reachable from the writer, not only from this thread's stack: in
    // the child of a fork, where this thread does not exist, an abandoned
    // writer still owns it (and leak checkers see it so).
    contexts_.push_back(cctx);
    for (;;) {
      workCv_.wait(lock, [&] { return !unclaimed_.empty() || stopping_; });
      if (unclaimed_.empty()) break;
      Job* job = unclaimed_.front();
      unclaimed_.pop_front();
      lock.unlock();
      encodeJob(cctx, options_.zstdLevel, *job);
      lock.lock();
      job->done = true;
      doneCv_.notify_all();
    }
    std::erase(contexts_, cctx);
    lock.unlock();
    ZSTD_freeCCtx(cctx);
  }

  void writeLoop() {
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
      }
      stats_.fileBytes = fileOffset_;
      pendingBytes_ -= cost;
      writtenJobs_++;
      spaceCv_.notify_all();
      writtenCv_.notify_all();
    }
  }

  // Called by the writer thread (and by create()/close() when it is not running).
  void writeAll(const uint8_t* data, size_t size) {
    if (failed_) return;
    while (size > 0) {
      ssize_t n = ::write(fd_, data, size);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        std::string why = n < 0 ? std::strerror(errno) : "no space written";
        std::lock_guard lock(mutex_);
        error_ = describeAt(path_, fileOffset_, "write failed: " + why);
        failed_ = true;
        spaceCv_.notify_all();
        writtenCv_.notify_all();
        return;
      }
      data += n;
      size -= static_cast<size_t>(n);
      fileOffset_ += static_cast<uint64_t>(n);
    }
  }

  void writeIndexAndTrailer() {
    capnp::MallocMessageBuilder message;
    auto index = message.initRoot<schema::TraceIndex>();
    index.setEventCount(nextSeq_);
    auto chunks = index.initChunks(static_cast<unsigned>(chunkIndex_.size()));
    for (unsigned i = 0; i < chunkIndex_.size(); ++i) {
      chunks[i].setOffset(chunkIndex_[i].offset);
      chunks[i].setFirstSeq(chunkIndex_[i].firstSeq);
      chunks[i].setEventCount(chunkIndex_[i].eventCount);
      chunks[i].setStoredSize(chunkIndex_[i].storedSize);
      chunks[i].setRawSize(chunkIndex_[i].rawSize);
    }
    auto blobs = index.initBlobs(static_cast<unsigned>(blobIndex_.size()));
    for (unsigned i = 0; i < blobIndex_.size(); ++i) {
      blobs[i].initHash().setHigh(blobIndex_[i].hash.high);
      blobs[i].getHash().setLow(blobIndex_[i].hash.low);
      blobs[i].setOffset(blobIndex_[i].offset);
      blobs[i].setStoredSize(blobIndex_[i].storedSize);
      blobs[i].setRawSize(blobIndex_[i].rawSize);
    }
    Job job;
    job.kind = ChunkKind::kIndex;
    auto words = capnp::messageToFlatArray(message);
    job.raw.assign(words.asBytes().begin(), words.asBytes().end());
    ZSTD_CCtx* cctx = ZSTD_createCCtx();
    encodeJob(cctx, options_.zstdLevel, job);
    ZSTD_freeCCtx(cctx);
    Trailer trailer;
    trailer.indexOffset = fileOffset_;
    writeAll(job.encoded.data(), job.encoded.size());
    uint8_t bytes[kTrailerSize];
    encodeTrailer(trailer, bytes);
    writeAll(bytes, sizeof bytes);
    std::lock_guard lock(mutex_);
    stats_.fileBytes = fileOffset_;
  }

  // Caller holds mutex_.
  void throwIfFailed() const {
    if (failed_) throw FormatError(error_);
  }
  void throwIfClosed() const {
    if (closed_) throw FormatError(path_ + ": the trace writer is closed");
  }

  struct ChunkEntry {
    uint64_t offset;
    uint64_t firstSeq;
    uint32_t eventCount;
    uint64_t storedSize;
    uint64_t rawSize;
  };
  struct BlobEntry {
    Hash128 hash;
    uint64_t offset;
    uint64_t storedSize;
    uint64_t rawSize;
  };

  const std::string path_;
  const int fd_;
  const Options options_;

  mutable std::mutex mutex_;
  std::condition_variable workCv_;     // compression threads: a job is unclaimed
  std::condition_variable doneCv_;     // writer thread: the head job is encoded
  std::condition_variable spaceCv_;    // producers: pending bytes went down
  std::condition_variable writtenCv_;  // flush(): jobs were written
  std::deque<std::unique_ptr<Job>> queue_;  // submitted, not yet written, in file order
  std::deque<size_t> jobCost_;              // raw bytes of each queued job
  std::deque<Job*> unclaimed_;              // submitted, not yet picked by a compression thread
  Job batch_;                               // the record chunk being filled
  std::unordered_set<Hash128, Hash128Hasher> storedPieces_;
  uint64_t nextSeq_ = 0;
  uint64_t submittedJobs_ = 0;
  uint64_t writtenJobs_ = 0;
  size_t pendingBytes_ = 0;
  bool stopping_ = false;
  bool closed_ = false;
  Stats stats_;

  // Owned by the writer thread while it runs.
  uint64_t fileOffset_ = kFileHeaderSize;  // create() wrote the header
  std::vector<ChunkEntry> chunkIndex_;
  std::vector<BlobEntry> blobIndex_;

  std::atomic<bool> failed_{false};  // set (with error_, under mutex_) when a write fails
  std::string error_;

  std::vector<ZSTD_CCtx*> contexts_;  // the compression threads' (guarded by mutex_)
  std::vector<std::thread> workers_;
  std::thread writerThread_;
};

}  // namespace

std::unique_ptr<TraceWriter> TraceWriter::create(const std::string& path, const Options& options) {
  if (options.pieceSize < kMinPieceSize || options.pieceSize > kMaxPieceSize) {
    throw FormatError(path + ": piece size " + std::to_string(options.pieceSize) + " is outside [" +
                      std::to_string(kMinPieceSize) + ", " + std::to_string(kMaxPieceSize) + "]");
  }
  if (options.zstdLevel < ZSTD_minCLevel() || options.zstdLevel > ZSTD_maxCLevel()) {
    throw FormatError(path + ": zstd level " + std::to_string(options.zstdLevel) + " is outside [" +
                      std::to_string(ZSTD_minCLevel()) + ", " + std::to_string(ZSTD_maxCLevel()) + "]");
  }
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) throw FormatError(path + ": cannot create: " + std::strerror(errno));
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
    std::string why = std::strerror(errno);
    ::close(fd);
    throw FormatError(path + ": cannot write the header: " + why);
  }
  auto writer = std::make_unique<TraceWriterImpl>(path, fd, options);
  return writer;
}

}  // namespace kcap::format
