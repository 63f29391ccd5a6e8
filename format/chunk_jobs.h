// The trace writer's units of work (trace_writer.cpp): a Job is one chunk on
// its way to the file (a batch of events, a piece of content, the index),
// queued by a producer, encoded by a compression thread (events built, zstd,
// checksum) and written by the writer thread. Internal to the writer.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <mutex>
#include <string>
#include <vector>

#include <capnp/serialize.h>
#include <kj/io.h>
#include <zstd.h>

#include "container.h"
#include "hash.h"
#include "piece_memory.h"
#include "trace_writer.h"

namespace kcap::format {

// An event of a record chunk that is still to be built, and where it goes.
struct DeferredSlot {
  size_t at = 0;     // its bytes go at raw[at], before whatever was appended after it
  uint64_t seq = 0;  // the first of `count`
  unsigned count = 1;
  DeferredEventPtr event;
};

// One chunk on its way to the file: queued by a producer, encoded (compressed,
// checksummed) by a compression thread, written by the writer thread.
struct Job {
  ChunkKind kind = ChunkKind::kRecords;
  std::vector<uint8_t> raw;            // record chunks
  PieceBlock piece;                    // blob chunks: the piece's bytes
  std::vector<DeferredSlot> deferred;  // record chunks: built by the compression thread
  size_t deferredHint = 0;             // their size hints, summed
  size_t deferredBytes = 0;            // their encoded size, once built
  Hash128 hash;                        // blob chunks
  uint64_t firstSeq = 0;               // record chunks
  uint32_t eventCount = 0;             // record chunks
  std::vector<uint8_t> encoded;
  uint64_t rawSize = 0;  // size of `raw` before it was released
  bool done = false;
};

// A compression thread's zstd context and the buffer zstd writes into. The
// chunk takes only the bytes zstd produced: growing the chunk itself to
// compressBound() zeroed it first, 6% of the compression threads'
// instructions when recording metadata (callgrind, 2026-12-01).
struct Compressor {
  Compressor() : cctx(ZSTD_createCCtx()) {}
  ~Compressor() { ZSTD_freeCCtx(cctx); }
  Compressor(const Compressor&) = delete;
  Compressor& operator=(const Compressor&) = delete;

  ZSTD_CCtx* const cctx;        // nullptr if zstd had no memory: chunks are stored as they are
  std::vector<uint8_t> output;  // grows to the largest bound met, then stays
};

// Builds the job's deferred events (record chunks), then compresses the
// chunk, falling back to storing it when zstd does not make it smaller, and
// frames it (header, checksum, the hash of a blob) into job.encoded.
void encodeJob(Compressor& compressor, int level, Job& job);

// Cap'n Proto's flat form of a message (the segment table: the segment
// count less one, each segment's size in words, padded to a word; then the
// segments) appended to `out`. Written here rather than through
// capnp::writeMessage and a stream, which took 2.5 times the instructions
// for the same bytes; producers run this under their lock. The readers use
// capnp's own parser.
inline void appendFlat(kj::ArrayPtr<const kj::ArrayPtr<const capnp::word>> segments, std::vector<uint8_t>& out) {
  static_assert(std::endian::native == std::endian::little, "the flat form is little-endian");
  const size_t count = segments.size();
  uint32_t table[64];
  const size_t tableWords = count / 2 + 1;
  if (count == 0 || tableWords * 2 > std::size(table)) {
    // More segments than the table here holds: not what an event makes.
    const size_t bytes = capnp::computeSerializedSizeInWords(segments) * sizeof(capnp::word);
    const size_t at = out.size();
    out.resize(at + bytes);
    kj::ArrayOutputStream stream(kj::arrayPtr(reinterpret_cast<kj::byte*>(out.data() + at), bytes));
    capnp::writeMessage(stream, segments);
    return;
  }
  table[0] = static_cast<uint32_t>(count - 1);
  for (size_t i = 0; i < count; ++i) table[i + 1] = static_cast<uint32_t>(segments[i].size());
  if (count % 2 == 0) table[count + 1] = 0;  // padding
  const auto* tableBytes = reinterpret_cast<const uint8_t*>(table);
  out.insert(out.end(), tableBytes, tableBytes + tableWords * sizeof(capnp::word));
  for (const auto& segment : segments) {
    const auto* bytes = reinterpret_cast<const uint8_t*>(segment.begin());
    out.insert(out.end(), bytes, bytes + segment.size() * sizeof(capnp::word));
  }
}

// Encoded buffers kept for reuse, at most `limit` of them: memory a process
// touches for the first time costs a page fault every 4 KiB (piece_memory.h
// says what that costs), here on the compression threads.
class SpareBuffers {
 public:
  explicit SpareBuffers(size_t limit) : limit_(limit) {}
  std::vector<uint8_t> take() {
    std::lock_guard lock(mutex_);
    if (spare_.empty()) return {};
    std::vector<uint8_t> buffer = std::move(spare_.back());
    spare_.pop_back();
    return buffer;
  }
  void giveBack(std::vector<uint8_t>& buffer) {
    std::vector<uint8_t> kept = std::move(buffer);
    buffer = {};
    kept.clear();
    std::lock_guard lock(mutex_);
    if (spare_.size() < limit_) spare_.push_back(std::move(kept));
  }

 private:
  std::mutex mutex_;
  std::vector<std::vector<uint8_t>> spare_;
  const size_t limit_;
};

// Where the writer put each chunk, for the index.
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

// The index chunk's job (not yet encoded): every record and blob chunk
// written, and the event count.
Job indexJob(uint64_t eventCount, const std::vector<ChunkEntry>& chunks, const std::vector<BlobEntry>& blobs);

}  // namespace kcap::format
