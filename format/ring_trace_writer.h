// RingTraceWriter: the flight recorder's TraceWriter (docs/checkpoint.md,
// "The flight recorder"). It writes nothing while the program runs: events
// and pieces are held in memory, compressed, and only the recent past is
// kept. fire() freezes what is held; close() then writes it to a file made
// by RingOptions::openOutput, as a normal trace. Closed without fire():
// nothing is written, no file is made.
//
// What is kept. The events are cut into segments, a new one at each
// checkpoint event; the last RingOptions::checkpoints segments that start
// at a checkpoint are kept (and those events before the first checkpoint,
// while there are not more). Older segments are dropped, except the events
// replay needs from before the window, which are small and all kept in seq
// order: traceBegin, module loads and unloads, function binds and
// attributes, tensor map encodes, allocations and frees, graph definitions
// and node updates. Every event keeps
// the seq append() gave it, so a written ring has gaps in seq; its trigger
// event's droppedEvents counts them.
//
// Pieces. A piece is kept while a kept event may name it: each piece
// remembers the newest segment that stored it, looked it up (missingPieces,
// which producers call before storing what is missing) or appended an event
// naming it; pieces named by a kept state event (module images) are pinned,
// but for an allocation's first content, which the written trace drops from
// allocations made before the window.
// When segments are dropped, a piece whose newest segment is older than
// both the oldest kept segment and the segment before the newest is
// released and forgotten: a later store of it stores it again. The second
// bound covers a producer that stored a piece just before a checkpoint and
// appends the event naming it just after.
//
// Memory: at most RingOptions::maxBytes of compressed events and pieces.
// Past it, pieces move to the ring file (ring_spill.h, up to
// RingOptions::maxSpillBytes), oldest first (by the newest segment that
// named them: module images, pinned for the whole run, go early and free
// their memory for good), until the memory is an eighth under the bound,
// so that moves come in batches. Only when the ring file is full too (or
// failed, or there is none) is the oldest segment dropped early, never the
// newest. A newest segment alone over both is kept, said once through
// RingOptions::warn; so is a ring file that cannot be made or written
// (what does not fit is then dropped, as without one). Pieces in the file
// are read back when a fired ring is written out; released pieces give
// their space back. The file goes with the ring, fired or not.
//
// Thread-safe like TraceWriter. Appends take no lock: like the file
// writer's, they go through an AppendSequencer (append_sequencer.h), whose
// merger thread queues them in seq order (a launch's DeferredEvent, or
// another event in flat form, built by its producer); a builder thread of
// the ring's builds, files and compresses the queued events in batches,
// under the ring's lock (ring_trace_writer_build.cpp): the ring holds
// events in seq order. Building waits for a launch's outcome, which its
// producer stores after the call: the merger, which producers wait for
// when its ring is full, does not build (but when the queue is over its
// bound, or no builder thread could be made). New pieces are compressed by the producer, or, for a content of
// several pieces, on a pool of threads (Options::hashingThreads).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "append_sequencer.h"
#include "hash.h"
#include "piece_memory.h"
#include "ring_spill.h"
#include "trace_writer.h"

namespace kcap::format {

struct Compressor;
class WorkerPool;

struct RingOptions {
  unsigned checkpoints = 2;             // segments starting at a checkpoint that are kept (at least 1)
  size_t maxBytes = size_t{256} << 20;  // bound on the compressed events and pieces held
  // Makes the output file when a fired ring is closed (the caller's path
  // rules: exclusive creation, a name with the pid when taken, ...).
  std::function<std::unique_ptr<TraceWriter>()> openOutput;
  std::function<void(const std::string&)> warn;  // one line for the user; may be empty
  // The ring file: pieces past maxBytes move there, up to this many bytes
  // (0: no file; what exceeds maxBytes is dropped). Made at the first move,
  // unnamed in spillPath's directory, else at spillPath and unlinked at once.
  uint64_t maxSpillBytes = 0;
  std::string spillPath;
  // Told of every launch event kept (stream, context, launch index), in seq
  // order, under the ring's lock: it must be quick and not call the ring.
  std::function<void(schema::Launch::Reader)> launched;
};

class RingTraceWriter final : public TraceWriter, private AppendSequencer::Consumer {
 public:
  // `writerOptions`: the piece size and zstd level of what is held, and the
  // options the output will be written with (its writer is made by
  // openOutput).
  RingTraceWriter(const TraceWriter::Options& writerOptions, RingOptions ring);
  ~RingTraceWriter() override;

  void storeContent(const void* data, size_t size, schema::Content::Builder out) override;
  void storeHashedContent(const void* data, size_t size, const Hash128* hashes, schema::Content::Builder out) override;
  std::vector<uint8_t> missingPieces(const std::vector<Hash128>& hashes) const override;
  // None: the ring copies what it keeps into its own compressed form.
  std::vector<PieceBlock> takeDirectBlocks(size_t count) override;
  void storeDirectPieces(const Hash128* hashes, std::vector<PieceBlock>& blocks) override;
  void storeEncodedPiece(const Hash128& hash, uint64_t rawSize, std::vector<uint8_t> chunk) override;
  uint64_t append(capnp::MessageBuilder& event) override;
  uint64_t append(DeferredEventPtr event) override;
  uint64_t appendNumbered(capnp::MessageBuilder& event) override;
  void waitSequenced() const override { sequencer_.settle(); }
  void flush() override {}  // nothing reaches a file before close()
  // Writes the ring out when fired, else lets it go. Idempotent. Throws
  // FormatError when the output cannot be made or written.
  void close() override;
  Stats stats() const override;  // events: every seq given, kept or not
  // The output's path once close() wrote it; empty before.
  const std::string& path() const override { return path_; }
  uint32_t pieceSize() const override { return options_.pieceSize; }

  // From now on nothing is dropped, and close() writes the ring. Returns
  // the events dropped so far (the trigger event's droppedEvents). The
  // window is the one at the call: events appended before it and filed
  // after it are trimmed as they would have been, and what that drops is
  // added to the trigger event's droppedEvents when the ring is written.
  uint64_t fire();
  bool fired() const;

  struct RingStats {
    uint64_t droppedEvents = 0;
    uint64_t droppedSegments = 0;
    uint64_t segments = 0;  // kept now
    uint64_t stateEvents = 0;
    uint64_t pieces = 0;          // held now
    uint64_t bytes = 0;           // compressed events and pieces held in memory
    uint64_t spilledPieces = 0;   // held in the ring file
    uint64_t spilledBytes = 0;    // their chunks' bytes
    uint64_t spillFileBytes = 0;  // the ring file's size (0: none made)
  };
  // After every event appended so far is filed.
  RingStats ringStats();
  // Files every event appended so far (appends return before the ring
  // files them: what the ring holds, missingPieces among it, lags them).
  void settle();

 private:
  struct Piece {
    std::vector<uint8_t> chunk;  // the encoded blob chunk, as the output stores it; empty when spilled
    RingSpill::Extent spilled;   // where in the ring file the chunk is, when there
    uint64_t rawSize = 0;
    uint64_t newest = 0;  // the newest segment that stored, looked up or named it
    bool pinned = false;  // named by a kept state event
  };
  struct Segment {
    uint64_t id = 0;
    uint64_t firstSeq = 0;
    bool atCheckpoint = false;
    uint64_t events = 0;                       // not counting state events (held apart)
    std::vector<std::vector<uint8_t>> blocks;  // zstd frames of events in flat form
    std::vector<uint8_t> open;                 // events not yet compressed
    size_t bytes = 0;                          // blocks' and open's
  };
  struct StateEvent {
    uint64_t seq = 0;
    std::vector<uint8_t> flat;
  };

  void store(const void* data, size_t size, const Hash128* known, schema::Content::Builder out);
  // Piece `index` of a content: hashed (or known[index]) into `hash`,
  // compressed and kept when new. Takes mutex_.
  void storePiece(const uint8_t* piece, size_t length, const Hash128* known, Hash128& hash, size_t index);
  // Caller holds mutex_. The piece, encoded off the lock by the caller.
  void keepPiece(const Hash128& hash, uint64_t rawSize, std::vector<uint8_t> chunk);
  std::vector<uint8_t> encodePiece(const Hash128& hash, const uint8_t* data, size_t size);
  // Caller holds mutex_. The segment an event appended now lands in: the
  // newest, or a later one when checkpoints appended are not filed yet.
  uint64_t producerSegment() const;
  // Caller holds mutex_. Files an event (in flat form) whose seq is set.
  void keep(std::vector<uint8_t> flat, uint64_t seq);
  void sealOpen(Segment& segment);
  void trim();                 // caller holds mutex_
  void dropOldest();           // caller holds mutex_
  size_t newestBytes() const;  // caller holds mutex_; the newest segment's events and pieces
  void releasePieces();        // caller holds mutex_
  void forget(Piece& piece);   // caller holds mutex_; its memory or file space goes
  // Caller holds mutex_. Moves pieces to the ring file while memory is over
  // the bound and the file has room; false when none could move.
  bool spillPieces();
  void spillFailed(const std::string& why);  // caller holds mutex_
  void throwIfClosed() const;                // also after filing failed (failure_)
  void writeOut(TraceWriter& out);

  // Appends (ring_trace_writer_build.cpp). A queued event: a deferred
  // one, or one its producer built, in flat form.
  struct PendingEvent {
    uint64_t seq = 0;  // of its first part
    DeferredEventPtr event;
    std::unique_ptr<std::vector<uint8_t>> flat;
  };
  using BuiltEvents = std::vector<std::pair<uint64_t, std::vector<uint8_t>>>;  // seq, flat event
  uint64_t appendMessage(capnp::MessageBuilder& message, bool numbered);
  // On the sequencer's merger: queues the entries for the builder.
  void merge(AppendSequencer::Run& run) noexcept override;
  [[noreturn]] void throwRefused() const override;
  // Caller holds mutex_: filing failed; appends throw `e` from now on.
  void failWith(const std::exception& e);
  // Caller holds queueMutex_ and `lock` on mutex_: waits for the builder
  // thread's batch to be filed, then builds and files every queued event,
  // on this thread. What comes next in seq order may then be filed.
  void fileQueued(std::unique_lock<std::mutex>& lock);
  // Builds the parts of each event of `batch` (no lock needed) into
  // `built`, in seq order, ready to be filed (caller holds mutex_).
  static void buildAll(std::vector<PendingEvent>& batch, BuiltEvents& built);
  void fileBuilt(BuiltEvents& built);
  void builderLoop();
  // `queue` (on queueMutex_) held on entry and return, released while joining.
  void stopBuilder(std::unique_lock<std::mutex>& queue);

  const TraceWriter::Options options_;
  const RingOptions ring_;
  PieceMemory pieceMemory_{options_.pieceSize};

  // Three locks, taken in this order when several are: closeMutex_ (held
  // through close()), queueMutex_ (the queue of events for the builder)
  // and mutex_ (the ring).
  std::mutex closeMutex_;
  mutable std::mutex queueMutex_;

  mutable std::mutex mutex_;
  // Checkpoint events appended (counted before their append) and filed:
  // the difference is how many segments the producers are ahead of the
  // ring (producerSegment).
  std::atomic<uint64_t> checkpointsAppended_{0};
  uint64_t checkpointsFiled_ = 0;  // guarded by mutex_
  uint64_t nextSegment_ = 1;
  std::deque<Segment> segments_;
  std::vector<StateEvent> state_;
  mutable std::unordered_map<Hash128, Piece, Hash128Hasher> pieces_;
  size_t bytes_ = 0;
  size_t stateBytes_ = 0;
  uint64_t droppedEvents_ = 0;
  uint64_t droppedSegments_ = 0;
  bool fired_ = false;
  uint64_t firedAt_ = 0;        // the tickets when fire() came: events before it may still be trimmed
  uint64_t droppedAtFire_ = 0;  // what fire() returned
  uint64_t filing_ = 0;         // the seq of the event filed last (or being filed)
  bool closed_ = false;
  bool warned_ = false;
  std::unique_ptr<RingSpill> spill_;  // made at the first move
  bool spillFailed_ = false;
  bool spillFull_ = false;  // a chunk found no room; cleared when room is given back
  uint64_t spilledPieces_ = 0;
  uint64_t spilledBytes_ = 0;
  Stats stats_;
  std::string path_;

  WorkerPool* workers();  // made at the first content of several pieces

  std::once_flag workersMade_;
  std::unique_ptr<WorkerPool> workers_;
  std::mutex compressorsMutex_;
  std::vector<std::unique_ptr<Compressor>> compressors_;  // idle ones, for the producers' threads

  // Guarded by queueMutex_. Queued events, in seq order; a batch the
  // builder took out of queued_ comes before all of them in seq order.
  std::vector<PendingEvent> queued_;
  bool stopBuilding_ = false;         // close(): the builder files what is queued and ends
  std::condition_variable queuedCv_;  // the builder: events queued, or stop
  // Guarded by mutex_.
  bool building_ = false;            // the builder thread holds a batch not yet filed
  std::string failure_;              // the first failure to queue or file: appends throw it
  std::condition_variable filedCv_;  // others: the builder's batch is filed
  std::thread builder_;              // none when no thread could be made: the merger files

  // Last: started at the end of the constructor, stopped first in the
  // destructor (its merger calls merge(), which uses the members above).
  AppendSequencer sequencer_{*this, "the flight recorder's ring"};
};

}  // namespace kcap::format
