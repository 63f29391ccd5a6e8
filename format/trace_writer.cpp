#include "trace_writer.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <ctime>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <unordered_set>
#include <vector>

#include <capnp/serialize.h>
#include <zstd.h>

#include "adaptive_mutex.h"
#include "chunk_jobs.h"
#include "container.h"
#include "errors.h"
#include "piece_memory.h"
#include "version.h"
#include "worker_pool.h"

namespace kcap::format {
namespace {

// Why a write failed, in the words a user acts on: running out of room
// says so and names the error, so that it is not taken for damage.
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

class TraceWriterImpl final : public TraceWriter {
 public:
  TraceWriterImpl(std::string path, int fd, const Options& options)
      : path_(std::move(path)), fd_(fd), options_(options) {
    unsigned threads = options.compressionThreads;
    if (threads == 0) {
      // Compressing data the trace has not seen runs at 0.4-4 GB/s a thread
      // (docs/benchmarks.md), below the file's write rate: up to half the
      // machine, at most 8. They sleep when there is nothing to compress.
      unsigned hw = std::max(2u, std::thread::hardware_concurrency());
      threads = std::min(8u, hw / 2);
    }
    // Named, so that top, gdb and py-spy tell kcap's threads from the program's.
    for (unsigned i = 0; i < threads; ++i) {
      workers_.emplace_back([this] { compressLoop(); });
      pthread_setname_np(workers_.back().native_handle(), "kcap-zstd");
    }
    writerThread_ = std::thread([this] { writeLoop(); });
    pthread_setname_np(writerThread_.native_handle(), "kcap-write");
  }

  ~TraceWriterImpl() override {
    try {
      close();
    } catch (const FormatError&) {
      // Destructors must not throw; close() already recorded the problem.
    }
  }

  void storeContent(const void* data, size_t size, schema::Content::Builder out) override {
    store(data, size, nullptr, out);
  }

  void storeHashedContent(const void* data, size_t size, const Hash128* hashes, schema::Content::Builder out) override {
    store(data, size, hashes, out);
  }

  std::vector<PieceBlock> takeDirectBlocks(size_t count) override {
    std::vector<PieceBlock> blocks;
    if (directMemory_ == nullptr || directRefused_.load(std::memory_order_relaxed)) return blocks;
    blocks.reserve(count);
    for (size_t i = 0; i < count; ++i) {
      PieceBlock block = directMemory_->take();
      if (!block) return {};  // those taken go back
      blocks.push_back(std::move(block));
    }
    return blocks;
  }

  void storeDirectPieces(const Hash128* hashes, std::vector<PieceBlock>& blocks) override {
    size_t bytes = 0;
    for (const PieceBlock& block : blocks) bytes += block.size();
    std::unique_lock lock(mutex_);
    throwIfFailed();
    throwIfClosed();
    stats_.contentBytes += bytes;
    stats_.directBytes += bytes;
    queueNewPieces(lock, hashes, blocks);
    blocks.clear();
  }

  std::vector<uint8_t> missingPieces(const std::vector<Hash128>& hashes) const override {
    std::vector<uint8_t> missing(hashes.size(), 0);
    std::lock_guard lock(mutex_);
    for (size_t i = 0; i < hashes.size(); ++i) missing[i] = storedPieces_.count(hashes[i]) == 0 ? 1 : 0;
    return missing;
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

  // The message is laid out in flat form straight into the batch, with no
  // intermediate array: this runs under the lock every producer takes.
  uint64_t append(capnp::MessageBuilder& message) override {
    auto root = message.getRoot<schema::Event>();
    auto segments = message.getSegmentsForOutput();
    const size_t bytes = capnp::computeSerializedSizeInWords(segments) * sizeof(capnp::word);

    std::unique_lock batchLock(batchMutex_);
    throwIfFailedOrClosed();
    uint64_t seq = nextSeq_++;
    root.setSeq(seq);  // in place: the segments above see it
    if (bytes > kMaxRecordChunkRaw) {
      throw FormatError(path_ + ": event " + std::to_string(seq) + " is " + std::to_string(bytes) +
                        " bytes, over the record chunk limit");
    }
    if (batchBytes() + bytes > kMaxRecordChunkRaw) cutBatch();
    if (batch_.eventCount == 0) batch_.firstSeq = seq;
    appendFlat(segments, batch_.raw);
    batch_.eventCount++;
    batchStats_.events++;
    batchStats_.recordRawBytes += bytes;
    if (batchBytes() >= options_.batchBytes) cutBatch();
    return seq;
  }

  uint64_t append(DeferredEventPtr event) override {
    const size_t hint = event->sizeHint();
    const unsigned count = event->eventCount();
    if (count == 0) throw FormatError(path_ + ": a deferred event standing for no event");
    std::unique_lock batchLock(batchMutex_);
    throwIfFailedOrClosed();
    const uint64_t seq = nextSeq_;
    nextSeq_ += count;
    event->sequenced(seq);
    // The hint is an estimate: leave room under the chunk limit for it to be off.
    if (batchBytes() + 2 * hint > kMaxRecordChunkRaw / 2) cutBatch();
    if (batch_.eventCount == 0) batch_.firstSeq = seq;
    batch_.deferred.push_back({batch_.raw.size(), seq, count, std::move(event)});
    // The next slot's line, for the next append: the vector's memory was
    // last used by a compression thread (a freed batch), and a store to it
    // would wait for the line to cross from that core.
    if (batch_.deferred.size() < batch_.deferred.capacity()) {
      __builtin_prefetch(batch_.deferred.data() + batch_.deferred.size(), 1, 3);
    }
    batch_.deferredHint += hint;
    batch_.eventCount += count;
    batchStats_.events += count;
    if (batchBytes() >= options_.batchBytes) cutBatch();
    return seq;
  }

  void flush() override {
    std::unique_lock batchLock(batchMutex_);
    {
      std::lock_guard lock(mutex_);
      throwIfFailed();
    }
    if (closed_) return;  // close() flushed everything
    cutBatch();
    std::unique_lock lock(mutex_);
    batchLock.unlock();  // producers go on while this waits
    uint64_t target = submittedJobs_;
    writtenCv_.wait(lock, [&] { return writtenJobs_ >= target || failed_; });
    throwIfFailed();
  }

  void close() override {
    {
      std::unique_lock batchLock(batchMutex_);
      {
        std::lock_guard lock(mutex_);
        if (closed_) {
          throwIfFailed();
          return;
        }
        closed_ = true;
      }
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

  Stats stats() const override {
    std::lock_guard batchLock(batchMutex_);
    std::lock_guard lock(mutex_);
    Stats all = stats_;
    all.events += batchStats_.events;
    all.recordRawBytes += batchStats_.recordRawBytes;
    return all;
  }
  const std::string& path() const override { return path_; }
  uint32_t pieceSize() const override { return options_.pieceSize; }

 private:
  // In two steps: the pieces are hashed, and the new ones copied, on the
  // hashing pool; then the new ones take their places in the file in piece
  // order, under the lock (so the file is the same whatever the threads do).
  // An event appended later, by any thread, that names a piece is written
  // after it.
  // `known`: the pieces' hashes, given by the producer (storeHashedContent),
  // or nullptr: hashed here.
  void store(const void* data, size_t size, const Hash128* known, schema::Content::Builder out) {
    const auto* bytes = static_cast<const uint8_t*>(data);
    const size_t count = size == 0 ? 0 : (size + pieceSize() - 1) / pieceSize();
    out.setSize(size);
    out.setPieceSize(pieceSize());
    auto pieces = out.initPieces(static_cast<unsigned>(count));
    auto pieceLength = [&](size_t i) { return std::min<size_t>(pieceSize(), size - i * pieceSize()); };

    // Hashing and copying run at a few GB/s a core: a snapshot of device
    // memory, copied at tens of GB/s, needs several cores to keep up.
    WorkerPool* pool = count > 1 ? hashingPool() : nullptr;
    auto forEachPiece = [&](size_t n, const std::function<void(size_t)>& fn) {
      if (pool != nullptr && n > 1) {
        pool->forEach(n, fn);
      } else {
        for (size_t i = 0; i < n; ++i) fn(i);
      }
    };
    // Each piece is hashed and, if the trace has not seen it, copied right
    // away by the same thread, while it is still in that core's cache.
    std::vector<Hash128> hashes(count);
    std::vector<PieceBlock> copies(count);
    std::atomic<uint64_t> reused{0};
    forEachPiece(count, [&](size_t i) {
      const uint8_t* piece = bytes + i * pieceSize();
      hashes[i] = known != nullptr ? known[i] : contentHash(piece, pieceLength(i));
      {
        std::lock_guard lock(mutex_);
        if (storedPieces_.count(hashes[i]) != 0) return;
      }
      copies[i] = pieceMemory_.take();
      copies[i].fill(piece, pieceLength(i));
      if (copies[i].reused()) reused.fetch_add(1, std::memory_order_relaxed);
    });
    for (size_t i = 0; i < count; ++i) {
      pieces[static_cast<unsigned>(i)].setHigh(hashes[i].high);
      pieces[static_cast<unsigned>(i)].setLow(hashes[i].low);
    }

    // Then queued in piece order, so that the file does not depend on the
    // threads. A copy made for a piece that turned out to be stored already
    // (twice in this content, or queued by another thread meanwhile) goes
    // back unused. The copies exist before they are counted as pending: a
    // producer holds at most one call's worth beyond the bound.
    std::unique_lock lock(mutex_);
    throwIfFailed();
    throwIfClosed();
    stats_.contentBytes += size;
    stats_.reusedBuffers += reused.load();
    queueNewPieces(lock, hashes.data(), copies);
  }

  // Caller holds the lock. Waits for room for the copies, then queues each
  // (an empty one: a piece the file holds, nothing to queue).
  void queueNewPieces(std::unique_lock<std::mutex>& lock, const Hash128* hashes, std::vector<PieceBlock>& copies) {
    size_t bytes = 0;
    for (const PieceBlock& copy : copies) bytes += copy.size();
    if (bytes > 0) waitForSpace(lock, bytes);
    for (size_t i = 0; i < copies.size(); ++i) {
      if (copies[i]) queueNewPiece(hashes[i], copies[i]);
    }
  }

  // Caller holds batchMutex_.
  size_t batchBytes() const { return batch_.raw.size() + batch_.deferredHint; }

  // Caller holds the lock. Queues a copied piece for compression, or gives
  // the copy back when the file holds the piece already.
  void queueNewPiece(const Hash128& hash, PieceBlock& copy) {
    if (!storedPieces_.insert(hash).second) {
      copy.release();
      return;
    }
    stats_.uniqueBytes += copy.size();
    auto job = std::make_unique<Job>();
    job->kind = ChunkKind::kBlob;
    job->hash = hash;
    job->piece = std::move(copy);
    const size_t cost = job->piece.size();
    enqueue(std::move(job), cost);
  }

  std::unique_ptr<PieceMemory> makeDirectMemory() {
    if (options_.pageLocker == nullptr || options_.maxDirectBytes == 0) return nullptr;
    SlabHooks hooks;
    hooks.prepare = [this](uint8_t* slab, size_t bytes) { return prepareDirectSlab(slab, bytes); };
    hooks.retire = [locker = options_.pageLocker](uint8_t* slab, size_t bytes) { locker->unlock(slab, bytes); };
    return std::make_unique<PieceMemory>(options_.pieceSize, options_.maxDirectBytes, std::move(hooks));
  }

  // Touches a new slab of direct memory, a huge page per iteration on the
  // hashing threads, then page-locks it on the caller's: on the H200 host
  // page-locking fresh memory ran at 5.6-7.7 GB/s whatever the threads (the
  // kernel faults the pages in, in series), touching it first on 8 threads
  // at 47 and page-locking touched memory at 60 (docs/benchmarks.md,
  // 2026-12-01).
  bool prepareDirectSlab(uint8_t* slab, size_t bytes) {
    const auto start = std::chrono::steady_clock::now();
    constexpr size_t kUnit = size_t{2} << 20;
    const size_t units = (bytes + kUnit - 1) / kUnit;
    auto touch = [&](size_t u) {
      const size_t end = std::min(bytes, (u + 1) * kUnit);
      for (size_t at = u * kUnit; at < end; at += 4096) slab[at] = 0;
    };
    if (WorkerPool* pool = hashingPool()) {
      pool->forEach(units, touch);
    } else {
      for (size_t u = 0; u < units; ++u) touch(u);
    }
    const bool locked = options_.pageLocker->lock(slab, bytes);
    // Refused once, refused for good (a limit on locked memory, most
    // likely): no slab is touched in vain before each segment.
    if (!locked) directRefused_.store(true, std::memory_order_relaxed);
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start);
    std::lock_guard lock(mutex_);
    stats_.pageLockNs += static_cast<uint64_t>(ns.count());
    if (locked) stats_.pageLockedBytes += bytes;
    return locked;
  }

  WorkerPool* hashingPool() {
    std::call_once(hashingPoolMade_, [&] {
      unsigned threads = options_.hashingThreads;
      if (threads == 0) threads = std::min(8u, std::max(2u, std::thread::hardware_concurrency()) - 1);
      hashingPool_ = std::make_unique<WorkerPool>(threads, "kcap-hash");
    });
    return hashingPool_->threads() > 0 ? hashingPool_.get() : nullptr;
  }

  void submit(std::unique_lock<std::mutex>& lock, std::unique_ptr<Job> job) {
    const size_t cost = job->done ? job->encoded.size() : job->raw.size() + job->deferredHint;
    waitForSpace(lock, cost);
    enqueue(std::move(job), cost);
  }

  // Caller holds the lock. Blocks while too many bytes wait to be written.
  void waitForSpace(std::unique_lock<std::mutex>& lock, size_t cost) {
    auto room = [&] { return pendingBytes_ == 0 || pendingBytes_ + cost <= options_.maxPendingBytes || failed_; };
    if (!room()) {
      const auto start = std::chrono::steady_clock::now();
      spaceCv_.wait(lock, room);
      stats_.producerWaitNs += static_cast<uint64_t>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count());
    }
    throwIfFailed();
  }

  // Caller holds the lock. A job not yet encoded goes to the compression
  // threads, an encoded one straight to the writer thread.
  void enqueue(std::unique_ptr<Job> job, size_t cost) {
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

  // Caller holds batchMutex_ (not mutex_): batches are queued in the order
  // of their sequence numbers, so that the file's events are in order.
  void cutBatch() {
    if (batch_.eventCount == 0) return;
    auto job = std::make_unique<Job>(std::move(batch_));
    batch_ = Job{};
    batch_.raw.reserve(options_.batchBytes + (64u << 10));  // no regrowth while filling
    job->kind = ChunkKind::kRecords;
    std::unique_lock lock(mutex_);
    submit(lock, std::move(job));
  }

  void compressLoop() {
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
        spareEncoded_.giveBack(job->encoded);
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
        std::string why = n < 0 ? writeFailure(errno) : "no space written";
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

  // Caller holds mutex_.
  void throwIfFailed() const {
    if (failed_) throw FormatError(error_);
  }
  // Caller holds mutex_ or batchMutex_ (close() sets closed_ under both).
  void throwIfClosed() const {
    if (closed_) throw FormatError(path_ + ": the trace writer is closed");
  }
  // Caller holds batchMutex_ only: error_ is read under mutex_, and only
  // once failed_ says there is one.
  void throwIfFailedOrClosed() const {
    if (failed_.load(std::memory_order_acquire)) {
      std::lock_guard lock(mutex_);
      throwIfFailed();
    }
    throwIfClosed();
  }

  const std::string path_;
  const int fd_;
  const Options options_;
  // New pieces' raw bytes, from a producer's copy until compressed. Before
  // the queues: the jobs in them hold their blocks.
  PieceMemory pieceMemory_{options_.pieceSize};
  // The same for direct blocks (page-locked; none without a pageLocker).
  std::unique_ptr<PieceMemory> directMemory_ = makeDirectMemory();
  std::atomic<bool> directRefused_{false};  // the pageLocker refused once

  // Two locks, taken in this order when both are: batchMutex_ is the
  // producers' (the record chunk being filled and the sequence numbers:
  // every launch takes it twice), mutex_ the queue's, shared with the
  // compression and writer threads. A launching thread thus never waits for
  // one of those threads' critical sections, except once a chunk when it
  // queues the batch.
  mutable AdaptiveMutex batchMutex_;
  Job batch_;  // the record chunk being filled
  uint64_t nextSeq_ = 0;
  Stats batchStats_;     // its events and recordRawBytes (stats() adds them up)
  bool closed_ = false;  // set under both locks

  mutable std::mutex mutex_;
  std::condition_variable workCv_;          // compression threads: a job is unclaimed
  std::condition_variable doneCv_;          // writer thread: the head job is encoded
  std::condition_variable spaceCv_;         // producers: pending bytes went down
  std::condition_variable writtenCv_;       // flush(): jobs were written
  std::deque<std::unique_ptr<Job>> queue_;  // submitted, not yet written, in file order
  std::deque<size_t> jobCost_;              // raw bytes of each queued job
  std::deque<Job*> unclaimed_;              // submitted, not yet picked by a compression thread
  std::unordered_set<Hash128, Hash128Hasher> storedPieces_;
  uint64_t submittedJobs_ = 0;
  uint64_t writtenJobs_ = 0;
  size_t pendingBytes_ = 0;
  bool stopping_ = false;
  Stats stats_;

  // Owned by the writer thread while it runs.
  uint64_t fileOffset_ = kFileHeaderSize;  // create() wrote the header
  std::vector<ChunkEntry> chunkIndex_;
  std::vector<BlobEntry> blobIndex_;

  std::atomic<bool> failed_{false};  // set (with error_, under mutex_) when a write fails
  std::string error_;

  std::vector<std::unique_ptr<Compressor>> compressors_;  // the compression threads' (guarded by mutex_)
  // Encoded piece buffers for reuse, up to what may be pending (a burst the
  // size of the buffer). The compression threads fill one for every new
  // piece, which comes back only once it is written, at the file's pace:
  // with a few spares (24, until 2026-11-30) a burst faulted in almost all
  // of them, a page fault every 4 KiB on the compression threads
  // (docs/benchmarks.md, 2026-11-30).
  const size_t sparePieces_ = std::max<size_t>(options_.maxPendingBytes / std::max<uint32_t>(options_.pieceSize, 1), 1);
  SpareBuffers spareEncoded_{sparePieces_};

  std::once_flag hashingPoolMade_;
  std::unique_ptr<WorkerPool> hashingPool_;
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
