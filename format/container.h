// The byte layout of a .kcap file. Definitions only: no I/O here.
//
//   file    := FileHeader chunk* [index chunk, Trailer]
//   chunk   := ChunkHeader payload[storedSize]
//
// All integers are little-endian. Chunks are appended and never rewritten, so a
// file cut at any byte is a valid prefix followed by one torn chunk. The index
// chunk and trailer are written last, by an orderly close; a reader that finds
// no valid trailer scans the chunks from the start instead.
//
// Chunk kinds:
//   records: payload is a zstd frame of Cap'n Proto messages (standard stream
//            framing), each with root schema::Event, in increasing seq order.
//   blob:    payload is the 16-byte XXH3-128 of the uncompressed piece (high
//            word first) followed by a zstd frame of the piece. A hash appears
//            in at most one blob chunk of a file.
//   index:   payload is a zstd frame of one Cap'n Proto message, root
//            schema::TraceIndex.
//
// Integrity: ChunkHeader.checksum is XXH3-64 of the payload, seeded with the
// XXH3-64 of the header's first 24 bytes, so it covers the header fields too.
// A zstd frame declares its content size, which is the chunk's raw size.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace kcap::format {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the container is written in host order");

inline constexpr std::array<uint8_t, 8> kFileMagic = {0x89, 'K', 'C', 'A', 'P', '\r', '\n', 0x1a};
inline constexpr uint32_t kFormatVersion = 1;
inline constexpr size_t kFileHeaderSize = 48;
inline constexpr size_t kWriterVersionSize = 24;

inline constexpr uint32_t kChunkMagic = 0x4b48434bu;  // "KCHK"
inline constexpr size_t kChunkHeaderSize = 32;
inline constexpr size_t kBlobHashSize = 16;

inline constexpr std::array<uint8_t, 8> kTrailerMagic = {'K', 'C', 'A', 'P', 'I', 'D', 'X', '1'};
inline constexpr size_t kTrailerSize = 24;

// Sanity limits a reader enforces before allocating anything. A writer never
// produces chunks beyond them.
inline constexpr uint64_t kMaxRecordChunkRaw = 256ull << 20;  // one batch of events
inline constexpr uint64_t kMaxBlobRaw = 64ull << 20;          // one memory piece
inline constexpr uint64_t kMaxIndexRaw = 1ull << 30;
// zstd cannot expand a frame more than this: a block yields at most 128 KiB
// and costs at least 4 bytes (an RLE block). A chunk that claims more raw
// bytes than its stored ones can decompress to is refused before its raw size
// is allocated.
inline constexpr uint64_t kMaxZstdExpansion = 32768;
inline constexpr uint32_t kMinPieceSize = 4096;
inline constexpr uint32_t kMaxPieceSize = static_cast<uint32_t>(kMaxBlobRaw);

enum class ChunkKind : uint16_t { kRecords = 1, kBlob = 2, kIndex = 3 };
enum class Codec : uint16_t { kNone = 0, kZstd = 1 };

const char* chunkKindName(ChunkKind kind);

struct FileHeader {
  uint32_t formatVersion = kFormatVersion;
  char writerVersion[kWriterVersionSize] = {};  // NUL-padded, e.g. "kcap 0.1.0"
  // On disk: magic[8] formatVersion:u32 headerSize:u32 writerVersion[24]
  //          checksum:u64 (XXH3-64 of the first 40 bytes)
};

struct ChunkHeader {
  ChunkKind kind = ChunkKind::kRecords;
  Codec codec = Codec::kZstd;
  uint64_t storedSize = 0;  // payload bytes in the file
  uint64_t rawSize = 0;     // payload bytes after decompression (blob: piece size, excluding the hash)
  uint64_t checksum = 0;
  // On disk: magic:u32 kind:u16 codec:u16 storedSize:u64 rawSize:u64 checksum:u64
};

struct Trailer {
  uint64_t indexOffset = 0;  // file offset of the index chunk's header
  // On disk: magic[8] indexOffset:u64 checksum:u64 (XXH3-64 of the first 16 bytes)
};

// Encoding and decoding of the fixed-size parts. decode* return false when the
// bytes are not a valid instance (bad magic or checksum); they never throw.
void encodeFileHeader(const FileHeader& header, uint8_t out[kFileHeaderSize]);
bool decodeFileHeader(const uint8_t in[kFileHeaderSize], FileHeader& header);

// Fills `out` from header, computing nothing: header.checksum must already be
// set (see chunkChecksum).
void encodeChunkHeader(const ChunkHeader& header, uint8_t out[kChunkHeaderSize]);
bool decodeChunkHeader(const uint8_t in[kChunkHeaderSize], ChunkHeader& header);
uint64_t chunkChecksum(const uint8_t encodedHeader[kChunkHeaderSize], const void* payload, size_t size);

void encodeTrailer(const Trailer& trailer, uint8_t out[kTrailerSize]);
bool decodeTrailer(const uint8_t in[kTrailerSize], Trailer& trailer);

}  // namespace kcap::format
