// TraceWriter appends events and memory contents to a .kcap file.
//
// Thread model: any number of producer threads call storeContent() (or
// storeHashedContent()) and append(). Appends take no lock: a producer
// takes its seq numbers with one atomic add and hands the event to a
// merger thread, which puts the events into record chunks in seq order;
// a pool of compression threads compresses chunks; one writer thread
// writes them in submission order. Producers only hash, copy and queue; a
// large storeContent hashes and copies its pieces on a pool of threads.
// Memory is bounded: when more than Options::maxPendingBytes wait to be
// written (or the merger is a ring's worth of events behind), producers
// block until the writer catches up.
//
// Ordering guarantee: the events are in the file in seq order, and seq
// order is a linearization of the appends (an append that returned before
// another began has the lower seq). Everything a producer queued before
// calling append() (in particular the pieces of the contents its event
// references) reaches the file before that event's record chunk. flush()
// returns once everything queued or appended so far has been handed to the
// OS, so a crash of the process after flush() loses nothing that was
// queued before it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <capnp/message.h>

#include "errors.h"
#include "hash.h"
#include "kcap.capnp.h"
#include "piece_memory.h"
#include "thread_placement.h"

namespace kcap::format {

// An event whose Cap'n Proto message the writer builds on one of its own
// threads, from plain data the producer hands over. Building a message is
// most of what an event costs its producer; the events made on every
// recorded launch take this path, so that the launching thread only copies
// its facts and queues them (docs/benchmarks.md, launch overhead).
class DeferredEvent {
 public:
  virtual ~DeferredEvent() = default;
  // How many consecutive events the object stands for (events that belong
  // together, handed over at once), read once, at append(): they take
  // consecutive seq numbers.
  virtual unsigned eventCount() const { return 1; }
  // Fills event number `part` (0 to eventCount() - 1), whose seq is
  // already set. Called once a part, on a writer thread or another
  // producer's, never within the append() that handed it over, so that it
  // may wait (boundedly) for what its producer does after append()
  // returns (a launch's outcome, stored after its call). It must not
  // touch the producer's state otherwise.
  virtual void build(schema::Event::Builder event, unsigned part) const = 0;
  // About how many bytes the encoded event takes (batching, memory bound).
  virtual size_t sizeHint() const = 0;
  // Called once per object append() accepted, after it took its seq numbers and
  // before build(), on the writer's merger thread, for every object in
  // seq order (one call returns before the next begins): what an event
  // numbers here follows seq order across producers, for no lock or atomic
  // read-modify-write of its own (the shim numbers its launches here). It
  // may run after append() returned; waitSequenced() waits for it. It must
  // be quick, must not call the writer and must not touch the producer's
  // state. Called for an event the writer then drops on failure too.
  // Default: nothing.
  virtual void sequenced(uint64_t firstSeq) noexcept { (void)firstSeq; }
  // Called once by the writer when it is done with the event (built, or
  // dropped on failure), on one of its threads, instead of deleting it: an
  // event may return itself to a pool of its producer's. Default: delete.
  virtual void release() noexcept { delete this; }
};

struct ReleaseDeferredEvent {
  void operator()(DeferredEvent* event) const noexcept { event->release(); }
};
using DeferredEventPtr = std::unique_ptr<DeferredEvent, ReleaseDeferredEvent>;

// Page-locks host memory for a producer's device-to-host copies (the shim:
// cuMemHostRegister), so that they land in the writer's direct blocks at the
// bus's full rate. Called on the thread that takes the blocks.
class PageLocker {
 public:
  virtual ~PageLocker() = default;
  virtual bool lock(void* data, size_t bytes) = 0;  // false: the memory is not used for direct blocks
  virtual void unlock(void* data, size_t bytes) = 0;
};

class TraceWriter {
 public:
  struct Options {
    // Level 1: on tensor-like data (random fp32/bf16/fp16, 16-bit integers)
    // it stores within 2% of level 3's size at 1.1 to 4.4 times the speed
    // (docs/capture.md), and compression is what limits capturing data the
    // trace has not seen.
    int zstdLevel = 1;
    unsigned compressionThreads = 0;  // 0: min(8, hardware threads / 2), at least 1
    // Threads (besides the caller) that hash and queue the pieces of one
    // storeContent call; 0: min(8, hardware threads - 1). Made at the first
    // call with more than one piece.
    unsigned hashingThreads = 0;
    uint32_t pieceSize = 1u << 20;          // content is split and deduplicated in pieces of this size
    size_t maxPendingBytes = 256ull << 20;  // bound on queued, unwritten bytes
    size_t batchBytes = 256u << 10;         // a record chunk is cut when its events reach this size
    std::string writerVersion;              // stored in the header; default "kcap <version>"
    // Direct blocks (takeDirectBlocks): their memory is page-locked by
    // `pageLocker` (which must outlive the writer) and held, for reuse, up
    // to `maxDirectBytes` until the writer goes. No pageLocker: none.
    PageLocker* pageLocker = nullptr;
    size_t maxDirectBytes = 0;
    // Create the file only if nothing is at `path` (O_EXCL; a symbolic link
    // counts): else create() throws PathExists and touches nothing. The file
    // is then held under flock(LOCK_EX) until the writer closes it (a fork
    // child's copy of the descriptor holds it too, until that child exits or
    // execs), which is how `kcap record --force` tells a trace being written
    // from a finished one.
    bool exclusive = false;
    // Where its threads (merger, compression, hashing, writing) run. Idle
    // (SCHED_IDLE: only on CPU the producers' process leaves, never
    // preempting its threads) is for producers that do not wait for the
    // file (metadata and checkpoint capture): one that waits for a writer
    // the machine's other work starves waits that long.
    ThreadPlacement threads;
  };

  // Thrown by create() with Options::exclusive when something is at the path.
  class PathExists : public FormatError {
   public:
    using FormatError::FormatError;
  };

  struct Stats {
    uint64_t events = 0;
    uint64_t contentBytes = 0;  // bytes passed to storeContent (before dedup)
    uint64_t uniqueBytes = 0;   // bytes of distinct pieces
    uint64_t blobChunks = 0;
    uint64_t storedBlobBytes = 0;  // blob payload bytes in the file
    uint64_t recordRawBytes = 0;
    uint64_t storedRecordBytes = 0;
    uint64_t fileBytes = 0;        // bytes written so far
    uint64_t reusedBuffers = 0;    // new pieces copied into a buffer the writer had used before
    uint64_t producerWaitNs = 0;   // time producers spent blocked on maxPendingBytes
    uint64_t directBytes = 0;      // new pieces' bytes a producer put in direct blocks itself
    uint64_t pageLockedBytes = 0;  // direct memory page-locked (held until the writer goes)
    uint64_t pageLockNs = 0;       // time taking direct blocks spent touching and page-locking it
  };

  // Creates (truncates; with Options::exclusive only creates) `path` with
  // mode 0600 and writes the header. Throws FormatError naming the path when
  // it cannot.
  static std::unique_ptr<TraceWriter> create(const std::string& path, const Options& options);
  static std::unique_ptr<TraceWriter> create(const std::string& path) { return create(path, Options{}); }

  virtual ~TraceWriter() = default;  // the implementation closes the file (errors are swallowed there)

  // Stores `size` bytes as content-addressed pieces and describes them in `out`.
  // Pieces already in the file are not stored again. Thread-safe.
  virtual void storeContent(const void* data, size_t size, schema::Content::Builder out) = 0;

  // storeContent for a producer that hashed the pieces itself (contentHash
  // of each piece's bytes; the shim does it on the device where the memory
  // lies): hashes[i] names piece i of `data`, and the writer does not hash
  // again. The caller vouches for them; kcap check verifies them. Thread-safe.
  virtual void storeHashedContent(const void* data, size_t size, const Hash128* hashes,
                                  schema::Content::Builder out) = 0;

  // For a producer that hashes pieces itself (the shim, on the device where
  // the memory lies): for each of `hashes`, 1 when the file does not hold
  // that piece (nor has it queued), so that only those need to reach the
  // host and storeContent. A piece once held stays held. Thread-safe.
  virtual std::vector<uint8_t> missingPieces(const std::vector<Hash128>& hashes) const = 0;

  // Direct blocks, for a producer that copies new pieces itself (the shim,
  // by DMA from the device): `count` blocks of pieceSize() bytes of
  // page-locked memory, or none when the direct memory is at its bound (or
  // there is no pageLocker, or it refused once: then always). New memory is
  // touched on the writer's hashing threads and page-locked on the caller's.
  // Blocks not stored go back when destroyed. Thread-safe.
  virtual std::vector<PieceBlock> takeDirectBlocks(size_t count) = 0;

  // Stores filled direct blocks as new pieces: blocks[i] holds the piece
  // hashes[i] names (its size set with PieceBlock::setSize), queued in
  // order; one whose piece the file holds already goes back. The caller
  // vouches for the hashes, as for storeHashedContent. Waits for room like
  // storeContent. Leaves `blocks` empty. Thread-safe.
  virtual void storeDirectPieces(const Hash128* hashes, std::vector<PieceBlock>& blocks) = 0;

  // Stores one piece already encoded by another trace's writer: `chunk` is a
  // whole blob chunk (header and payload) as TraceReader::readStoredChunk
  // returns it, naming `hash` and holding `rawSize` bytes. Written as is (no
  // decompression, no recompression), unless the piece is already stored.
  // The caller vouches for the chunk; kcap check verifies it. Thread-safe.
  virtual void storeEncodedPiece(const Hash128& hash, uint64_t rawSize, std::vector<uint8_t> chunk) = 0;

  // Appends one event (root schema::Event). Assigns and returns its `seq`,
  // overwriting whatever the message held. Thread-safe.
  virtual uint64_t append(capnp::MessageBuilder& event) = 0;

  // Appends an event under the seq it holds, which must be above every seq
  // given so far (FormatError otherwise); later appends number after it.
  // For copying the events a ring kept (format/ring_trace_writer.h): the
  // trace then has gaps in seq, and its trigger event counts them.
  // Thread-safe. Returns the seq.
  virtual uint64_t appendNumbered(capnp::MessageBuilder& event) = 0;

  // The same for an event built later by the writer: its seq is assigned now,
  // so it keeps its place among the events appended before and after it.
  // Returns the first of its eventCount() seq numbers. Thread-safe.
  virtual uint64_t append(DeferredEventPtr event) = 0;

  // Blocks until everything appended or stored so far is written to the file.
  virtual void flush() = 0;

  // Returns once sequenced() has been called for every DeferredEvent whose
  // append() returned before this call (what they number is then final).
  // Default: appends sequence their events before they return.
  virtual void waitSequenced() const {}

  // Flushes, writes the index and trailer, closes the file. Idempotent.
  // Throws FormatError if any write failed since the file was created.
  virtual void close() = 0;

  // Counts every event whose append() returned before the call.
  virtual Stats stats() const = 0;
  virtual const std::string& path() const = 0;
  virtual uint32_t pieceSize() const = 0;
};

}  // namespace kcap::format
