#include "trace_files.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include <capnp/serialize.h>

#include "trace_reader.h"

namespace kcap::test {
namespace {

bool usableDir(const char* dir) {
  struct stat st {};
  return dir != nullptr && *dir != '\0' && ::stat(dir, &st) == 0 && S_ISDIR(st.st_mode) && ::access(dir, W_OK) == 0;
}

template <typename T>
T getLe(const uint8_t* at) {
  T value;
  std::memcpy(&value, at, sizeof value);
  return value;
}

template <typename T>
void putLe(uint8_t* at, T value) {
  std::memcpy(at, &value, sizeof value);
}

void appendChunk(std::vector<uint8_t>& out, format::ChunkKind kind, const std::vector<uint8_t>& payload,
                 uint64_t rawSize) {
  format::ChunkHeader header;
  header.kind = kind;
  header.codec = format::Codec::kNone;
  header.storedSize = payload.size();
  header.rawSize = rawSize;
  uint8_t bytes[format::kChunkHeaderSize];
  format::encodeChunkHeader(header, bytes);
  header.checksum = format::chunkChecksum(bytes, payload.data(), payload.size());
  format::encodeChunkHeader(header, bytes);
  out.insert(out.end(), bytes, bytes + sizeof bytes);
  out.insert(out.end(), payload.begin(), payload.end());
}

}  // namespace

TempDir::TempDir(const std::string& tag) {
  std::string base = "/tmp";
  if (usableDir("/dev/shm")) {
    base = "/dev/shm";
  } else if (usableDir(::getenv("TMPDIR"))) {
    base = ::getenv("TMPDIR");
  }
  std::string pattern = base + "/" + tag + "-" + std::to_string(::getpid()) + "-XXXXXX";
  std::vector<char> buf(pattern.begin(), pattern.end());
  buf.push_back('\0');
  if (::mkdtemp(buf.data()) == nullptr) {
    throw std::runtime_error("mkdtemp " + pattern + ": " + std::strerror(errno));
  }
  path_ = buf.data();
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

std::vector<uint8_t> readFileBytes(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error(path + ": " + std::strerror(errno));
  std::vector<uint8_t> bytes;
  uint8_t buf[65536];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int e = errno;
      ::close(fd);
      throw std::runtime_error(path + ": " + std::strerror(e));
    }
    if (n == 0) break;
    bytes.insert(bytes.end(), buf, buf + n);
  }
  ::close(fd);
  return bytes;
}

void writeFileBytes(const std::string& path, const void* data, size_t size) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) throw std::runtime_error(path + ": " + std::strerror(errno));
  const auto* p = static_cast<const uint8_t*>(data);
  while (size > 0) {
    ssize_t n = ::write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int e = errno;
      ::close(fd);
      throw std::runtime_error(path + ": write: " + std::strerror(e));
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
  if (::close(fd) != 0) throw std::runtime_error(path + ": close: " + std::strerror(errno));
}

RawLayout walkChunks(const std::vector<uint8_t>& file) {
  RawLayout layout;
  uint64_t offset = format::kFileHeaderSize;
  const uint64_t size = file.size();
  while (offset < size) {
    if (size - offset == format::kTrailerSize) {
      format::Trailer trailer;
      if (format::decodeTrailer(file.data() + offset, trailer)) {
        layout.hasTrailer = true;
        layout.trailerOffset = offset;
        offset = size;
        break;
      }
    }
    if (size - offset < format::kChunkHeaderSize) break;
    format::ChunkHeader header;
    if (!format::decodeChunkHeader(file.data() + offset, header)) break;
    if (header.storedSize > size - offset - format::kChunkHeaderSize) break;
    RawChunk chunk;
    chunk.offset = offset;
    chunk.kind = header.kind;
    chunk.codec = header.codec;
    chunk.storedSize = header.storedSize;
    chunk.rawSize = header.rawSize;
    layout.chunks.push_back(chunk);
    offset = chunk.end();
  }
  layout.end = offset;
  return layout;
}

void fixChecksums(std::vector<uint8_t>& file) {
  const uint64_t size = file.size();
  if (size >= format::kFileHeaderSize) putLe<uint64_t>(file.data() + 40, format::checksum64(file.data(), 40));
  if (size >= format::kFileHeaderSize + format::kTrailerSize &&
      std::memcmp(file.data() + size - format::kTrailerSize, format::kTrailerMagic.data(),
                  format::kTrailerMagic.size()) == 0) {
    uint8_t* t = file.data() + size - format::kTrailerSize;
    putLe<uint64_t>(t + 16, format::checksum64(t, 16));
  }
  uint64_t offset = format::kFileHeaderSize;
  while (offset < size && size - offset >= format::kChunkHeaderSize) {
    uint8_t* at = file.data() + offset;
    format::ChunkHeader header;
    if (!format::decodeChunkHeader(at, header)) break;
    if (header.storedSize > size - offset - format::kChunkHeaderSize) break;
    uint64_t sum = format::chunkChecksum(at, at + format::kChunkHeaderSize, header.storedSize);
    putLe<uint64_t>(at + 24, sum);
    offset += format::kChunkHeaderSize + header.storedSize;
  }
}

std::vector<uint8_t> buildUncompressedTrace(const std::vector<std::vector<uint8_t>>& eventMessages,
                                            const std::vector<RawBlob>& blobs, size_t eventsPerChunk, bool withIndex) {
  if (eventsPerChunk == 0) eventsPerChunk = 1;
  std::vector<uint8_t> out(format::kFileHeaderSize);
  format::FileHeader fileHeader;
  std::strncpy(fileHeader.writerVersion, "kcap test-raw", format::kWriterVersionSize - 1);
  format::encodeFileHeader(fileHeader, out.data());

  struct Ref {
    uint64_t offset, firstSeq, storedSize, rawSize;
    uint32_t count;
  };
  std::vector<Ref> chunkRefs;
  std::vector<std::pair<const RawBlob*, uint64_t>> blobRefs;

  for (const RawBlob& blob : blobs) {
    std::vector<uint8_t> payload(format::kBlobHashSize);
    putLe<uint64_t>(payload.data(), blob.hash.high);
    putLe<uint64_t>(payload.data() + 8, blob.hash.low);
    payload.insert(payload.end(), blob.bytes.begin(), blob.bytes.end());
    blobRefs.emplace_back(&blob, out.size());
    appendChunk(out, format::ChunkKind::kBlob, payload, blob.bytes.size());
  }
  uint64_t eventCount = 0;
  for (size_t first = 0; first < eventMessages.size(); first += eventsPerChunk) {
    size_t last = std::min(eventMessages.size(), first + eventsPerChunk);
    std::vector<uint8_t> payload;
    for (size_t i = first; i < last; ++i) {
      payload.insert(payload.end(), eventMessages[i].begin(), eventMessages[i].end());
    }
    // The seq of the chunk's first event, for the index.
    std::vector<capnp::word> words((eventMessages[first].size() + 7) / 8);
    std::memcpy(words.data(), eventMessages[first].data(), eventMessages[first].size());
    capnp::FlatArrayMessageReader reader(kj::ArrayPtr<const capnp::word>(words.data(), words.size()));
    uint64_t firstSeq = reader.getRoot<schema::Event>().getSeq();
    chunkRefs.push_back({out.size(), firstSeq, payload.size(), payload.size(), static_cast<uint32_t>(last - first)});
    appendChunk(out, format::ChunkKind::kRecords, payload, payload.size());
    eventCount += last - first;
  }
  if (!withIndex) return out;

  capnp::MallocMessageBuilder message;
  auto index = message.initRoot<schema::TraceIndex>();
  index.setEventCount(eventCount);
  auto chunks = index.initChunks(static_cast<unsigned>(chunkRefs.size()));
  for (unsigned i = 0; i < chunkRefs.size(); ++i) {
    chunks[i].setOffset(chunkRefs[i].offset);
    chunks[i].setFirstSeq(chunkRefs[i].firstSeq);
    chunks[i].setEventCount(chunkRefs[i].count);
    chunks[i].setStoredSize(chunkRefs[i].storedSize);
    chunks[i].setRawSize(chunkRefs[i].rawSize);
  }
  auto blobList = index.initBlobs(static_cast<unsigned>(blobRefs.size()));
  for (unsigned i = 0; i < blobRefs.size(); ++i) {
    blobList[i].initHash().setHigh(blobRefs[i].first->hash.high);
    blobList[i].getHash().setLow(blobRefs[i].first->hash.low);
    blobList[i].setOffset(blobRefs[i].second);
    blobList[i].setStoredSize(format::kBlobHashSize + blobRefs[i].first->bytes.size());
    blobList[i].setRawSize(blobRefs[i].first->bytes.size());
  }
  auto flat = capnp::messageToFlatArray(message);
  std::vector<uint8_t> payload(flat.asBytes().begin(), flat.asBytes().end());
  format::Trailer trailer;
  trailer.indexOffset = out.size();
  appendChunk(out, format::ChunkKind::kIndex, payload, payload.size());
  uint8_t bytes[format::kTrailerSize];
  format::encodeTrailer(trailer, bytes);
  out.insert(out.end(), bytes, bytes + sizeof bytes);
  return out;
}

std::vector<OwnedEvent> readAllEvents(const std::string& path) {
  auto reader = format::TraceReader::open(path);
  std::vector<OwnedEvent> events;
  reader->forEachEvent([&](const format::EventRef& ref) {
    OwnedEvent owned;
    owned.message = std::make_unique<capnp::MallocMessageBuilder>();
    owned.message->setRoot(ref.event);
    owned.chunkOffset = ref.chunkOffset;
    events.push_back(std::move(owned));
    return true;
  });
  return events;
}

void forEachContent(schema::Event::Reader event, const std::function<void(schema::Content::Reader)>& fn) {
  switch (event.which()) {
    case schema::Event::MODULE_LOAD: {
      auto m = event.getModuleLoad();
      fn(m.getImage());
      for (auto extra : m.getExtraImages()) fn(extra);
      break;
    }
    case schema::Event::MEMCPY:
      fn(event.getMemcpy().getData());
      break;
    case schema::Event::LAUNCH:
      for (auto range : event.getLaunch().getPre()) fn(range.getContent());
      break;
    case schema::Event::LAUNCH_END:
      for (auto range : event.getLaunchEnd().getPost()) fn(range.getContent());
      break;
    case schema::Event::GRAPH_LAUNCH:
      for (auto range : event.getGraphLaunch().getPre()) fn(range.getContent());
      for (auto copy : event.getGraphLaunch().getHostCopies()) fn(copy.getData());
      break;
    case schema::Event::GRAPH_LAUNCH_END:
      for (auto range : event.getGraphLaunchEnd().getPost()) fn(range.getContent());
      break;
    default:
      break;
  }
}

std::vector<uint8_t> eventBytes(schema::Event::Reader event) {
  capnp::MallocMessageBuilder message;
  message.setRoot(event);
  auto flat = capnp::messageToFlatArray(message);
  return std::vector<uint8_t>(flat.asBytes().begin(), flat.asBytes().end());
}

void rewriteUncompressed(const std::string& from, const std::string& to, size_t eventsPerChunk, bool withIndex) {
  rewriteEvents(
      from, to, [](schema::Event::Builder) { return false; }, eventsPerChunk, withIndex);
}

uint64_t rewriteEvents(const std::string& from, const std::string& to,
                       const std::function<bool(schema::Event::Builder)>& change, size_t eventsPerChunk, bool withIndex,
                       const std::vector<RawBlob>& extraBlobs) {
  auto reader = format::TraceReader::open(from);
  std::vector<std::vector<uint8_t>> events;
  uint64_t changed = 0;
  reader->forEachEvent([&](const format::EventRef& ref) {
    capnp::MallocMessageBuilder message;
    message.setRoot(ref.event);
    if (change(message.getRoot<schema::Event>())) {
      changed = ref.event.getSeq();
      events.push_back(eventBytes(message.getRoot<schema::Event>().asReader()));
    } else {
      events.push_back(eventBytes(ref.event));
    }
    return true;
  });
  std::vector<RawBlob> blobs = extraBlobs;
  for (const auto& chunk : reader->chunks()) {
    if (chunk.kind != format::ChunkKind::kBlob) continue;
    blobs.push_back({chunk.hash, reader->readBlob(chunk.hash)});
  }
  auto bytes = buildUncompressedTrace(events, blobs, eventsPerChunk, withIndex);
  writeFileBytes(to, bytes);
  return changed;
}

}  // namespace kcap::test
