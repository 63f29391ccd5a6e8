#include "ring_trace_writer.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <system_error>
#include <thread>
#include <unordered_set>

#include <capnp/serialize.h>
#include <zstd.h>

#include "chunk_jobs.h"
#include "schema_names.h"
#include "worker_pool.h"

namespace kcap::format {
namespace {

// Events are compressed in blocks of about this much.
constexpr size_t kEventBlockBytes = 256u << 10;

// What replay needs from before the window, whatever checkpoint it starts
// at: the code, the address space, and the graphs a launch in the window
// may run (their definitions and the updates of their nodes).
bool isStateEvent(schema::Event::Which which) {
  switch (which) {
    case schema::Event::TRACE_BEGIN:
    case schema::Event::MODULE_LOAD:
    case schema::Event::MODULE_UNLOAD:
    case schema::Event::FUNCTION_BIND:
    case schema::Event::FUNCTION_ATTRIBUTE:
    case schema::Event::TENSOR_MAP_ENCODE:
    case schema::Event::ALLOC:
    case schema::Event::FREE:
    case schema::Event::GRAPH_DEFINE:
    case schema::Event::GRAPH_NODE_UPDATE:
      return true;
    default:
      return false;
  }
}

// Events that never name a piece: not walked (the walk uses reflection).
bool namesNoPiece(schema::Event::Which which) {
  switch (which) {
    case schema::Event::SYNC:
    case schema::Event::API_ERROR:
    case schema::Event::MESSAGE:
    case schema::Event::KERNEL_TIMING:
    case schema::Event::FUNCTION_BIND:
    case schema::Event::FUNCTION_ATTRIBUTE:
    case schema::Event::ALLOC:
    case schema::Event::FREE:
    case schema::Event::TRIGGER:
    case schema::Event::TRACE_END:
      return true;
    default:
      return false;
  }
}

}  // namespace

RingTraceWriter::RingTraceWriter(const TraceWriter::Options& writerOptions, RingOptions ring)
    : options_(writerOptions), ring_(std::move(ring)) {
  if (ring_.checkpoints == 0) throw FormatError("a ring must keep at least one checkpoint");
  Segment first;
  first.id = nextSegment_++;
  segments_.push_back(std::move(first));
  sequencer_.start("kcap-ring-merge", options_.threads);
  std::lock_guard queue(queueMutex_);
  try {
    builder_ = std::thread([this] { builderLoop(); });
    prepareThread(builder_, "kcap-ring-build", options_.threads);
  } catch (const std::system_error&) {
    // No thread to be had: the merger files the events itself.
  }
}

RingTraceWriter::~RingTraceWriter() {
  try {
    close();
  } catch (const FormatError&) {
    // Destructors must not throw.
  }
  sequencer_.stop();
}

void RingTraceWriter::throwIfClosed() const {
  if (closed_) throw FormatError("the flight recorder's ring is closed");
  if (!failure_.empty()) throw FormatError("the flight recorder's ring failed: " + failure_);
}

// ---- pieces ------------------------------------------------------------------------

std::vector<uint8_t> RingTraceWriter::encodePiece(const Hash128& hash, const uint8_t* data, size_t size) {
  std::unique_ptr<Compressor> compressor;
  {
    std::lock_guard lock(compressorsMutex_);
    if (!compressors_.empty()) {
      compressor = std::move(compressors_.back());
      compressors_.pop_back();
    }
  }
  if (!compressor) compressor = std::make_unique<Compressor>();
  Job job;
  job.kind = ChunkKind::kBlob;
  job.hash = hash;
  job.piece = pieceMemory_.take();
  job.piece.fill(data, size);
  encodeJob(*compressor, options_.zstdLevel, job);
  {
    std::lock_guard lock(compressorsMutex_);
    compressors_.push_back(std::move(compressor));
  }
  return std::move(job.encoded);
}

void RingTraceWriter::keepPiece(const Hash128& hash, uint64_t rawSize, std::vector<uint8_t> chunk) {
  stats_.contentBytes += rawSize;
  auto [it, inserted] = pieces_.try_emplace(hash);
  it->second.newest = std::max(it->second.newest, producerSegment());
  if (!inserted) return;
  stats_.uniqueBytes += rawSize;
  bytes_ += chunk.size();
  it->second.rawSize = rawSize;
  it->second.chunk = std::move(chunk);
}

void RingTraceWriter::store(const void* data, size_t size, const Hash128* known, schema::Content::Builder out) {
  const auto* bytes = static_cast<const uint8_t*>(data);
  const uint32_t pieceBytes = options_.pieceSize;
  const size_t count = size == 0 ? 0 : (size + pieceBytes - 1) / pieceBytes;
  out.setSize(size);
  out.setPieceSize(pieceBytes);
  auto pieces = out.initPieces(static_cast<unsigned>(count));
  std::vector<Hash128> hashes(count);
  // Each piece is hashed and, when new, compressed by one thread (a large
  // content on the pool: a checkpoint's new pieces are most of the work).
  std::mutex failedMutex;
  std::exception_ptr failed;
  auto piece = [&](size_t i) {
    try {
      storePiece(bytes + i * pieceBytes, std::min<size_t>(pieceBytes, size - i * pieceBytes), known, hashes[i], i);
    } catch (...) {
      std::lock_guard lock(failedMutex);
      if (!failed) failed = std::current_exception();
    }
  };
  WorkerPool* pool = count > 1 ? workers() : nullptr;
  if (pool != nullptr) {
    pool->forEach(count, piece);
  } else {
    for (size_t i = 0; i < count; ++i) piece(i);
  }
  if (failed) std::rethrow_exception(failed);
  for (size_t i = 0; i < count; ++i) {
    pieces[static_cast<unsigned>(i)].setHigh(hashes[i].high);
    pieces[static_cast<unsigned>(i)].setLow(hashes[i].low);
  }
  std::lock_guard lock(mutex_);
  trim();
}

void RingTraceWriter::storePiece(const uint8_t* piece, size_t length, const Hash128* known, Hash128& hash,
                                 size_t index) {
  {
    hash = known != nullptr ? known[index] : contentHash(piece, length);
    std::lock_guard lock(mutex_);
    throwIfClosed();
    auto it = pieces_.find(hash);
    if (it != pieces_.end()) {
      it->second.newest = std::max(it->second.newest, producerSegment());
      stats_.contentBytes += length;
      return;
    }
  }
  std::vector<uint8_t> chunk = encodePiece(hash, piece, length);
  std::lock_guard lock(mutex_);
  throwIfClosed();
  keepPiece(hash, length, std::move(chunk));
}

WorkerPool* RingTraceWriter::workers() {
  std::call_once(workersMade_, [&] {
    unsigned threads = options_.hashingThreads;
    if (threads == 0) threads = std::min(8u, std::max(2u, std::thread::hardware_concurrency()) - 1);
    workers_ = std::make_unique<WorkerPool>(threads, "kcap-ring", options_.threads);
  });
  return workers_->threads() > 0 ? workers_.get() : nullptr;
}

void RingTraceWriter::storeContent(const void* data, size_t size, schema::Content::Builder out) {
  store(data, size, nullptr, out);
}

void RingTraceWriter::storeHashedContent(const void* data, size_t size, const Hash128* hashes,
                                         schema::Content::Builder out) {
  store(data, size, hashes, out);
}

std::vector<uint8_t> RingTraceWriter::missingPieces(const std::vector<Hash128>& hashes) const {
  std::vector<uint8_t> missing(hashes.size(), 1);
  std::lock_guard lock(mutex_);
  const uint64_t current = producerSegment();
  for (size_t i = 0; i < hashes.size(); ++i) {
    auto it = pieces_.find(hashes[i]);
    if (it == pieces_.end()) continue;
    it->second.newest = std::max(it->second.newest, current);  // the producer will name it
    missing[i] = 0;
  }
  return missing;
}

std::vector<PieceBlock> RingTraceWriter::takeDirectBlocks(size_t count) {
  (void)count;
  return {};
}

void RingTraceWriter::storeDirectPieces(const Hash128* hashes, std::vector<PieceBlock>& blocks) {
  std::vector<PieceBlock> taken = std::move(blocks);
  blocks.clear();
  for (size_t i = 0; i < taken.size(); ++i) {
    std::vector<uint8_t> chunk = encodePiece(hashes[i], taken[i].data(), taken[i].size());
    std::lock_guard lock(mutex_);
    throwIfClosed();
    keepPiece(hashes[i], taken[i].size(), std::move(chunk));
  }
  std::lock_guard lock(mutex_);
  trim();
}

void RingTraceWriter::storeEncodedPiece(const Hash128& hash, uint64_t rawSize, std::vector<uint8_t> chunk) {
  if (chunk.size() < kChunkHeaderSize + kBlobHashSize) {
    throw FormatError("an encoded piece of " + std::to_string(chunk.size()) + " bytes is no blob chunk");
  }
  std::lock_guard lock(mutex_);
  throwIfClosed();
  keepPiece(hash, rawSize, std::move(chunk));
  trim();
}

// ---- events ------------------------------------------------------------------------

uint64_t RingTraceWriter::producerSegment() const {
  return segments_.back().id + (checkpointsAppended_.load(std::memory_order_acquire) - checkpointsFiled_);
}

void RingTraceWriter::keep(std::vector<uint8_t> flat, uint64_t seq) {
  // Flat events are word-aligned (operator new), as the reader needs.
  capnp::ReaderOptions options;
  options.traversalLimitInWords = uint64_t{1} << 40;  // the ring's own events
  capnp::FlatArrayMessageReader reader(
      kj::arrayPtr(reinterpret_cast<const capnp::word*>(flat.data()), flat.size() / sizeof(capnp::word)), options);
  const auto event = reader.getRoot<schema::Event>();
  const auto which = event.which();
  filing_ = seq;
  // A checkpoint starts a segment: the ring is cut where replay can start.
  if (which == schema::Event::CHECKPOINT) {
    ++checkpointsFiled_;
    sealOpen(segments_.back());
    Segment next;
    next.id = nextSegment_++;
    next.firstSeq = seq;
    next.atCheckpoint = true;
    segments_.push_back(std::move(next));
  }
  if (which == schema::Event::LAUNCH && ring_.launched) ring_.launched(event.getLaunch());
  const bool state = isStateEvent(which);
  const uint64_t current = segments_.back().id;
  auto touch = [&](schema::Content::Reader content, bool pin) {
    for (const auto piece : content.getPieces()) {
      auto it = pieces_.find(Hash128{piece.getHigh(), piece.getLow()});
      if (it == pieces_.end()) continue;
      it->second.newest = std::max(it->second.newest, current);
      if (pin) it->second.pinned = true;
    }
  };
  // Launches and their ends, most of the events, name pieces only in their
  // snapshots: read directly (the general walk uses reflection). An
  // allocation's first content is needed only while the allocation is in
  // the window (writeOut drops it from older ones): not pinned.
  if (which == schema::Event::ALLOC) {
    for (const auto range : event.getAlloc().getInitial()) touch(range.getContent(), false);
  } else if (which == schema::Event::LAUNCH) {
    for (const auto range : event.getLaunch().getPre()) touch(range.getContent(), state);
  } else if (which == schema::Event::LAUNCH_END) {
    for (const auto range : event.getLaunchEnd().getPost()) touch(range.getContent(), state);
  } else if (!namesNoPiece(which)) {
    forEachContent(event, [&](const std::string&, schema::Content::Reader content) { touch(content, state); });
  }
  if (state) {
    StateEvent kept;
    kept.seq = seq;
    kept.flat = std::move(flat);
    stateBytes_ += kept.flat.size();
    bytes_ += kept.flat.size();
    state_.push_back(std::move(kept));
  } else {
    Segment& segment = segments_.back();
    if (segment.events == 0 && !segment.atCheckpoint) segment.firstSeq = seq;
    segment.open.insert(segment.open.end(), flat.begin(), flat.end());
    segment.bytes += flat.size();
    bytes_ += flat.size();
    ++segment.events;
    if (segment.open.size() >= kEventBlockBytes) {
      sealOpen(segment);
      trim();  // events alone may reach the bound between checkpoints
    }
  }
  ++stats_.events;
  if (which == schema::Event::CHECKPOINT) trim();
}

void RingTraceWriter::sealOpen(Segment& segment) {
  if (segment.open.empty()) return;
  std::vector<uint8_t> frame(ZSTD_compressBound(segment.open.size()));
  const size_t n =
      ZSTD_compress(frame.data(), frame.size(), segment.open.data(), segment.open.size(), options_.zstdLevel);
  if (ZSTD_isError(n)) throw FormatError(std::string("the ring cannot compress events: ") + ZSTD_getErrorName(n));
  frame.resize(n);
  frame.shrink_to_fit();
  bytes_ -= segment.open.size();
  segment.bytes -= segment.open.size();
  bytes_ += frame.size();
  segment.bytes += frame.size();
  segment.blocks.push_back(std::move(frame));
  segment.open.clear();  // its capacity stays for the next block
}

// ---- the window ---------------------------------------------------------------------

void RingTraceWriter::trim() {
  // Events appended before fire() and filed after it are trimmed as they
  // would have been: the window is the one at the trigger.
  if (fired_ && filing_ >= firedAt_) return;
  auto atCheckpoint = static_cast<size_t>(
      std::count_if(segments_.begin(), segments_.end(), [](const Segment& s) { return s.atCheckpoint; }));
  bool dropped = false;
  while (segments_.size() > 1 && atCheckpoint > ring_.checkpoints) {
    if (segments_.front().atCheckpoint) --atCheckpoint;
    dropOldest();
    dropped = true;
  }
  if (dropped) releasePieces();
  spillPieces();
  // Memory and the ring file are both full: the oldest segment goes early,
  // and with it the pieces only it named, which makes room in either.
  while (segments_.size() > 1 && bytes_ > ring_.maxBytes) {
    dropOldest();
    releasePieces();
    spillPieces();
  }
  // While checkpoints appended are not filed yet, the pieces stored for
  // them count as the newest segment's: filing them trims again.
  const bool caughtUp = checkpointsAppended_.load(std::memory_order_acquire) == checkpointsFiled_;
  if (bytes_ > ring_.maxBytes && !warned_ && caughtUp && segments_.size() == 1 && newestBytes() > ring_.maxBytes) {
    warned_ = true;
    if (ring_.warn) {
      const std::string file =
          spill_ ? " and the ring file (" + std::to_string(spill_->maxBytes() >> 20) + " MiB)" : std::string();
      ring_.warn("the flight recorder's newest checkpoint interval alone holds more than the buffer (" +
                 std::to_string(ring_.maxBytes >> 20) + " MiB)" + file + "; keeping it whole, over the bound");
    }
  }
}

bool RingTraceWriter::spillPieces() {
  if (bytes_ <= ring_.maxBytes || ring_.maxSpillBytes == 0 || ring_.spillPath.empty() || spillFailed_ || spillFull_) {
    return false;
  }
  if (!spill_) {
    try {
      spill_ = std::make_unique<RingSpill>(ring_.spillPath, ring_.maxSpillBytes);
    } catch (const FormatError& e) {
      spillFailed(e.what());
      return false;
    }
  }
  std::vector<std::pair<uint64_t, Piece*>> order;
  for (auto& [hash, piece] : pieces_) {
    if (piece.spilled.size == 0) order.emplace_back(piece.newest, &piece);
  }
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  const size_t lowWater = ring_.maxBytes - ring_.maxBytes / 8;
  bool moved = false;
  for (auto& [newest, piece] : order) {
    if (bytes_ <= lowWater) break;
    std::optional<RingSpill::Extent> extent;
    try {
      extent = spill_->put(piece->chunk);
    } catch (const FormatError& e) {
      spillFailed(e.what());
      break;
    }
    if (!extent) {
      spillFull_ = true;
      break;
    }
    piece->spilled = *extent;
    bytes_ -= piece->chunk.size();
    std::vector<uint8_t>().swap(piece->chunk);
    ++spilledPieces_;
    spilledBytes_ += extent->size;
    moved = true;
  }
  return moved;
}

void RingTraceWriter::spillFailed(const std::string& why) {
  // What is in the file stays there, readable or not; nothing more goes.
  spillFailed_ = true;
  if (ring_.warn) {
    ring_.warn("the flight recorder's ring file failed (" + why +
               "); past the buffer, older checkpoint intervals are dropped");
  }
}

void RingTraceWriter::forget(Piece& piece) {
  if (piece.spilled.size != 0) {
    spill_->release(piece.spilled);
    spillFull_ = false;
    --spilledPieces_;
    spilledBytes_ -= piece.spilled.size;
    piece.spilled = {};
  } else {
    bytes_ -= piece.chunk.size();
  }
}

size_t RingTraceWriter::newestBytes() const {
  // Pieces held only for the segment before the newest (releasePieces)
  // go with the next checkpoint: they are not the newest segment's.
  const uint64_t current = segments_.back().id;
  size_t lagging = 0;
  for (const auto& [hash, piece] : pieces_) {
    if (!piece.pinned && piece.newest < current) lagging += piece.chunk.size();  // 0 when in the file
  }
  return bytes_ - stateBytes_ - lagging;
}

void RingTraceWriter::dropOldest() {
  Segment& oldest = segments_.front();
  droppedEvents_ += oldest.events;
  bytes_ -= oldest.bytes;
  ++droppedSegments_;
  segments_.pop_front();
}

void RingTraceWriter::releasePieces() {
  const uint64_t current = segments_.back().id;
  const uint64_t keepFrom = std::min(segments_.front().id, current - 1);
  for (auto it = pieces_.begin(); it != pieces_.end();) {
    if (!it->second.pinned && it->second.newest < keepFrom) {
      forget(it->second);
      it = pieces_.erase(it);
    } else {
      ++it;
    }
  }
}

uint64_t RingTraceWriter::fire() {
  std::lock_guard lock(mutex_);
  if (!fired_) {
    fired_ = true;
    firedAt_ = sequencer_.tickets();
    droppedAtFire_ = droppedEvents_;
  }
  return droppedEvents_;
}

bool RingTraceWriter::fired() const {
  std::lock_guard lock(mutex_);
  return fired_;
}

RingTraceWriter::RingStats RingTraceWriter::ringStats() {
  settle();
  std::lock_guard lock(mutex_);
  RingStats out;
  out.droppedEvents = droppedEvents_;
  out.droppedSegments = droppedSegments_;
  out.segments = segments_.size();
  out.stateEvents = state_.size();
  out.pieces = pieces_.size();
  out.bytes = bytes_;
  out.spilledPieces = spilledPieces_;
  out.spilledBytes = spilledBytes_;
  out.spillFileBytes = spill_ ? spill_->fileBytes() : 0;
  return out;
}

TraceWriter::Stats RingTraceWriter::stats() const {
  std::lock_guard lock(mutex_);
  Stats out = stats_;
  out.events = sequencer_.tickets();
  out.producerWaitNs = sequencer_.producerWaitNs();
  return out;
}

// ---- writing out ---------------------------------------------------------------------

namespace {

// Appends the flat messages of `bytes` to `out`, in order, each under its seq.
void appendFlatEvents(const uint8_t* bytes, size_t size, const std::function<void(capnp::MessageReader&)>& fn) {
  // capnp reads words: the events are copied to aligned memory once.
  kj::Array<capnp::word> words = kj::heapArray<capnp::word>((size + sizeof(capnp::word) - 1) / sizeof(capnp::word));
  std::memcpy(words.begin(), bytes, size);
  kj::ArrayPtr<const capnp::word> rest = words.asPtr();
  capnp::ReaderOptions options;
  options.traversalLimitInWords = uint64_t{1} << 40;
  while (rest.size() > 0) {
    capnp::FlatArrayMessageReader reader(rest, options);
    fn(reader);
    rest = kj::arrayPtr(reader.getEnd(), rest.end());
  }
}

}  // namespace

void RingTraceWriter::writeOut(TraceWriter& out) {
  std::vector<std::pair<const Hash128*, const Piece*>> spilled;
  for (auto& [hash, piece] : pieces_) {
    if (piece.spilled.size != 0) {
      spilled.emplace_back(&hash, &piece);
    } else {
      out.storeEncodedPiece(hash, piece.rawSize, std::move(piece.chunk));
    }
  }
  // Read back in the file's order.
  std::sort(spilled.begin(), spilled.end(),
            [](const auto& a, const auto& b) { return a.second->spilled.offset < b.second->spilled.offset; });
  size_t lost = 0;
  std::string why;
  for (const auto& [hash, piece] : spilled) {
    std::vector<uint8_t> chunk;
    try {
      chunk = spill_->read(piece->spilled);
    } catch (const FormatError& e) {
      // The rest of the ring is still worth writing: the trace then lacks
      // the piece, which its reader reports.
      if (lost++ == 0) why = e.what();
      continue;
    }
    out.storeEncodedPiece(*hash, piece->rawSize, std::move(chunk));
  }
  if (lost != 0 && ring_.warn) {
    ring_.warn("the flight recorder's ring file could not be read back (" + why + "): " + std::to_string(lost) +
               " pieces are missing from the trace");
  }
  pieces_.clear();
  spill_.reset();
  size_t nextState = 0;
  // Re-execution starts at the window's first checkpoint, which holds the
  // memory of every allocation made before it: their first content is not
  // needed, and its pieces may be gone (releasePieces), as may the
  // WrittenData that carries a stream-ordered allocation's.
  // That WrittenData may as well come in the window (the read-back finished
  // late): a note takes its place (and its seq: the trigger counts the gaps
  // the ring left), so that no allocation from before the window has a
  // first content in the file.
  const uint64_t windowStart = segments_.empty() ? 0 : segments_.front().firstSeq;
  std::unordered_set<uint64_t> firstContentDropped;  // seqs of such allocations that awaited a WrittenData
  auto copy = [&](capnp::MessageReader& reader) {
    const auto recorded = reader.getRoot<schema::Event>();
    capnp::MallocMessageBuilder message;
    if (recorded.isWrittenData() && firstContentDropped.count(recorded.getWrittenData().getOf()) != 0) {
      auto note = message.initRoot<schema::Event>();
      note.setSeq(recorded.getSeq());
      note.setTimeNs(recorded.getTimeNs());
      note.setThreadId(recorded.getThreadId());
      note.initMessage().setText("the first content of the allocation at event #" +
                                 std::to_string(recorded.getWrittenData().getOf()) +
                                 ", made before the flight recorder's window, is left out: the window's first "
                                 "checkpoint holds that memory");
      out.appendNumbered(message);
      return;
    }
    message.setRoot(recorded);
    auto event = message.getRoot<schema::Event>();
    if (event.isTrigger()) {
      // Its count was what fire() returned: add what went after, of the
      // events appended before fire() and filed after it.
      auto trigger = event.getTrigger();
      trigger.setDroppedEvents(trigger.getDroppedEvents() + (droppedEvents_ - droppedAtFire_));
    }
    if (event.isAlloc() && event.getSeq() < windowStart) {
      if (event.getAlloc().hasInitial()) event.getAlloc().disownInitial();
      if (event.getAlloc().getInitialDeferred()) firstContentDropped.insert(event.getSeq());
      event.getAlloc().setInitialDeferred(false);
    }
    out.appendNumbered(message);
  };
  auto stateBefore = [&](uint64_t seq) {
    for (; nextState < state_.size() && state_[nextState].seq < seq; ++nextState) {
      const auto& flat = state_[nextState].flat;
      appendFlatEvents(flat.data(), flat.size(), copy);
    }
  };
  for (Segment& segment : segments_) {
    sealOpen(segment);
    for (const auto& frame : segment.blocks) {
      const unsigned long long raw = ZSTD_getFrameContentSize(frame.data(), frame.size());
      if (raw == ZSTD_CONTENTSIZE_ERROR || raw == ZSTD_CONTENTSIZE_UNKNOWN) {
        throw FormatError("the ring holds a damaged block of events");
      }
      std::vector<uint8_t> events(raw);
      const size_t n = ZSTD_decompress(events.data(), events.size(), frame.data(), frame.size());
      if (ZSTD_isError(n) || n != raw) throw FormatError("the ring holds a damaged block of events");
      appendFlatEvents(events.data(), events.size(), [&](capnp::MessageReader& reader) {
        stateBefore(reader.getRoot<schema::Event>().getSeq());
        copy(reader);
      });
    }
  }
  stateBefore(UINT64_MAX);
}

void RingTraceWriter::close() {
  // A second close() returns once the first has written the ring.
  std::lock_guard closing(closeMutex_);
  if (sequencer_.closed()) return;
  sequencer_.markClosed();
  sequencer_.drainToCut();  // every event appended before is queued
  std::unique_lock queue(queueMutex_);
  stopBuilder(queue);
  std::unique_lock lock(mutex_);
  fileQueued(lock);
  closed_ = true;
  if (!fired_) {
    segments_.clear();
    state_.clear();
    pieces_.clear();
    spill_.reset();
    bytes_ = 0;
    return;
  }
  if (!ring_.openOutput) throw FormatError("the flight recorder fired, but has no output to write to");
  std::unique_ptr<TraceWriter> out = ring_.openOutput();
  path_ = out->path();
  writeOut(*out);
  segments_.clear();
  state_.clear();
  out->close();
  const Stats written = out->stats();
  stats_.blobChunks = written.blobChunks;
  stats_.storedBlobBytes = written.storedBlobBytes;
  stats_.recordRawBytes = written.recordRawBytes;
  stats_.storedRecordBytes = written.storedRecordBytes;
  stats_.fileBytes = written.fileBytes;
}

}  // namespace kcap::format
