// TraceWriterImpl, the TraceWriter that create() returns; internal to the
// writer, its definitions in three files along its seams:
//
//   trace_writer.cpp          flush, close, create(), cutting record chunks
//   trace_writer_merge.cpp    the appends' merger (append_sequencer.h): events into record chunks
//   trace_writer_store.cpp    the content-addressed store: hashing, copying, queueing new pieces
//   trace_writer_threads.cpp  the compression threads, the writer thread, the index at the end
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "adaptive_mutex.h"
#include "append_sequencer.h"
#include "chunk_jobs.h"
#include "errors.h"
#include "hash.h"
#include "piece_memory.h"
#include "trace_writer.h"
#include "worker_pool.h"

namespace kcap::format {

// Why a write failed, in the words a user acts on: running out of room
// says so and names the error, so that it is not taken for damage.
std::string writeFailure(int error);

class TraceWriterImpl final : public TraceWriter, private AppendSequencer::Consumer {
 public:
  TraceWriterImpl(std::string path, int fd, const Options& options);
  ~TraceWriterImpl() override;

  void storeContent(const void* data, size_t size, schema::Content::Builder out) override;
  void storeHashedContent(const void* data, size_t size, const Hash128* hashes, schema::Content::Builder out) override;
  std::vector<PieceBlock> takeDirectBlocks(size_t count) override;
  void storeDirectPieces(const Hash128* hashes, std::vector<PieceBlock>& blocks) override;
  std::vector<uint8_t> missingPieces(const std::vector<Hash128>& hashes) const override;
  void storeEncodedPiece(const Hash128& hash, uint64_t rawSize, std::vector<uint8_t> chunk) override;

  uint64_t append(capnp::MessageBuilder& message) override;
  uint64_t append(DeferredEventPtr event) override;
  uint64_t appendNumbered(capnp::MessageBuilder& message) override;
  void flush() override;
  void close() override;
  void waitSequenced() const override;
  Stats stats() const override;
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
  void store(const void* data, size_t size, const Hash128* known, schema::Content::Builder out);

  // Caller holds the lock. Waits for room for the copies, then queues each
  // (an empty one: a piece the file holds, nothing to queue).
  void queueNewPieces(std::unique_lock<std::mutex>& lock, const Hash128* hashes, std::vector<PieceBlock>& copies);

  // ---- the merger's side of the appends (trace_writer_merge.cpp) ----
  // Before a producer queues new pieces: the events appended so far are
  // merged (a full record chunk among them queued), so that chunks reach
  // the file in the order one thread's calls made them, whatever the
  // merger's timing (a trace written by one thread is the same every time).
  void settleAppends() const noexcept { sequencer_.settle(); }
  void merge(AppendSequencer::Run& run) noexcept override;
  [[noreturn]] void throwRefused() const override;
  // Caller holds batchMutex_ (the merger): one entry into the batch.
  void mergeEntry(AppendSequencer::Entry& entry);
  void markFailed(const std::string& why);

  // Caller holds batchMutex_.
  size_t batchBytes() const { return batch_.raw.size() + batch_.deferredHint; }

  // Caller holds the lock. Queues a copied piece for compression, or gives
  // the copy back when the file holds the piece already.
  void queueNewPiece(const Hash128& hash, PieceBlock& copy);

  std::unique_ptr<PieceMemory> makeDirectMemory();

  // Touches a new slab of direct memory, a huge page per iteration on the
  // hashing threads, then page-locks it on the caller's: page-locking fresh
  // memory does not scale with threads (the kernel faults the pages in, in
  // series), while touching it first on several threads and then
  // page-locking touched memory is several times faster (docs/benchmarks.md,
  // page locking).
  bool prepareDirectSlab(uint8_t* slab, size_t bytes);

  WorkerPool* hashingPool();

  void submit(std::unique_lock<std::mutex>& lock, std::unique_ptr<Job> job);

  // Caller holds the lock. Blocks while too many bytes wait to be written.
  void waitForSpace(std::unique_lock<std::mutex>& lock, size_t cost);

  // Caller holds the lock. A job not yet encoded goes to the compression
  // threads, an encoded one straight to the writer thread.
  void enqueue(std::unique_ptr<Job> job, size_t cost);

  // Caller holds batchMutex_ (not mutex_): batches are queued in the order
  // of their sequence numbers, so that the file's events are in order.
  void cutBatch();

  void compressLoop();

  void writeLoop();

  // Called by the writer thread (and by create()/close() when it is not running).
  void writeAll(const uint8_t* data, size_t size);

  void writeIndexAndTrailer();

  // Caller holds mutex_.
  void throwIfFailed() const {
    if (failed_) throw FormatError(error_);
  }
  void throwIfClosed() const {
    if (sequencer_.closed()) throw FormatError(path_ + ": the trace writer is closed");
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

  // Set (with error_, under mutex_) when a write fails; the sequencer then
  // refuses appends too (markFailed, writeAll).
  std::atomic<bool> failed_{false};
  // Producers' appends, merged in seq order on the sequencer's thread
  // (merge()). Started last in the constructor, stopped first in the
  // destructor: it calls merge(), which uses the members below.
  AppendSequencer sequencer_{*this, path_};

  // Two locks, taken in this order when both are: batchMutex_ is the
  // merger's (the record chunk being filled), which flush, close and stats
  // take too; mutex_ the queue's, shared with the compression and writer
  // threads.
  mutable AdaptiveMutex batchMutex_;
  Job batch_;             // the record chunk being filled
  uint64_t nextSeq_ = 0;  // above every seq merged into a chunk (the index's event count)
  Stats batchStats_;      // its events and recordRawBytes (stats() adds them up)

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

}  // namespace kcap::format
