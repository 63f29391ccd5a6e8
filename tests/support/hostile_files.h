// Builders of hostile traces for the reader and `kcap check` tests: chunks
// written byte by byte with valid checksums (or wrong ones on purpose) and
// whatever sizes the test wants them to claim, zstd frames, small events.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <capnp/message.h>

#include "container.h"
#include "hash.h"
#include "kcap.capnp.h"

namespace kcap::test {

template <typename T>
void putLe(uint8_t* at, T value) {
  std::memcpy(at, &value, sizeof value);
}

std::vector<uint8_t> fileHeaderBytes();

// Appends a chunk whose checksum holds (with `validChecksum` false, is off by
// one), whatever its sizes claim.
void appendChunk(std::vector<uint8_t>& out, format::ChunkKind kind, format::Codec codec,
                 const std::vector<uint8_t>& payload, uint64_t rawSize, bool validChecksum = true);
void appendTrailer(std::vector<uint8_t>& out, uint64_t indexOffset);

std::vector<uint8_t> zstdFrame(const void* raw, size_t size);
std::vector<uint8_t> flatBytes(capnp::MessageBuilder& message);

// traceBegin for seq 0, else a message event.
std::vector<uint8_t> messageEvent(uint64_t seq);
std::vector<std::vector<uint8_t>> messageEvents(uint64_t first, uint64_t count);
std::vector<uint8_t> traceEndEvent(uint64_t seq);
// The payload of a record chunk holding `events`.
std::vector<uint8_t> concat(const std::vector<std::vector<uint8_t>>& events);

// A trace built chunk by chunk, compressed with zstd, with a footer index
// that lists what was appended.
class TraceBuilder {
 public:
  TraceBuilder();
  // One record chunk of `events` (each a flat message), the first of seq `firstSeq`.
  void records(const std::vector<std::vector<uint8_t>>& events, uint64_t firstSeq);
  void blob(const std::vector<uint8_t>& bytes);
  std::vector<uint8_t> finish(bool withIndex);

 private:
  struct Ref {
    uint64_t offset, storedSize, rawSize, firstSeq;
    uint32_t events;
    format::Hash128 hash;
  };
  std::vector<uint8_t> bytes_;
  std::vector<Ref> records_, blobs_;
  uint64_t events_ = 0;
};

}  // namespace kcap::test
