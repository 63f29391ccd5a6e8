#include <cstring>
#include <stdexcept>

#include "hostile_files.h"

#include <capnp/serialize.h>
#include <zstd.h>

namespace kcap::test {

std::vector<uint8_t> fileHeaderBytes() {
  std::vector<uint8_t> out(format::kFileHeaderSize);
  format::FileHeader header;
  std::strncpy(header.writerVersion, "kcap hostile-test", format::kWriterVersionSize - 1);
  format::encodeFileHeader(header, out.data());
  return out;
}

void appendChunk(std::vector<uint8_t>& out, format::ChunkKind kind, format::Codec codec,
                 const std::vector<uint8_t>& payload, uint64_t rawSize, bool validChecksum) {
  format::ChunkHeader header;
  header.kind = kind;
  header.codec = codec;
  header.storedSize = payload.size();
  header.rawSize = rawSize;
  uint8_t bytes[format::kChunkHeaderSize];
  format::encodeChunkHeader(header, bytes);
  header.checksum = format::chunkChecksum(bytes, payload.data(), payload.size()) + (validChecksum ? 0 : 1);
  format::encodeChunkHeader(header, bytes);
  out.insert(out.end(), bytes, bytes + sizeof bytes);
  out.insert(out.end(), payload.begin(), payload.end());
}

void appendTrailer(std::vector<uint8_t>& out, uint64_t indexOffset) {
  format::Trailer trailer;
  trailer.indexOffset = indexOffset;
  uint8_t bytes[format::kTrailerSize];
  format::encodeTrailer(trailer, bytes);
  out.insert(out.end(), bytes, bytes + sizeof bytes);
}

std::vector<uint8_t> zstdFrame(const void* raw, size_t size) {
  std::vector<uint8_t> out(ZSTD_compressBound(size));
  const size_t n = ZSTD_compress(out.data(), out.size(), raw, size, 1);
  if (ZSTD_isError(n)) throw std::runtime_error(std::string("zstd: ") + ZSTD_getErrorName(n));
  out.resize(n);
  return out;
}

std::vector<uint8_t> flatBytes(capnp::MessageBuilder& message) {
  auto words = capnp::messageToFlatArray(message);
  auto bytes = words.asBytes();
  return {bytes.begin(), bytes.end()};
}

std::vector<uint8_t> messageEvent(uint64_t seq) {
  capnp::MallocMessageBuilder message;
  auto event = message.initRoot<schema::Event>();
  event.setSeq(seq);
  if (seq == 0) {
    event.initTraceBegin().setHostName("hostile");
  } else {
    event.initMessage().setText("event " + std::to_string(seq));
  }
  return flatBytes(message);
}

std::vector<std::vector<uint8_t>> messageEvents(uint64_t first, uint64_t count) {
  std::vector<std::vector<uint8_t>> events;
  for (uint64_t seq = first; seq < first + count; ++seq) events.push_back(messageEvent(seq));
  return events;
}

std::vector<uint8_t> traceEndEvent(uint64_t seq) {
  capnp::MallocMessageBuilder message;
  auto event = message.initRoot<schema::Event>();
  event.setSeq(seq);
  event.initTraceEnd().setEventCount(seq);
  return flatBytes(message);
}

std::vector<uint8_t> concat(const std::vector<std::vector<uint8_t>>& events) {
  std::vector<uint8_t> out;
  for (const auto& e : events) out.insert(out.end(), e.begin(), e.end());
  return out;
}

TraceBuilder::TraceBuilder() : bytes_(fileHeaderBytes()) {}

void TraceBuilder::records(const std::vector<std::vector<uint8_t>>& events, uint64_t firstSeq) {
  const std::vector<uint8_t> raw = concat(events);
  const std::vector<uint8_t> frame = zstdFrame(raw.data(), raw.size());
  records_.push_back({bytes_.size(), frame.size(), raw.size(), firstSeq, static_cast<uint32_t>(events.size()), {}});
  appendChunk(bytes_, format::ChunkKind::kRecords, format::Codec::kZstd, frame, raw.size());
  events_ += events.size();
}

void TraceBuilder::blob(const std::vector<uint8_t>& bytes) {
  const format::Hash128 hash = format::contentHash(bytes.data(), bytes.size());
  std::vector<uint8_t> payload(format::kBlobHashSize);
  putLe<uint64_t>(payload.data(), hash.high);
  putLe<uint64_t>(payload.data() + 8, hash.low);
  const std::vector<uint8_t> frame = zstdFrame(bytes.data(), bytes.size());
  payload.insert(payload.end(), frame.begin(), frame.end());
  blobs_.push_back({bytes_.size(), payload.size(), bytes.size(), 0, 0, hash});
  appendChunk(bytes_, format::ChunkKind::kBlob, format::Codec::kZstd, payload, bytes.size());
}

std::vector<uint8_t> TraceBuilder::finish(bool withIndex) {
  std::vector<uint8_t> out = bytes_;
  if (!withIndex) return out;
  capnp::MallocMessageBuilder message;
  auto index = message.initRoot<schema::TraceIndex>();
  index.setEventCount(events_);
  auto chunks = index.initChunks(static_cast<unsigned>(records_.size()));
  for (unsigned i = 0; i < records_.size(); ++i) {
    chunks[i].setOffset(records_[i].offset);
    chunks[i].setFirstSeq(records_[i].firstSeq);
    chunks[i].setEventCount(records_[i].events);
    chunks[i].setStoredSize(records_[i].storedSize);
    chunks[i].setRawSize(records_[i].rawSize);
  }
  auto blobs = index.initBlobs(static_cast<unsigned>(blobs_.size()));
  for (unsigned i = 0; i < blobs_.size(); ++i) {
    blobs[i].initHash().setHigh(blobs_[i].hash.high);
    blobs[i].getHash().setLow(blobs_[i].hash.low);
    blobs[i].setOffset(blobs_[i].offset);
    blobs[i].setStoredSize(blobs_[i].storedSize);
    blobs[i].setRawSize(blobs_[i].rawSize);
  }
  const std::vector<uint8_t> raw = flatBytes(message);
  const std::vector<uint8_t> frame = zstdFrame(raw.data(), raw.size());
  const uint64_t indexAt = out.size();
  appendChunk(out, format::ChunkKind::kIndex, format::Codec::kZstd, frame, raw.size());
  appendTrailer(out, indexAt);
  return out;
}

}  // namespace kcap::test
