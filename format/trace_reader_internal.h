// Internals shared by the reader's files (trace_reader.cpp: opening,
// payloads, events, contents; trace_locate.cpp: the index and the recovery
// scan). Not part of the library's interface.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <capnp/message.h>
#include "xxhash_dispatch.h"
#include <zstd.h>

#include "container.h"

namespace kcap::format {
namespace reader_internal {

inline uint64_t rawLimit(ChunkKind kind) {
  switch (kind) {
    case ChunkKind::kRecords:
      return kMaxRecordChunkRaw;
    case ChunkKind::kBlob:
      return kMaxBlobRaw;
    case ChunkKind::kIndex:
      return kMaxIndexRaw;
  }
  return 0;
}

// Capnp readers count every word they visit; allow a consumer several passes
// over a message but never unbounded work on a hostile one.
inline capnp::ReaderOptions messageOptions(size_t words) {
  capnp::ReaderOptions options;
  options.traversalLimitInWords = std::max<uint64_t>(words * 16, 1u << 16);
  options.nestingLimit = 64;
  return options;
}

inline std::string sizeText(uint64_t n) { return std::to_string(n) + " bytes"; }

inline uint64_t prefixOf(ChunkKind kind) { return kind == ChunkKind::kBlob ? kBlobHashSize : 0; }

// zstd's largest frame header, and the bytes of a chunk's start the checks
// before its checksum look at: the header, a blob's hash, the frame header.
inline constexpr size_t kZstdFrameHeaderMax = 18;
inline constexpr size_t kProbeHeadSize = kChunkHeaderSize + kBlobHashSize + kZstdFrameHeaderMax;

// Whether `body` stored bytes cannot decompress to `rawSize` (kMaxZstdExpansion).
// A raw body is its own size, so the test holds for either codec.
inline bool beyondExpansion(uint64_t rawSize, uint64_t body) {
  return rawSize / kMaxZstdExpansion + (rawSize % kMaxZstdExpansion != 0) > body;
}

// "" when the zstd frame at `frame` (`have` of its bytes at hand) declares a
// content of `rawSize` bytes, else what is wrong.
inline std::string frameSizeProblem(ChunkKind kind, const uint8_t* frame, size_t have, uint64_t rawSize) {
  const unsigned long long declared = ZSTD_getFrameContentSize(frame, have);
  const std::string chunk = std::string(chunkKindName(kind)) + " chunk";
  if (declared == ZSTD_CONTENTSIZE_ERROR) return chunk + " payload is not a zstd frame";
  if (declared == ZSTD_CONTENTSIZE_UNKNOWN) return chunk + " has a zstd frame that does not declare its size";
  if (declared != rawSize) {
    return chunk + " claims " + sizeText(rawSize) + " uncompressed; its zstd frame holds " + sizeText(declared);
  }
  return {};
}

}  // namespace reader_internal

// What one thread needs to read chunks: a buffer for the stored payload and a
// zstd context, both reused from chunk to chunk.
struct ReadScratch {
  std::vector<uint8_t> staging;  // the stored chunk, when it is read with pread
  std::vector<uint8_t> block;    // a block of a candidate chunk's payload, while the scan checksums it
  ZSTD_DCtx* dctx = ZSTD_createDCtx();
  XXH3_state_t* checksumState = XXH3_createState();
  ReadScratch() = default;
  ReadScratch(const ReadScratch&) = delete;
  ReadScratch& operator=(const ReadScratch&) = delete;
  ~ReadScratch() {
    ZSTD_freeDCtx(dctx);
    XXH3_freeState(checksumState);
  }
};

}  // namespace kcap::format
