// File helpers for the trace tests: temporary directories (tmpfs when there is
// one), whole-file I/O, an independent walk of the container layout, and byte
// surgery on traces (checksum repair, uncompressed rewrite).
//
// Nothing here uses TraceReader to decide what a file contains: expectations in
// the tests are computed from the bytes with container.h alone, so a reader bug
// cannot hide itself by also being in the expectation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <capnp/message.h>

#include "container.h"
#include "hash.h"
#include "kcap.capnp.h"

namespace kcap::test {

// A fresh directory, removed (with its files) on destruction. Created under
// /dev/shm when it is usable (the truncation and corruption tests write many
// copies), else under $TMPDIR or /tmp.
class TempDir {
 public:
  explicit TempDir(const std::string& tag = "kcap-test");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

std::vector<uint8_t> readFileBytes(const std::string& path);
void writeFileBytes(const std::string& path, const void* data, size_t size);
inline void writeFileBytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  writeFileBytes(path, bytes.data(), bytes.size());
}

// One chunk as found by walking the bytes from the file header.
struct RawChunk {
  uint64_t offset = 0;
  format::ChunkKind kind = format::ChunkKind::kRecords;
  format::Codec codec = format::Codec::kNone;
  uint64_t storedSize = 0;
  uint64_t rawSize = 0;
  uint64_t end() const { return offset + format::kChunkHeaderSize + storedSize; }
};

struct RawLayout {
  std::vector<RawChunk> chunks;  // every chunk, index chunk included, in file order
  bool hasTrailer = false;       // the file ends with a valid trailer
  uint64_t trailerOffset = 0;
  uint64_t end = 0;  // where the walk stopped (== file size for an intact file)
};

// Walks an intact file's chunks by their headers (no checksums). Stops at the
// first thing that is not a decodable chunk header.
RawLayout walkChunks(const std::vector<uint8_t>& file);

// Recomputes the file header checksum, every decodable chunk header's checksum
// (walking by stored sizes, as long as they stay inside the buffer) and the
// trailer checksum, so that mutated bytes reach the layers behind the checksums.
void fixChecksums(std::vector<uint8_t>& file);

// Writes `events` (in order) and the given blobs as an uncompressed (Codec::kNone)
// trace: blob chunks first, then record chunks of `eventsPerChunk` events, then
// an index and trailer when `withIndex`. The writer never produces such a file;
// it is for tests and fuzz seeds that need the Cap'n Proto bytes unhidden.
struct RawBlob {
  format::Hash128 hash;
  std::vector<uint8_t> bytes;
};
std::vector<uint8_t> buildUncompressedTrace(const std::vector<std::vector<uint8_t>>& eventMessages,
                                            const std::vector<RawBlob>& blobs, size_t eventsPerChunk, bool withIndex);

// Events of a trace, copied out of the reader so they outlive it.
struct OwnedEvent {
  std::unique_ptr<capnp::MallocMessageBuilder> message;
  uint64_t chunkOffset = 0;
  schema::Event::Reader get() const { return message->getRoot<schema::Event>().asReader(); }
};
std::vector<OwnedEvent> readAllEvents(const std::string& path);

// Every Content an event references, in schema order: module images (and extra
// images), memcpy data, launch pre snapshots, launchEnd post snapshots, a graph
// launch's pre snapshots and host copies, graphLaunchEnd post snapshots.
void forEachContent(schema::Event::Reader event, const std::function<void(schema::Content::Reader)>& fn);

// The flat Cap'n Proto bytes of one event (as the writer frames it).
std::vector<uint8_t> eventBytes(schema::Event::Reader event);

// Rewrites a trace as buildUncompressedTrace does, reading it with TraceReader
// (the source must be intact).
void rewriteUncompressed(const std::string& from, const std::string& to, size_t eventsPerChunk, bool withIndex);

// The same, passing each event to `change` as a copy it may edit (it returns
// true when it did): how tests make traces with valid checksums and hostile
// contents. `extraBlobs` are written besides the source's. Returns the seq of
// the last event changed, 0 if none.
uint64_t rewriteEvents(const std::string& from, const std::string& to,
                       const std::function<bool(schema::Event::Builder)>& change, size_t eventsPerChunk = 4,
                       bool withIndex = true, const std::vector<RawBlob>& extraBlobs = {});

}  // namespace kcap::test
