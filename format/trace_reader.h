// TraceReader reads a .kcap file, intact or not.
//
// It trusts nothing in the file: every size is checked against the container's
// limits and the file's length before anything is allocated, every payload
// against its checksum before it is decompressed, every event message is fully
// traversed (bounded) before a consumer sees it.
//
// A file closed in an orderly way ends with an index; the reader uses it when
// it is valid. Otherwise (writer killed, file cut, index damaged) it scans the
// chunks from the start. A damaged chunk is skipped: the scan resynchronises on
// the next valid chunk header, so every intact event is still delivered. Each
// damage found is kept as a TraceProblem naming its byte offset.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "container.h"
#include "hash.h"
#include "kcap.capnp.h"

namespace kcap::format {

struct ChunkInfo {
  uint64_t offset = 0;  // file offset of the chunk header
  ChunkKind kind = ChunkKind::kRecords;
  uint64_t storedSize = 0;
  uint64_t rawSize = 0;
  Hash128 hash;             // blob chunks
  uint64_t firstSeq = 0;    // record chunks, when the index is used
  uint32_t eventCount = 0;  // record chunks, when the index is used
};

struct TraceProblem {
  uint64_t offset = 0;  // where the damage is
  std::string message;  // what is wrong, without the path or offset
};

struct EventRef {
  schema::Event::Reader event;
  uint64_t chunkOffset = 0;  // the record chunk holding the event
};

struct ReadScratch;
class WorkerPool;

// The reader's limits beyond the container's (container.h); docs/format.md,
// "Reader limits", says what happens past each.
//
// problems() keeps the first kMaxProblemsKept; the rest are counted.
inline constexpr size_t kMaxProblemsKept = 1000;
// readContent materialises at most this much by default (and never more than
// the machine's memory or the process's address-space limit); larger contents
// are read in windows with readContentInto.
inline constexpr uint64_t kMaxContentInMemory = uint64_t{1} << 36;
// The largest module image a consumer loads whole (real ones are far below).
inline constexpr uint64_t kMaxCodeImageSize = uint64_t{4} << 30;
// The recovery scan hashes the payloads of candidate chunks whose checksums
// then fail for at most kRecoveryHashAllowance + kRecoveryHashFactor bytes per
// byte it has passed; a candidate that would go past that is not verified.
inline constexpr uint64_t kRecoveryHashAllowance = uint64_t{1} << 30;
inline constexpr uint64_t kRecoveryHashFactor = 4;

// Not thread-safe: use one reader per thread. (readContentInto uses threads of
// its own to decode large contents: a pool the reader keeps.)
class TraceReader {
 public:
  struct Options {
    // Read events and single chunks through a read-only mapping of the file
    // rather than into a buffer with pread (pread is used anyway when mmap
    // fails). Memory contents (readContentInto) are always read with pread.
    bool map = true;
    // readContentInto's threads, the caller's included; 0: min(hardware threads, 16).
    unsigned decodeThreads = 0;
  };
  // Throws FormatError when the file cannot be opened, has no valid kcap header,
  // or was written in a newer, unknown format version.
  //
  // A mapped file must not shrink while it is read: each read first checks the
  // file is still as long as when it was opened (and falls back to pread,
  // which reports where the file now ends, when it is not), but a file cut
  // during a read would end the process with SIGBUS.
  static std::unique_ptr<TraceReader> open(const std::string& path, const Options& options);
  static std::unique_ptr<TraceReader> open(const std::string& path) { return open(path, Options{}); }
  ~TraceReader();
  TraceReader(const TraceReader&) = delete;
  TraceReader& operator=(const TraceReader&) = delete;

  const std::string& path() const { return path_; }
  const FileHeader& header() const { return header_; }
  uint64_t fileSize() const { return fileSize_; }
  bool closed() const { return closed_; }    // a valid trailer ends the file: the writer closed it
  bool indexed() const { return indexed_; }  // the footer index was valid and is used
  uint64_t indexedEventCount() const { return indexedEventCount_; }  // from the index; 0 when not indexed
  bool torn() const { return torn_; }                                // the file ends inside a chunk
  const std::vector<ChunkInfo>& chunks() const { return chunks_; }   // record and blob chunks, file order
  // The first kMaxProblemsKept problems met; when there were more, one last
  // entry says how many (at the offset of the first not kept).
  const std::vector<TraceProblem>& problems() const { return problems_; }
  uint64_t problemCount() const { return problemCount_; }  // every distinct problem met, kept or not
  // Payload bytes the recovery scan hashed for candidate chunks whose
  // checksum then failed: its work beyond reading each intact chunk once.
  uint64_t failedChecksumBytes() const { return failedChecksumBytes_; }
  bool mapped() const { return map_ != nullptr; }  // chunks are read through a mapping of the file

  // Delivers every intact event in file order; `fn` returns false to stop.
  // Damaged record chunks are skipped and reported in problems(). Returns the
  // number of events delivered.
  uint64_t forEachEvent(const std::function<bool(const EventRef&)>& fn);

  bool hasBlob(const Hash128& hash) const { return blobs_.count(hash) != 0; }
  const ChunkInfo* findBlob(const Hash128& hash) const {
    auto it = blobs_.find(hash);
    return it == blobs_.end() ? nullptr : &chunks_[it->second];
  }
  size_t blobCount() const { return blobs_.size(); }

  // The bytes of `content`. Throws FormatError naming the piece and offset when
  // a piece is missing, damaged, or not the size the content says, and before
  // allocating anything when the content is larger than `limit` or than this
  // process can hold (the message names the size, as `what`).
  std::vector<uint8_t> readContent(schema::Content::Reader content, uint64_t limit = kMaxContentInMemory,
                                   const char* what = "content");
  // As readContent, into dst[0, content.size). Throws if capacity is smaller.
  // Decodes pieces in parallel, on threads the reader keeps from call to call;
  // checks chunk checksums but not content hashes
  // (verifyChunk does), since the checksum already proves the stored bytes.
  void readContentInto(schema::Content::Reader content, uint8_t* dst, size_t capacity);
  // The verified, decompressed bytes of one piece.
  std::vector<uint8_t> readBlob(const Hash128& hash);
  // One chunk exactly as stored (header and payload), for copying it into
  // another trace without decompressing it. Checks the header against
  // `chunk`, the checksum, and for a blob the hash it names; not the content
  // hash (verifyChunk does). Throws FormatError naming the offset.
  std::vector<uint8_t> readStoredChunk(const ChunkInfo& chunk);

  // Verifies one chunk completely (header, checksum, decompression, and the
  // content hash or every event message). Returns an empty string when intact,
  // else what is wrong (without the path; the chunk's offset says where).
  std::string verifyChunk(const ChunkInfo& chunk);

 private:
  explicit TraceReader(std::string path);
  void loadIndex();
  void scan(uint64_t from);
  std::vector<const ChunkInfo*> locatePieces(schema::Content::Reader content) const;
  bool findNextChunk(uint64_t from, ChunkInfo& found);
  std::string checkHead(uint64_t offset, const uint8_t* head, size_t have, ChunkHeader& header) const;
  bool withinRecoveryBudget(uint64_t offset, uint64_t size) const;
  bool probeChunk(uint64_t offset, const uint8_t* head, size_t have, ChunkInfo& out, std::string& why, bool budgeted);
  std::string loadPayload(const ChunkInfo& chunk, uint8_t* dst, ReadScratch& scratch, bool verifyContent,
                          const uint8_t* map) const;
  const uint8_t* intactMap() const;  // map_ while the file is still fileSize_ long, else nullptr
  std::string loadPayload(const ChunkInfo& chunk, uint8_t* dst);  // verified, decompressed; "" or what is wrong
  void readPayloadInto(const ChunkInfo& chunk, uint8_t* dst);     // the same, throwing FormatError
  void addProblem(uint64_t offset, std::string message);
  void readAt(uint64_t offset, void* dst, size_t size) const;
  std::string tryReadAt(uint64_t& offset, void* dst, size_t size) const;

  std::string path_;
  int fd_ = -1;
  uint64_t fileSize_ = 0;
  uint64_t scanEnd_ = 0;  // a scan stops here: the file end, or a damaged index's start
  FileHeader header_;
  bool closed_ = false;
  bool indexed_ = false;
  uint64_t indexedEventCount_ = 0;
  bool torn_ = false;
  uint64_t scanFrom_ = 0;  // where the scan started: its budget grows with the bytes past it
  uint64_t failedChecksumBytes_ = 0;
  bool budgetSpent_ = false;  // a candidate went unverified for want of budget (said once)
  std::vector<ChunkInfo> chunks_;
  std::unordered_map<Hash128, size_t, Hash128Hasher> blobs_;  // hash -> index in chunks_
  std::vector<TraceProblem> problems_;
  uint64_t problemCount_ = 0;
  std::unordered_set<uint64_t> problemKeys_;  // a hash of each problem met, to report it once
  std::unique_ptr<ReadScratch> scratch_;      // buffers of the calling thread; the reader is not thread-safe
  const uint8_t* map_ = nullptr;              // the file's first fileSize_ bytes, read-only; nullptr: use pread
  unsigned decodeThreads_ = 1;
  std::unique_ptr<WorkerPool> pool_;  // made by the first readContentInto that has use for it
};

}  // namespace kcap::format
