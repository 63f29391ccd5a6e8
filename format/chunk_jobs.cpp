#include "chunk_jobs.h"

#include <cstring>
#include <exception>
#include <memory>

#include <capnp/message.h>

namespace kcap::format {

namespace {

// Compresses `raw` to the end of `out`, falling back to storing it when zstd
// does not make it smaller (already-compressed or random memory).
Codec compressInto(Compressor& compressor, int level, const uint8_t* raw, size_t size, std::vector<uint8_t>& out) {
  const size_t bound = ZSTD_compressBound(size);
  size_t n = size;
  if (compressor.cctx != nullptr) {
    if (compressor.output.size() < bound) compressor.output.resize(bound);
    n = ZSTD_compressCCtx(compressor.cctx, compressor.output.data(), bound, raw, size, level);
  }
  Codec codec = Codec::kZstd;
  if (ZSTD_isError(n) || n >= size) {
    out.insert(out.end(), raw, raw + size);
    codec = Codec::kNone;
  } else {
    out.insert(out.end(), compressor.output.data(), compressor.output.data() + n);
  }
  // Chunks are a piece or a batch of events (1 MiB, 256 KiB by default); one
  // grown by a huge event or piece does not keep its buffer.
  constexpr size_t kKeptOutputBytes = 16u << 20;
  if (compressor.output.size() > kKeptOutputBytes) compressor.output = {};
  return codec;
}

// Builds a record chunk's deferred events into place. An event that cannot
// be built still takes its seq, as a message saying why, so that the chunk
// holds every event it counts.
void buildDeferred(Job& job) {
  if (job.deferred.empty()) return;
  std::vector<uint8_t> raw;
  raw.reserve(job.raw.size() + job.deferredHint + job.deferredHint / 4);
  // One zeroed first segment for all the chunk's messages (each builder
  // zeroes what it used when it is destroyed): no 4 KiB calloc per event.
  constexpr size_t kScratchWords = 512;
  std::unique_ptr<capnp::word[]> scratch(new capnp::word[kScratchWords]());
  size_t from = 0;
  for (DeferredSlot& slot : job.deferred) {
    raw.insert(raw.end(), job.raw.begin() + static_cast<std::ptrdiff_t>(from),
               job.raw.begin() + static_cast<std::ptrdiff_t>(slot.at));
    from = slot.at;
    const size_t first = raw.size();
    for (unsigned part = 0; part < slot.count; ++part) {
      const size_t before = raw.size();
      try {
        capnp::MallocMessageBuilder message(kj::ArrayPtr<capnp::word>(scratch.get(), kScratchWords));
        auto event = message.initRoot<schema::Event>();
        event.setSeq(slot.seq + part);
        slot.event->build(event, part);
        appendFlat(message.getSegmentsForOutput(), raw);
      } catch (const std::exception& e) {
        raw.resize(before);
        capnp::MallocMessageBuilder message(64);
        auto event = message.initRoot<schema::Event>();
        event.setSeq(slot.seq + part);
        auto note = event.initMessage();
        note.setLevel(schema::Message::Level::ERROR);
        note.setText(std::string("an event could not be encoded: ") + e.what());
        appendFlat(message.getSegmentsForOutput(), raw);
      }
    }
    job.deferredBytes += raw.size() - first;
    slot.event.reset();
  }
  raw.insert(raw.end(), job.raw.begin() + static_cast<std::ptrdiff_t>(from), job.raw.end());
  job.raw = std::move(raw);
  job.deferred.clear();
}

}  // namespace

void encodeJob(Compressor& compressor, int level, Job& job) {
  buildDeferred(job);
  size_t prefix = job.kind == ChunkKind::kBlob ? kBlobHashSize : 0;
  ChunkHeader header;
  header.kind = job.kind;
  const bool blob = job.kind == ChunkKind::kBlob;
  const uint8_t* raw = blob ? job.piece.data() : job.raw.data();
  const size_t rawSize = blob ? job.piece.size() : job.raw.size();
  job.encoded.resize(kChunkHeaderSize + prefix);  // filled in below
  header.codec = compressInto(compressor, level, raw, rawSize, job.encoded);
  if (prefix) {
    std::memcpy(job.encoded.data() + kChunkHeaderSize, &job.hash.high, 8);
    std::memcpy(job.encoded.data() + kChunkHeaderSize + 8, &job.hash.low, 8);
  }
  header.storedSize = job.encoded.size() - kChunkHeaderSize;
  header.rawSize = rawSize;
  encodeChunkHeader(header, job.encoded.data());
  header.checksum = chunkChecksum(job.encoded.data(), job.encoded.data() + kChunkHeaderSize, header.storedSize);
  encodeChunkHeader(header, job.encoded.data());
  job.rawSize = rawSize;
}

Job indexJob(uint64_t eventCount, const std::vector<ChunkEntry>& chunkIndex, const std::vector<BlobEntry>& blobIndex) {
  capnp::MallocMessageBuilder message;
  auto index = message.initRoot<schema::TraceIndex>();
  index.setEventCount(eventCount);
  auto chunks = index.initChunks(static_cast<unsigned>(chunkIndex.size()));
  for (unsigned i = 0; i < chunkIndex.size(); ++i) {
    chunks[i].setOffset(chunkIndex[i].offset);
    chunks[i].setFirstSeq(chunkIndex[i].firstSeq);
    chunks[i].setEventCount(chunkIndex[i].eventCount);
    chunks[i].setStoredSize(chunkIndex[i].storedSize);
    chunks[i].setRawSize(chunkIndex[i].rawSize);
  }
  auto blobs = index.initBlobs(static_cast<unsigned>(blobIndex.size()));
  for (unsigned i = 0; i < blobIndex.size(); ++i) {
    blobs[i].initHash().setHigh(blobIndex[i].hash.high);
    blobs[i].getHash().setLow(blobIndex[i].hash.low);
    blobs[i].setOffset(blobIndex[i].offset);
    blobs[i].setStoredSize(blobIndex[i].storedSize);
    blobs[i].setRawSize(blobIndex[i].rawSize);
  }
  Job job;
  job.kind = ChunkKind::kIndex;
  auto words = capnp::messageToFlatArray(message);
  job.raw.assign(words.asBytes().begin(), words.asBytes().end());
  return job;
}

}  // namespace kcap::format
