#include "container.h"

#include "hash.h"

namespace kcap::format {
namespace {

template <typename T>
void put(uint8_t* at, T value) {
  std::memcpy(at, &value, sizeof value);
}
template <typename T>
T get(const uint8_t* at) {
  T value;
  std::memcpy(&value, at, sizeof value);
  return value;
}

}  // namespace

const char* chunkKindName(ChunkKind kind) {
  switch (kind) {
    case ChunkKind::kRecords:
      return "records";
    case ChunkKind::kBlob:
      return "blob";
    case ChunkKind::kIndex:
      return "index";
  }
  return "unknown";
}

void encodeFileHeader(const FileHeader& header, uint8_t out[kFileHeaderSize]) {
  std::memcpy(out, kFileMagic.data(), kFileMagic.size());
  put<uint32_t>(out + 8, header.formatVersion);
  put<uint32_t>(out + 12, static_cast<uint32_t>(kFileHeaderSize));
  std::memcpy(out + 16, header.writerVersion, kWriterVersionSize);
  put<uint64_t>(out + 40, checksum64(out, 40));
}

bool decodeFileHeader(const uint8_t in[kFileHeaderSize], FileHeader& header) {
  if (std::memcmp(in, kFileMagic.data(), kFileMagic.size()) != 0) return false;
  if (get<uint32_t>(in + 12) != kFileHeaderSize) return false;
  if (get<uint64_t>(in + 40) != checksum64(in, 40)) return false;
  header.formatVersion = get<uint32_t>(in + 8);
  std::memcpy(header.writerVersion, in + 16, kWriterVersionSize);
  header.writerVersion[kWriterVersionSize - 1] = '\0';
  return true;
}

void encodeChunkHeader(const ChunkHeader& header, uint8_t out[kChunkHeaderSize]) {
  put<uint32_t>(out, kChunkMagic);
  put<uint16_t>(out + 4, static_cast<uint16_t>(header.kind));
  put<uint16_t>(out + 6, static_cast<uint16_t>(header.codec));
  put<uint64_t>(out + 8, header.storedSize);
  put<uint64_t>(out + 16, header.rawSize);
  put<uint64_t>(out + 24, header.checksum);
}

bool decodeChunkHeader(const uint8_t in[kChunkHeaderSize], ChunkHeader& header) {
  if (get<uint32_t>(in) != kChunkMagic) return false;
  uint16_t kind = get<uint16_t>(in + 4);
  uint16_t codec = get<uint16_t>(in + 6);
  if (kind < 1 || kind > 3 || codec > 1) return false;
  header.kind = static_cast<ChunkKind>(kind);
  header.codec = static_cast<Codec>(codec);
  header.storedSize = get<uint64_t>(in + 8);
  header.rawSize = get<uint64_t>(in + 16);
  header.checksum = get<uint64_t>(in + 24);
  return true;
}

uint64_t chunkChecksum(const uint8_t encodedHeader[kChunkHeaderSize], const void* payload, size_t size) {
  return checksum64(payload, size, checksum64(encodedHeader, 24));
}

void encodeTrailer(const Trailer& trailer, uint8_t out[kTrailerSize]) {
  std::memcpy(out, kTrailerMagic.data(), kTrailerMagic.size());
  put<uint64_t>(out + 8, trailer.indexOffset);
  put<uint64_t>(out + 16, checksum64(out, 16));
}

bool decodeTrailer(const uint8_t in[kTrailerSize], Trailer& trailer) {
  if (std::memcmp(in, kTrailerMagic.data(), kTrailerMagic.size()) != 0) return false;
  if (get<uint64_t>(in + 16) != checksum64(in, 16)) return false;
  trailer.indexOffset = get<uint64_t>(in + 8);
  return true;
}

}  // namespace kcap::format
