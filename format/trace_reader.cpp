#include "trace_reader.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <thread>

#include <capnp/serialize.h>
#include "xxhash_dispatch.h"
#include <zstd.h>

#include "errors.h"
#include "message_check.h"
#include "trace_reader_internal.h"
#include "worker_pool.h"

namespace kcap::format {

using namespace reader_internal;

namespace {

// Consumers read a message that passed checkEventFields: a full traversal of it
// fit in messageOptions' budget, so this one allows many such passes.
capnp::ReaderOptions consumerOptions(size_t words) {
  capnp::ReaderOptions options = messageOptions(words);
  options.traversalLimitInWords *= 64;
  return options;
}

// The size of the next message, from its segment table (bounded by what is left).
size_t messageWords(kj::ArrayPtr<const capnp::word> rest) {
  return std::min<size_t>(capnp::expectedSizeInWordsFromPrefix(rest), rest.size());
}

// The most this process can hold: the machine's memory, or less where an
// address-space or data limit says so.
uint64_t memoryCeiling() {
  uint64_t ceiling = ~uint64_t{0};
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0) ceiling = static_cast<uint64_t>(pages) * static_cast<uint64_t>(page);
  for (int resource : {RLIMIT_AS, RLIMIT_DATA}) {
    struct rlimit limit {};
    if (::getrlimit(resource, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
      ceiling = std::min<uint64_t>(ceiling, limit.rlim_cur);
    }
  }
  return ceiling;
}

// Maps the pages of map[offset, offset + size) in one call rather than a page
// fault every few pages: a fresh mapping read by every core otherwise spends
// more time in faults than in checking and copying (docs/benchmarks.md).
// False when the pages cannot be had (the file was cut meanwhile: reading
// them would raise SIGBUS); true too where the kernel has no
// MADV_POPULATE_READ (before Linux 5.14), where faults then do the work.
bool populate(const uint8_t* map, uint64_t offset, uint64_t size) {
#ifdef MADV_POPULATE_READ
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const uint64_t start = offset / page * page;
  if (::madvise(const_cast<uint8_t*>(map) + start, offset + size - start, MADV_POPULATE_READ) != 0) {
    return errno == EINVAL || errno == EINTR;
  }
#else
  (void)map, (void)offset, (void)size;
#endif
  return true;
}

}  // namespace

TraceReader::TraceReader(std::string path) : path_(std::move(path)), scratch_(std::make_unique<ReadScratch>()) {}

TraceReader::~TraceReader() {
  pool_.reset();  // before the mapping goes (in a forked child it leaves the parent's threads alone)
  if (map_ != nullptr) ::munmap(const_cast<uint8_t*>(map_), fileSize_);
  if (fd_ >= 0) ::close(fd_);
}

std::unique_ptr<TraceReader> TraceReader::open(const std::string& path, const Options& options) {
  std::unique_ptr<TraceReader> reader(new TraceReader(path));
  unsigned threads = options.decodeThreads;
  if (threads == 0) threads = std::clamp(std::thread::hardware_concurrency(), 1u, 16u);
  reader->decodeThreads_ = threads;
  reader->fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (reader->fd_ < 0) throw FormatError(path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(reader->fd_, &st) != 0) throw FormatError(path + ": cannot stat: " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) throw FormatError(path + ": not a regular file");
  reader->fileSize_ = static_cast<uint64_t>(st.st_size);
  if (options.map && reader->fileSize_ > 0) {
    // Only the bytes the file has now are mapped, and every read is checked
    // against fileSize_ first, so no page past the end is ever touched.
    void* p = ::mmap(nullptr, reader->fileSize_, PROT_READ, MAP_SHARED, reader->fd_, 0);
    if (p != MAP_FAILED) reader->map_ = static_cast<const uint8_t*>(p);
  }
  if (reader->fileSize_ < kFileHeaderSize) {
    throw FormatError(path + ": not a kcap trace: " + sizeText(reader->fileSize_) + ", shorter than the " +
                      std::to_string(kFileHeaderSize) + "-byte header");
  }
  uint8_t bytes[kFileHeaderSize];
  reader->readAt(0, bytes, sizeof bytes);
  if (std::memcmp(bytes, kFileMagic.data(), kFileMagic.size()) != 0) {
    throw FormatError(path + ": not a kcap trace (no kcap magic at byte 0)");
  }
  if (!decodeFileHeader(bytes, reader->header_)) {
    throw FormatError(describeAt(path, 0, "the file header is damaged (checksum mismatch)"));
  }
  if (reader->header_.formatVersion > kFormatVersion || reader->header_.formatVersion == 0) {
    throw FormatError(path + ": written in trace format " + std::to_string(reader->header_.formatVersion) + " by '" +
                      reader->header_.writerVersion + "'; this kcap reads format " + std::to_string(kFormatVersion) +
                      " and older");
  }
  reader->scanEnd_ = reader->fileSize_;
  reader->loadIndex();
  if (!reader->indexed_) reader->scan(kFileHeaderSize);
  return reader;
}

void TraceReader::readAt(uint64_t offset, void* dst, size_t size) const {
  uint64_t failedAt = offset;
  std::string why = tryReadAt(failedAt, dst, size);
  if (!why.empty()) throw FormatError(describeAt(path_, failedAt, why));
}

// As readAt, returning what went wrong (and setting `offset` to where) instead of throwing.
std::string TraceReader::tryReadAt(uint64_t& offset, void* dst, size_t size) const {
  auto* out = static_cast<uint8_t*>(dst);
  while (size > 0) {
    ssize_t n = ::pread(fd_, out, size, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::string("read failed: ") + std::strerror(errno);
    if (n == 0) return "unexpected end of file";
    out += n;
    offset += static_cast<uint64_t>(n);
    size -= static_cast<size_t>(n);
  }
  return {};
}

void TraceReader::addProblem(uint64_t offset, std::string message) {
  // The same damage can be met twice (scan, then a read); report it once. A
  // set of hashes rather than a search of the list: a hostile file can hold a
  // problem every few dozen bytes, and only the first ones are kept.
  if (!problemKeys_.insert(checksum64(message.data(), message.size(), offset)).second) return;
  ++problemCount_;
  if (problemCount_ <= kMaxProblemsKept) {
    problems_.push_back({offset, std::move(message)});
    return;
  }
  const uint64_t more = problemCount_ - kMaxProblemsKept;
  std::string summary = std::to_string(more) + " more problem" + (more == 1 ? "" : "s") +
                        " from here on, not listed (the reader keeps the first " + std::to_string(kMaxProblemsKept) +
                        ")";
  if (more == 1) {
    problems_.push_back({offset, std::move(summary)});
  } else {
    problems_.back().message = std::move(summary);
  }
}

// Reads one chunk's payload into dst[0, chunk.rawSize), verifying the header
// against what the scan or index said, the checksum and the decompressed size,
// and with `verifyContent` a blob's content hash too. Returns what is wrong,
// or "" when intact. The checksum already proves the stored bytes are the
// written ones; re-hashing the content checks the writer, which `kcap check`
// (verifyChunk) does and bulk reads of memory skip.
//
// With `map` (the file's mapping, still fileSize_ long) the stored bytes are
// checked and decoded where they are, with no copy; else a raw body is read
// with pread straight into dst, a compressed one into the scratch buffer.
std::string TraceReader::loadPayload(const ChunkInfo& chunk, uint8_t* dst, ReadScratch& scratch, bool verifyContent,
                                     const uint8_t* map) const {
  // Written so that no subtraction wraps: the mapping must not be read past
  // fileSize_ whatever the sizes say.
  if (chunk.storedSize > fileSize_ - kChunkHeaderSize ||
      chunk.offset > fileSize_ - kChunkHeaderSize - chunk.storedSize) {
    return "chunk extends past the end of the file";
  }
  if (map != nullptr && !populate(map, chunk.offset, kChunkHeaderSize + chunk.storedSize)) {
    map = nullptr;  // pread says what is wrong
  }
  const size_t prefix = chunk.kind == ChunkKind::kBlob ? kBlobHashSize : 0;
  if (chunk.storedSize < prefix) return "blob chunk too short";
  // pread of [at, at + size): "" or what went wrong, and where (the file was
  // cut or failed since it was opened).
  const auto read = [&](uint64_t at, uint8_t* into, size_t size) {
    std::string why = tryReadAt(at, into, size);
    return why.empty()
               ? why
               : why + " at byte " + std::to_string(at) + ", inside this " + chunkKindName(chunk.kind) + " chunk";
  };
  // The header and the blob's hash: from the mapping, or read on their own so
  // that a raw body can then be read straight into dst.
  uint8_t head[kChunkHeaderSize + kBlobHashSize];
  const uint8_t* stored = map != nullptr ? map + chunk.offset : head;
  if (map == nullptr) {
    if (std::string why = read(chunk.offset, head, kChunkHeaderSize + prefix); !why.empty()) return why;
  }
  ChunkHeader header;
  if (!decodeChunkHeader(stored, header) || header.kind != chunk.kind || header.storedSize != chunk.storedSize ||
      header.rawSize != chunk.rawSize) {
    return "chunk header is damaged or not what the index says";
  }
  const std::string damaged = std::string(chunkKindName(chunk.kind)) + " chunk is damaged (checksum mismatch)";
  const size_t bodySize = chunk.storedSize - prefix;
  const uint8_t* payload = stored + kChunkHeaderSize;  // the blob's hash, then the body (when mapped)
  if (header.codec == Codec::kNone) {
    if (bodySize != chunk.rawSize) return "stored size mismatch";
    // Checksummed and copied (or read) a cache-sized block at a time, so that
    // the stored bytes come from memory once, not once for each. dst holds
    // unchecked bytes until the end; on a mismatch it is garbage, as the
    // caller expects of a failed read.
    constexpr size_t kBlock = 256 << 10;
    XXH3_state_t* state = scratch.checksumState;
    if (state == nullptr || XXH3_64bits_reset_withSeed(state, checksum64(stored, 24)) != XXH_OK ||
        XXH3_64bits_update(state, payload, prefix) != XXH_OK) {
      return "cannot compute a checksum";
    }
    for (size_t at = 0; at < bodySize; at += kBlock) {
      const size_t n = std::min(kBlock, bodySize - at);
      if (map != nullptr) {
        std::memcpy(dst + at, payload + prefix + at, n);
      } else {
        // pread copies from the page cache with no page of the file mapped
        // here: cheaper than faulting a fresh mapping in (docs/benchmarks.md).
        if (std::string why = read(chunk.offset + kChunkHeaderSize + prefix + at, dst + at, n); !why.empty())
          return why;
      }
      XXH3_64bits_update(state, dst + at, n);
    }
    if (XXH3_64bits_digest(state) != header.checksum) return damaged;
  } else {
    if (map == nullptr) {
      std::vector<uint8_t>& staging = scratch.staging;
      staging.resize(kChunkHeaderSize + chunk.storedSize);
      std::memcpy(staging.data(), head, kChunkHeaderSize + prefix);
      if (std::string why =
              read(chunk.offset + kChunkHeaderSize + prefix, staging.data() + kChunkHeaderSize + prefix, bodySize);
          !why.empty()) {
        return why;
      }
      stored = staging.data();
      payload = stored + kChunkHeaderSize;
    }
    if (chunkChecksum(stored, payload, chunk.storedSize) != header.checksum) return damaged;
    if (std::string why = frameSizeProblem(chunk.kind, payload + prefix, bodySize, chunk.rawSize); !why.empty()) {
      return why;
    }
    size_t n = ZSTD_decompressDCtx(scratch.dctx, dst, chunk.rawSize, payload + prefix, bodySize);
    if (ZSTD_isError(n) || n != chunk.rawSize) {
      return std::string(chunkKindName(chunk.kind)) + " chunk does not decompress to " + sizeText(chunk.rawSize) +
             (ZSTD_isError(n) ? std::string(": ") + ZSTD_getErrorName(n) : std::string());
    }
  }
  if (chunk.kind == ChunkKind::kBlob) {
    Hash128 hash;
    std::memcpy(&hash.high, payload, 8);
    std::memcpy(&hash.low, payload + 8, 8);
    if (!(hash == chunk.hash) || (verifyContent && !(contentHash(dst, chunk.rawSize) == hash))) {
      return "blob content does not match its hash " + chunk.hash.hex();
    }
  }
  return {};
}

std::string TraceReader::loadPayload(const ChunkInfo& chunk, uint8_t* dst) {
  return loadPayload(chunk, dst, *scratch_, true, intactMap());
}

// One fstat a read: a file cut since it was opened is then read with pread,
// which says where it ends now, instead of faulting on the mapping.
const uint8_t* TraceReader::intactMap() const {
  if (map_ == nullptr) return nullptr;
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || static_cast<uint64_t>(st.st_size) < fileSize_) return nullptr;
  return map_;
}

void TraceReader::readPayloadInto(const ChunkInfo& chunk, uint8_t* dst) {
  std::string why = loadPayload(chunk, dst);
  if (!why.empty()) throw FormatError(describeAt(path_, chunk.offset, why));
}

uint64_t TraceReader::forEachEvent(const std::function<bool(const EventRef&)>& fn) {
  uint64_t delivered = 0;
  std::vector<capnp::word> words;
  for (const ChunkInfo& chunk : chunks_) {
    if (chunk.kind != ChunkKind::kRecords) continue;
    if (chunk.rawSize % sizeof(capnp::word) != 0) {
      addProblem(chunk.offset, "record chunk size is not a whole number of message words");
      continue;
    }
    words = std::vector<capnp::word>(chunk.rawSize / sizeof(capnp::word));  // capnp::word is not movable: no resize()
    std::string why = loadPayload(chunk, reinterpret_cast<uint8_t*>(words.data()));
    if (!why.empty()) {
      addProblem(chunk.offset, why);
      continue;
    }
    kj::ArrayPtr<const capnp::word> rest(words.data(), words.size());
    uint32_t number = 0;
    while (rest.size() > 0) {
      std::unique_ptr<capnp::FlatArrayMessageReader> message;
      schema::Event::Reader event;
      try {
        // A malformed or amplifying message (pointers sharing targets, so that
        // reading it costs far more than its size) throws here, within a
        // bounded traversal, not later in a consumer...
        capnp::FlatArrayMessageReader checked(rest, messageOptions(messageWords(rest)));
        checkEventFields(checked.getRoot<schema::Event>());
        kj::ArrayPtr<const capnp::word> body(rest.begin(), checked.getEnd());
        // ...and the consumer reads a fresh reader of the same words whose
        // traversal budget a few passes of its own cannot exhaust.
        message = std::make_unique<capnp::FlatArrayMessageReader>(body, consumerOptions(body.size()));
        event = message->getRoot<schema::Event>();
        rest = kj::ArrayPtr<const capnp::word>(checked.getEnd(), rest.end());
      } catch (const kj::Exception& e) {
        addProblem(chunk.offset, "event message " + std::to_string(number) +
                                     " of this record chunk is malformed: " + e.getDescription().cStr());
        break;
      }
      ++number;
      ++delivered;
      if (!fn(EventRef{event, chunk.offset})) return delivered;
    }
  }
  return delivered;
}

std::vector<uint8_t> TraceReader::readBlob(const Hash128& hash) {
  auto it = blobs_.find(hash);
  if (it == blobs_.end()) throw FormatError(path_ + ": no blob " + hash.hex() + " in this trace");
  const ChunkInfo& chunk = chunks_[it->second];
  std::vector<uint8_t> bytes(chunk.rawSize);
  readPayloadInto(chunk, bytes.data());
  return bytes;
}

std::vector<uint8_t> TraceReader::readStoredChunk(const ChunkInfo& chunk) {
  const auto fail = [&](const std::string& why) { throw FormatError(describeAt(path_, chunk.offset, why)); };
  if (chunk.storedSize > fileSize_ - kChunkHeaderSize ||
      chunk.offset > fileSize_ - kChunkHeaderSize - chunk.storedSize) {
    fail("chunk extends past the end of the file");
  }
  if (chunk.rawSize > rawLimit(chunk.kind)) fail("chunk is larger than the format allows");
  std::vector<uint8_t> bytes(kChunkHeaderSize + chunk.storedSize);
  readAt(chunk.offset, bytes.data(), bytes.size());
  ChunkHeader header;
  if (!decodeChunkHeader(bytes.data(), header) || header.kind != chunk.kind || header.storedSize != chunk.storedSize ||
      header.rawSize != chunk.rawSize) {
    fail("chunk header is damaged or not what the index says");
  }
  if (chunkChecksum(bytes.data(), bytes.data() + kChunkHeaderSize, chunk.storedSize) != header.checksum) {
    fail(std::string(chunkKindName(chunk.kind)) + " chunk is damaged (checksum mismatch)");
  }
  if (chunk.kind == ChunkKind::kBlob) {
    if (chunk.storedSize < kBlobHashSize) fail("blob chunk too short");
    Hash128 hash;
    std::memcpy(&hash.high, bytes.data() + kChunkHeaderSize, 8);
    std::memcpy(&hash.low, bytes.data() + kChunkHeaderSize + 8, 8);
    if (!(hash == chunk.hash)) fail("blob chunk names hash " + hash.hex() + ", not " + chunk.hash.hex());
  }
  return bytes;
}

// Checks that every piece of `content` is in the file with the right size,
// before anything is allocated or read. Returns the chunk of each piece.
std::vector<const ChunkInfo*> TraceReader::locatePieces(schema::Content::Reader content) const {
  uint64_t size = content.getSize();
  uint64_t pieceSize = content.getPieceSize();
  auto pieces = content.getPieces();
  if (size == 0) return {};
  if (pieceSize == 0 || pieces.size() != size / pieceSize + (size % pieceSize != 0)) {
    throw FormatError(path_ + ": content of " + sizeText(size) + " lists " + std::to_string(pieces.size()) +
                      " pieces of " + sizeText(pieceSize));
  }
  std::vector<const ChunkInfo*> located;
  located.reserve(pieces.size());
  Hash128 previous;
  const ChunkInfo* previousChunk = nullptr;
  for (unsigned i = 0; i < pieces.size(); ++i) {
    Hash128 hash{pieces[i].getHigh(), pieces[i].getLow()};
    uint64_t offset = uint64_t{i} * pieceSize;
    uint64_t length = std::min(pieceSize, size - offset);
    // Runs of one piece (zero pages) are common, and a content can list
    // millions: look each run up once.
    const ChunkInfo* chunk = previousChunk != nullptr && hash == previous ? previousChunk : findBlob(hash);
    previous = hash;
    previousChunk = chunk;
    if (!chunk) {
      throw FormatError(path_ + ": piece " + std::to_string(i) + " (bytes " + std::to_string(offset) + "+" +
                        std::to_string(length) + ", blob " + hash.hex() + ") is missing from the trace");
    }
    if (chunk->rawSize != length) {
      throw FormatError(describeAt(path_, chunk->offset,
                                   "blob " + hash.hex() + " holds " + sizeText(chunk->rawSize) + ", piece " +
                                       std::to_string(i) + " needs " + sizeText(length)));
    }
    located.push_back(chunk);
  }
  return located;
}

void TraceReader::readContentInto(schema::Content::Reader content, uint8_t* dst, size_t capacity) {
  if (content.getSize() > capacity) {
    throw FormatError(path_ + ": content of " + sizeText(content.getSize()) + " does not fit in " + sizeText(capacity));
  }
  std::vector<const ChunkInfo*> pieces = locatePieces(content);
  uint64_t pieceSize = content.getPieceSize();
  // Pieces are read with pread (no mapping given to loadPayload): copying
  // them from the page cache measured faster than mapping its pages into
  // this process (docs/benchmarks.md, replay throughput).
  // Pieces are independent zstd frames: decode them on several threads, as
  // restoring gigabytes of device memory for a replay would otherwise be
  // bound by one core's decompression speed.
  const bool forked = pool_ && pool_->owner() != ::getpid();
  if (pieces.size() < 2 || decodeThreads_ <= 1 || forked) {
    for (size_t i = 0; i < pieces.size(); ++i) {
      std::string why = loadPayload(*pieces[i], dst + i * pieceSize, *scratch_, false, nullptr);
      if (!why.empty()) throw FormatError(describeAt(path_, pieces[i]->offset, why));
    }
    return;
  }
  // The decoding threads are made once and kept, with their buffers and zstd
  // contexts, for the reader's life. (Making threads and buffers anew for
  // every 64 MiB window of a restore cost more than it gained on a 16-core
  // host: docs/benchmarks.md.)
  if (!pool_) pool_ = std::make_unique<WorkerPool>(decodeThreads_ - 1, "kcap-read");
  std::atomic<bool> failed{false};
  std::mutex failureMutex;
  std::string failure;  // the first problem met, with its location
  pool_->forEach(pieces.size(), [&](size_t i) {
    if (failed.load(std::memory_order_relaxed)) return;  // the read has failed: skip what is left
    // Each thread's own buffers and contexts, kept from call to call (the
    // pool's threads live as long as the reader).
    thread_local ReadScratch scratch;
    std::string why;
    try {
      why = loadPayload(*pieces[i], dst + i * pieceSize, scratch, false, nullptr);
    } catch (const std::exception& e) {  // an I/O error from readAt, or no memory
      why = e.what();
    } catch (...) {
      why = "unknown error";
    }
    if (why.empty()) return;
    std::lock_guard lock(failureMutex);
    if (failure.empty()) failure = describeAt(path_, pieces[i]->offset, why);
    failed = true;
  });
  if (!failure.empty()) throw FormatError(failure);
}

std::vector<uint8_t> TraceReader::readContent(schema::Content::Reader content, uint64_t limit, const char* what) {
  locatePieces(content);  // every piece exists: the size is backed by the file
  // Deduplication lets a few kilobytes of file name any size: refused here,
  // before a byte of it is allocated.
  const uint64_t size = content.getSize();
  if (size > limit) {
    throw FormatError(path_ + ": " + what + " of " + sizeText(size) + " is over the limit of " + sizeText(limit) +
                      " that kcap reads into memory at once");
  }
  if (const uint64_t ceiling = memoryCeiling(); size > ceiling) {
    throw FormatError(path_ + ": " + what + " of " + sizeText(size) + " does not fit in this process's memory (" +
                      sizeText(ceiling) + ")");
  }
  try {
    std::vector<uint8_t> bytes(size);
    readContentInto(content, bytes.data(), bytes.size());
    return bytes;
  } catch (const std::bad_alloc&) {
    throw FormatError(path_ + ": " + what + " of " + sizeText(size) + " does not fit in memory");
  }
}

std::string TraceReader::verifyChunk(const ChunkInfo& chunk) {
  if (chunk.rawSize > rawLimit(chunk.kind) || chunk.storedSize < prefixOf(chunk.kind) ||
      beyondExpansion(chunk.rawSize, chunk.storedSize - prefixOf(chunk.kind))) {
    return std::string(chunkKindName(chunk.kind)) + " chunk claims " + sizeText(chunk.rawSize) + " from " +
           sizeText(chunk.storedSize) + " stored";
  }
  try {
    std::vector<capnp::word> words((chunk.rawSize + 7) / 8);
    std::string why = loadPayload(chunk, reinterpret_cast<uint8_t*>(words.data()));
    if (!why.empty() || chunk.kind != ChunkKind::kRecords) return why;
    if (chunk.rawSize % sizeof(capnp::word) != 0) return "record chunk size is not a whole number of message words";
    kj::ArrayPtr<const capnp::word> rest(words.data(), words.size());
    uint32_t number = 0;
    while (rest.size() > 0) {
      try {
        capnp::FlatArrayMessageReader message(rest, messageOptions(messageWords(rest)));
        checkEventFields(message.getRoot<schema::Event>());
        rest = kj::ArrayPtr<const capnp::word>(message.getEnd(), rest.end());
      } catch (const kj::Exception& e) {
        return "event message " + std::to_string(number) + " is malformed: " + e.getDescription().cStr();
      }
      ++number;
    }
    if (chunk.eventCount != 0 && number != chunk.eventCount) {
      return "record chunk holds " + std::to_string(number) + " events, the index says " +
             std::to_string(chunk.eventCount);
    }
    return {};
  } catch (const FormatError& e) {  // an I/O error from readAt
    return e.what();
  }
}

}  // namespace kcap::format
