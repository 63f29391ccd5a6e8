// Damaged traces: random byte flips (seeded) anywhere in a copy, a damaged or
// lying footer index, garbage between chunks. The reader must never crash or
// throw anything but FormatError (and that only from open() for a damaged file
// header), must report each damage with its byte offset, and must still
// deliver every event of every intact record chunk, before and after the damage.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <utility>
#include <string>
#include <vector>

#include <capnp/any.h>
#include <capnp/message.h>
#include <capnp/schema.h>
#include <capnp/serialize.h>

#include "errors.h"
#include "sample_trace.h"
#include "trace_files.h"
#include "trace_reader.h"
#include "trace_summary.h"

namespace kcap::test {
namespace {

SampleOptions smallSample() {
  SampleOptions o;
  o.realImages = false;
  o.axpyLaunches = 2;
  o.elements = 512;
  o.weightElements = 512;
  o.batchBytes = 512;
  return o;
}

// The intact trace: its bytes, layout and every event and content.
struct Original {
  std::vector<uint8_t> bytes;
  RawLayout layout;
  std::vector<std::vector<uint8_t>> events;                 // seq -> message bytes
  std::vector<uint64_t> chunkOfSeq;                         // seq -> record chunk offset
  std::vector<std::vector<std::vector<uint8_t>>> contents;  // seq -> contents, forEachContent order
};

Original describe(const std::string& path) {
  Original o;
  o.bytes = readFileBytes(path);
  o.layout = walkChunks(o.bytes);
  auto reader = format::TraceReader::open(path);
  EXPECT_TRUE(reader->problems().empty());
  reader->forEachEvent([&](const format::EventRef& ref) {
    o.events.push_back(eventBytes(ref.event));
    o.chunkOfSeq.push_back(ref.chunkOffset);
    o.contents.emplace_back();
    forEachContent(ref.event, [&](schema::Content::Reader c) { o.contents.back().push_back(reader->readContent(c)); });
    return true;
  });
  return o;
}

// The chunk holding byte `p` (nullptr for the header or trailer).
const RawChunk* chunkAt(const RawLayout& layout, uint64_t p) {
  for (const auto& c : layout.chunks) {
    if (p >= c.offset && p < c.end()) return &c;
  }
  return nullptr;
}

std::string allProblems(const format::TraceReader& reader) {
  std::string out;
  for (const auto& p : reader.problems()) out += "  @" + std::to_string(p.offset) + ": " + p.message + "\n";
  return out;
}

// What one read of a damaged copy found.
struct Outcome {
  bool openFailed = false;
  bool indexed = false;
  std::vector<uint64_t> seqs;
  std::vector<format::TraceProblem> problems;
  std::vector<std::pair<uint64_t, std::string>> badChunks;  // verifyChunk failures
  std::vector<std::string> contentErrors;
};

// Reads `path` the way `kcap check` would, checking the invariants that hold
// for any damage: only FormatError, delivered events identical to the
// originals in seq order, contents either exact or a FormatError.
Outcome readDamaged(const std::string& path, const Original& o) {
  Outcome out;
  std::unique_ptr<format::TraceReader> reader;
  try {
    reader = format::TraceReader::open(path);
  } catch (const format::FormatError& e) {
    out.openFailed = true;
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    return out;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "open threw a non-FormatError: " << e.what();
    out.openFailed = true;
    return out;
  }
  out.indexed = reader->indexed();
  try {
    reader->forEachEvent([&](const format::EventRef& ref) {
      const uint64_t seq = ref.event.getSeq();
      EXPECT_TRUE(out.seqs.empty() || seq > out.seqs.back()) << "seq " << seq << " out of order";
      EXPECT_LT(seq, o.events.size());
      if (seq >= o.events.size()) return false;
      EXPECT_EQ(eventBytes(ref.event), o.events[seq]) << "seq " << seq << " differs from the original";
      EXPECT_EQ(ref.chunkOffset, o.chunkOfSeq[seq]);
      out.seqs.push_back(seq);
      size_t i = 0;
      forEachContent(ref.event, [&](schema::Content::Reader c) {
        try {
          EXPECT_EQ(reader->readContent(c), o.contents[seq][i]) << "seq " << seq << " content " << i;
        } catch (const format::FormatError& e) {
          out.contentErrors.push_back(e.what());
        }
        ++i;
      });
      return true;
    });
  } catch (const std::exception& e) {
    ADD_FAILURE() << "forEachEvent threw: " << e.what();
  }
  for (const auto& chunk : reader->chunks()) {
    std::string why;
    try {
      why = reader->verifyChunk(chunk);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "verifyChunk threw: " << e.what();
    }
    if (!why.empty()) out.badChunks.emplace_back(chunk.offset, why);
  }
  out.problems = reader->problems();
  for (const auto& p : out.problems) {
    EXPECT_LT(p.offset, o.bytes.size());
    EXPECT_FALSE(p.message.empty());
  }
  return out;
}

bool hasProblemAt(const Outcome& out, uint64_t offset) {
  return std::any_of(out.problems.begin(), out.problems.end(),
                     [&](const format::TraceProblem& p) { return p.offset == offset; });
}

// Flips one byte at a time at seeded random positions of a copy of `source`
// and checks exactly what is lost and what is reported.
void flipSingleBytes(const std::string& source, bool indexedSource, int iterations, uint64_t seed) {
  const Original o = describe(source);
  ASSERT_EQ(o.layout.end, o.bytes.size());
  ASSERT_EQ(o.layout.hasTrailer, indexedSource);
  TempDir dir("kcap-corrupt");
  const auto path = dir.file("damaged.kcap");
  writeFileBytes(path, o.bytes);
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  std::mt19937_64 rng(seed);

  for (int it = 0; it < iterations && !::testing::Test::HasFailure(); ++it) {
    const uint64_t p = rng() % o.bytes.size();
    const uint8_t damaged = static_cast<uint8_t>(o.bytes[p] ^ (1 + rng() % 255));
    ASSERT_EQ(::pwrite(fd, &damaged, 1, static_cast<off_t>(p)), 1);
    SCOPED_TRACE("byte " + std::to_string(p) + " of " + std::to_string(o.bytes.size()) + " set to " +
                 std::to_string(damaged) + " (iteration " + std::to_string(it) + ")");
    Outcome out = readDamaged(path, o);
    ASSERT_EQ(::pwrite(fd, &o.bytes[p], 1, static_cast<off_t>(p)), 1);

    if (p < format::kFileHeaderSize) {
      EXPECT_TRUE(out.openFailed) << "damage in the file header went unnoticed";
      continue;
    }
    ASSERT_FALSE(out.openFailed);
    const RawChunk* hit = chunkAt(o.layout, p);
    // Events: all but those of the damaged record chunk, in order.
    std::vector<uint64_t> expected;
    for (uint64_t s = 0; s < o.events.size(); ++s) {
      if (!(hit && hit->kind == format::ChunkKind::kRecords && o.chunkOfSeq[s] == hit->offset)) expected.push_back(s);
    }
    EXPECT_EQ(out.seqs, expected) << "problems:\n"
                                  << [&] {
                                       std::string s;
                                       for (const auto& pr : out.problems)
                                         s += "  @" + std::to_string(pr.offset) + ": " + pr.message + "\n";
                                       return s;
                                     }();

    if (hit == nullptr || hit->kind == format::ChunkKind::kIndex) {
      // Trailer or index: the index is not used; everything is still there.
      EXPECT_FALSE(out.indexed);
      EXPECT_FALSE(out.problems.empty());
      for (const auto& pr : out.problems) EXPECT_GE(pr.offset, o.layout.chunks.back().offset);
      EXPECT_TRUE(out.badChunks.empty());
      EXPECT_TRUE(out.contentErrors.empty());
      continue;
    }
    EXPECT_EQ(out.indexed, indexedSource);
    if (hit->kind == format::ChunkKind::kRecords) {
      EXPECT_TRUE(hasProblemAt(out, hit->offset)) << "no problem reported at byte " << hit->offset;
      EXPECT_TRUE(out.contentErrors.empty());
      if (indexedSource) {
        ASSERT_EQ(out.badChunks.size(), 1u);
        EXPECT_EQ(out.badChunks[0].first, hit->offset);  // verifyChunk names the chunk; its offset says where
        EXPECT_FALSE(out.badChunks[0].second.empty());
      } else {
        EXPECT_TRUE(out.badChunks.empty());  // the scan left the damaged chunk out
      }
    } else {  // a blob
      EXPECT_FALSE(out.contentErrors.empty()) << "nothing noticed the damaged blob";
      if (indexedSource) {
        ASSERT_EQ(out.badChunks.size(), 1u);
        EXPECT_EQ(out.badChunks[0].first, hit->offset);
        EXPECT_FALSE(out.badChunks[0].second.empty());
        for (const auto& e : out.contentErrors) {  // FormatError messages name the path and offset
          EXPECT_NE(e.find("at byte " + std::to_string(hit->offset)), std::string::npos) << e;
        }
      } else {
        EXPECT_TRUE(hasProblemAt(out, hit->offset));
        EXPECT_TRUE(out.badChunks.empty());
        for (const auto& e : out.contentErrors) EXPECT_NE(e.find("missing"), std::string::npos) << e;
      }
    }
  }
  ::close(fd);
}

class Corruption : public ::testing::Test {
 protected:
  void SetUp() override {
    indexed_ = dir_.file("indexed.kcap");
    writeSampleTrace(indexed_, smallSample());
    auto bytes = readFileBytes(indexed_);
    RawLayout layout = walkChunks(bytes);
    ASSERT_TRUE(layout.hasTrailer);
    ASSERT_EQ(layout.chunks.back().kind, format::ChunkKind::kIndex);
    indexOffset_ = layout.chunks.back().offset;
    bytes.resize(indexOffset_);
    scanned_ = dir_.file("scanned.kcap");
    writeFileBytes(scanned_, bytes);
  }
  TempDir dir_;
  std::string indexed_;
  std::string scanned_;
  uint64_t indexOffset_ = 0;
};

TEST_F(Corruption, RandomSingleByteFlipsIndexed) { flipSingleBytes(indexed_, true, 1500, 0x5eed0001); }

TEST_F(Corruption, RandomSingleByteFlipsScanned) { flipSingleBytes(scanned_, false, 1500, 0x5eed0002); }

TEST_F(Corruption, RandomSingleByteFlipsUncompressed) {
  // Uncompressed record chunks: damage lands in Cap'n Proto bytes directly.
  const auto raw = dir_.file("raw.kcap");
  rewriteUncompressed(indexed_, raw, 5, true);
  flipSingleBytes(raw, true, 800, 0x5eed0003);
}

TEST_F(Corruption, RandomBurstsNeverCrash) {
  for (const std::string& source : {indexed_, scanned_}) {
    SCOPED_TRACE(source);
    const Original o = describe(source);
    const auto path = dir_.file("burst.kcap");
    std::mt19937_64 rng(0xb0b0);
    for (int it = 0; it < 300 && !HasFailure(); ++it) {
      auto bytes = o.bytes;
      int flips = 1 + static_cast<int>(rng() % 6);
      for (int f = 0; f < flips; ++f) {
        uint64_t at = rng() % bytes.size();
        uint64_t len = 1 + rng() % (rng() % 4 == 0 ? 200 : 4);
        for (uint64_t k = at; k < std::min<uint64_t>(bytes.size(), at + len); ++k)
          bytes[k] = static_cast<uint8_t>(rng());
      }
      writeFileBytes(path, bytes);
      SCOPED_TRACE("iteration " + std::to_string(it));
      readDamaged(path, o);
    }
  }
}

TEST_F(Corruption, DamagedRecordChunkInTheMiddleResyncs) {
  const Original o = describe(scanned_);
  std::vector<const RawChunk*> records;
  for (const auto& c : o.layout.chunks) {
    if (c.kind == format::ChunkKind::kRecords) records.push_back(&c);
  }
  ASSERT_GE(records.size(), 3u);
  const RawChunk& victim = *records[records.size() / 2];
  for (uint64_t where : {victim.offset, victim.offset + 8, victim.offset + 30, victim.offset + 40, victim.end() - 1}) {
    SCOPED_TRACE("damage at " + std::to_string(where));
    auto bytes = o.bytes;
    bytes[where] ^= 0x40;
    const auto path = dir_.file("middle.kcap");
    writeFileBytes(path, bytes);
    Outcome out = readDamaged(path, o);
    uint64_t before = 0, after = 0;
    for (uint64_t s : out.seqs) (o.chunkOfSeq[s] < victim.offset ? before : after)++;
    uint64_t expectBefore = 0, expectAfter = 0;
    for (uint64_t s = 0; s < o.events.size(); ++s) {
      if (o.chunkOfSeq[s] < victim.offset) ++expectBefore;
      if (o.chunkOfSeq[s] > victim.offset) ++expectAfter;
    }
    EXPECT_EQ(before, expectBefore);
    EXPECT_EQ(after, expectAfter);
    EXPECT_GT(expectAfter, 0u);
    ASSERT_FALSE(out.problems.empty());
    EXPECT_EQ(out.problems[0].offset, victim.offset);
    EXPECT_NE(out.problems[0].message.find("skipped"), std::string::npos) << out.problems[0].message;
  }
}

TEST_F(Corruption, GarbageBetweenChunksIsSkipped) {
  const Original o = describe(scanned_);
  const RawChunk& second = o.layout.chunks.at(o.layout.chunks.size() / 2);
  auto bytes = o.bytes;
  std::mt19937 rng(3);
  std::vector<uint8_t> garbage(1000);
  for (auto& g : garbage) g = static_cast<uint8_t>(rng());
  // A stray chunk magic in the garbage must not fool the resync.
  garbage[100] = 'K';
  garbage[101] = 'C';
  garbage[102] = 'H';
  garbage[103] = 'K';
  bytes.insert(bytes.begin() + static_cast<long>(second.offset), garbage.begin(), garbage.end());
  const auto path = dir_.file("garbage.kcap");
  writeFileBytes(path, bytes);
  auto reader = format::TraceReader::open(path);
  EXPECT_EQ(reader->forEachEvent([](const format::EventRef&) { return true; }), o.events.size());
  ASSERT_EQ(reader->problems().size(), 1u) << allProblems(*reader);
  EXPECT_EQ(reader->problems()[0].offset, second.offset);
  EXPECT_NE(reader->problems()[0].message.find("skipped 1000 bytes"), std::string::npos)
      << reader->problems()[0].message;
  EXPECT_FALSE(reader->torn());
}

TEST_F(Corruption, DamagedFooterIndexFallsBackToScanning) {
  const Original o = describe(indexed_);
  auto bytes = o.bytes;
  bytes[indexOffset_ + format::kChunkHeaderSize + 3] ^= 0x10;  // inside the index payload
  const auto path = dir_.file("badindex.kcap");
  writeFileBytes(path, bytes);
  auto reader = format::TraceReader::open(path);
  EXPECT_FALSE(reader->indexed());
  EXPECT_FALSE(reader->torn());
  ASSERT_FALSE(reader->problems().empty());
  EXPECT_EQ(reader->problems()[0].offset, indexOffset_);
  EXPECT_NE(reader->problems()[0].message.find("footer index unusable"), std::string::npos) << allProblems(*reader);
  EXPECT_NE(reader->problems()[0].message.find("scanned the file instead"), std::string::npos);
  EXPECT_EQ(reader->forEachEvent([](const format::EventRef&) { return true; }), o.events.size());
  size_t blobs = 0;
  for (const auto& c : reader->chunks()) blobs += c.kind == format::ChunkKind::kBlob;
  EXPECT_EQ(blobs, reader->blobCount());
  EXPECT_GT(blobs, 0u);
}

// Replaces the index chunk and trailer of `bytes` with an uncompressed index
// built by `fill` and a trailer pointing at `trailerTarget` (the new index
// chunk when 0).
std::vector<uint8_t> withIndex(std::vector<uint8_t> bytes, uint64_t indexOffset,
                               const std::function<void(schema::TraceIndex::Builder)>& fill,
                               uint64_t trailerTarget = 0) {
  bytes.resize(indexOffset);
  capnp::MallocMessageBuilder message;
  fill(message.initRoot<schema::TraceIndex>());
  auto flat = capnp::messageToFlatArray(message);
  std::vector<uint8_t> payload(flat.asBytes().begin(), flat.asBytes().end());
  format::ChunkHeader header;
  header.kind = format::ChunkKind::kIndex;
  header.codec = format::Codec::kNone;
  header.storedSize = payload.size();
  header.rawSize = payload.size();
  uint8_t h[format::kChunkHeaderSize];
  format::encodeChunkHeader(header, h);
  header.checksum = format::chunkChecksum(h, payload.data(), payload.size());
  format::encodeChunkHeader(header, h);
  bytes.insert(bytes.end(), h, h + sizeof h);
  bytes.insert(bytes.end(), payload.begin(), payload.end());
  format::Trailer trailer;
  trailer.indexOffset = trailerTarget ? trailerTarget : indexOffset;
  uint8_t t[format::kTrailerSize];
  format::encodeTrailer(trailer, t);
  bytes.insert(bytes.end(), t, t + sizeof t);
  return bytes;
}

TEST_F(Corruption, LyingFooterIndexFallsBackToScanning) {
  const Original o = describe(indexed_);
  struct Case {
    const char* name;
    std::function<void(schema::TraceIndex::Builder)> fill;
    uint64_t trailerTarget;
    const char* expect;
  };
  const RawChunk& firstBlob = *std::find_if(o.layout.chunks.begin(), o.layout.chunks.end(),
                                            [](const RawChunk& c) { return c.kind == format::ChunkKind::kBlob; });
  std::vector<Case> cases = {
      {"entry before the first chunk",
       [](schema::TraceIndex::Builder index) {
         auto chunks = index.initChunks(1);
         chunks[0].setOffset(0);
         chunks[0].setStoredSize(10);
       },
       0, "inconsistent"},
      {"entry past the index",
       [&](schema::TraceIndex::Builder index) {
         auto chunks = index.initChunks(1);
         chunks[0].setOffset(indexOffset_ - 10);
         chunks[0].setStoredSize(100);
       },
       0, "inconsistent"},
      {"overlapping entries",
       [&](schema::TraceIndex::Builder index) {
         auto blobs = index.initBlobs(2);
         blobs[0].setOffset(firstBlob.offset);
         blobs[0].setStoredSize(firstBlob.storedSize);
         blobs[1].setOffset(firstBlob.offset + 8);
         blobs[1].setStoredSize(firstBlob.storedSize);
       },
       0, "inconsistent"},
      {"trailer pointing outside the file", [](schema::TraceIndex::Builder) {}, 1ull << 40, "outside the file"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const auto path = dir_.file("lying.kcap");
    writeFileBytes(path, withIndex(o.bytes, indexOffset_, c.fill, c.trailerTarget));
    auto reader = format::TraceReader::open(path);
    EXPECT_FALSE(reader->indexed());
    ASSERT_FALSE(reader->problems().empty());
    EXPECT_NE(reader->problems()[0].message.find("footer index unusable"), std::string::npos) << allProblems(*reader);
    EXPECT_NE(reader->problems()[0].message.find(c.expect), std::string::npos) << allProblems(*reader);
    EXPECT_EQ(reader->forEachEvent([](const format::EventRef&) { return true; }), o.events.size());
  }
}

// KNOWN BUG (format/trace_reader.cpp:224, TraceReader::loadIndex, reject lambda:
// `scanEnd_ = indexOffset`): when a valid trailer points at a chunk that is not
// the index (here the first blob), the fallback scan is cut off at that offset,
// so every event after it is lost although all chunks are intact. The clamp is
// right only when indexOffset really is the start of an index chunk. Disabled
// until fixed.
TEST_F(Corruption, TrailerPointingAtABlobStillScansEverything) {
  const Original o = describe(indexed_);
  const RawChunk& firstBlob = *std::find_if(o.layout.chunks.begin(), o.layout.chunks.end(),
                                            [](const RawChunk& c) { return c.kind == format::ChunkKind::kBlob; });
  const auto path = dir_.file("lying.kcap");
  writeFileBytes(path, withIndex(
                           o.bytes, indexOffset_, [](schema::TraceIndex::Builder) {}, firstBlob.offset));
  auto reader = format::TraceReader::open(path);
  EXPECT_FALSE(reader->indexed());
  ASSERT_FALSE(reader->problems().empty());
  EXPECT_NE(reader->problems()[0].message.find("does not point at an index"), std::string::npos)
      << allProblems(*reader);
  EXPECT_EQ(reader->forEachEvent([](const format::EventRef&) { return true; }), o.events.size());
}

TEST_F(Corruption, ValidRebuiltIndexIsUsed) {
  // Control for the test above: a correct uncompressed index is accepted.
  const auto raw = dir_.file("raw.kcap");
  rewriteUncompressed(indexed_, raw, 7, true);
  auto reader = format::TraceReader::open(raw);
  EXPECT_TRUE(reader->indexed());
  EXPECT_TRUE(reader->problems().empty()) << allProblems(*reader);
  const Original o = describe(indexed_);
  EXPECT_EQ(reader->forEachEvent([](const format::EventRef&) { return true; }), o.events.size());
  for (const auto& c : reader->chunks()) EXPECT_EQ(reader->verifyChunk(c), "");
}

}  // namespace
}  // namespace kcap::test

namespace kcap::test {
namespace {

// KNOWN BUG (format/trace_reader.cpp:177, TraceReader::scan): a chunk header
// whose stored size was damaged so that it reaches past the end of the file is
// taken for a cut ("file ends inside a ... chunk"): the scan sets torn() and
// stops, so the intact chunks after it are never read, contrary to "every
// intact event is still delivered". Disabled until fixed; run with
// --gtest_also_run_disabled_tests to reproduce.
TEST_F(Corruption, OversizedLengthInAMiddleChunkDoesNotHideLaterChunks) {
  // A damaged stored size that points past the end of the file looks like a
  // cut, but intact chunks follow it: the scan must still find them.
  const Original o = describe(scanned_);
  ASSERT_GE(o.layout.chunks.size(), 3u);
  const RawChunk& victim = o.layout.chunks[o.layout.chunks.size() - 2];
  const RawChunk& last = o.layout.chunks.back();
  ASSERT_EQ(last.kind, format::ChunkKind::kRecords);
  auto bytes = o.bytes;
  const uint64_t claimed = bytes.size() - victim.offset - format::kChunkHeaderSize + 1;
  std::memcpy(bytes.data() + victim.offset + 8, &claimed, 8);
  const auto path = dir_.file("oversized.kcap");
  writeFileBytes(path, bytes);
  Outcome out = readDamaged(path, o);
  uint64_t inLast = 0;
  for (uint64_t s : out.seqs) inLast += o.chunkOfSeq[s] == last.offset;
  uint64_t expectLast = 0;
  for (uint64_t s = 0; s < o.events.size(); ++s) expectLast += o.chunkOfSeq[s] == last.offset;
  EXPECT_EQ(inLast, expectLast) << "the intact last chunk was not read";
  EXPECT_TRUE(hasProblemAt(out, victim.offset));
}

}  // namespace
}  // namespace kcap::test

namespace kcap::test {
namespace {

// Cap'n Proto checks a pointer only when a field is read, and an untyped
// walk of a message's pointers (totalSize()) takes a Text without its NUL
// terminator, or a pointer of the wrong kind for its field, as valid. The
// reader's field check reads every field as the schema types it, so such an
// event is reported and never delivered (a consumer's accessor would throw
// kj::Exception from inside it). Each case hides the malformed Text in
// another place: a field of a union member, an element of a list of Text,
// a field of an element of a list of structs.
void expectUnterminatedTextNotDelivered(schema::Event::Builder event,
                                        const std::function<void(schema::Event::Reader)>& read) {
  auto bytes = eventBytes(event.asReader());
  const std::string needle("HELLOTEXT\0", 10);
  auto at = std::search(bytes.begin(), bytes.end(), needle.begin(), needle.end());
  ASSERT_NE(at, bytes.end());
  at[9] = '!';  // the NUL terminator
  TempDir dir;
  const auto path = dir.file("text.kcap");
  writeFileBytes(path, buildUncompressedTrace({bytes}, {}, 1, true));
  auto reader = format::TraceReader::open(path);
  uint64_t delivered = reader->forEachEvent([&](const format::EventRef& ref) {
    try {
      read(ref.event);
    } catch (const kj::Exception& e) {
      ADD_FAILURE() << "a delivered event's accessor threw kj::Exception: " << e.getDescription().cStr();
    }
    return true;
  });
  EXPECT_EQ(delivered, 0u);
  EXPECT_FALSE(reader->problems().empty());
  ASSERT_EQ(reader->chunks().size(), 1u);
  EXPECT_NE(reader->verifyChunk(reader->chunks()[0]), "");
}

TEST(MalformedMessage, UnterminatedTextIsNotDelivered) {
  capnp::MallocMessageBuilder message;
  auto event = message.initRoot<schema::Event>();
  event.initMessage().setText("HELLOTEXT");
  expectUnterminatedTextNotDelivered(event, [](schema::Event::Reader read) { (void)read.getMessage().getText(); });
}

TEST(MalformedMessage, UnterminatedTextInAListOfTextIsNotDelivered) {
  capnp::MallocMessageBuilder message;
  auto event = message.initRoot<schema::Event>();
  auto argv = event.initTraceBegin().initArgv(2);
  argv.set(0, "python");
  argv.set(1, "HELLOTEXT");
  expectUnterminatedTextNotDelivered(event, [](schema::Event::Reader read) {
    for (auto arg : read.getTraceBegin().getArgv()) (void)arg;
  });
}

TEST(MalformedMessage, UnterminatedTextInAListOfStructsIsNotDelivered) {
  capnp::MallocMessageBuilder message;
  auto event = message.initRoot<schema::Event>();
  auto environment = event.initTraceBegin().initEnvironment(2);
  environment[0].setKey("PATH");
  environment[1].setKey("KCAP_MODE");
  environment[1].setValue("HELLOTEXT");
  expectUnterminatedTextNotDelivered(event, [](schema::Event::Reader read) {
    for (auto variable : read.getTraceBegin().getEnvironment()) (void)variable.getValue();
  });
}

// Pointers no schema field types: a newer writer's field (a pointer slot
// past the schema's), or the payload of a union member this build does not
// know. No accessor reads them, but copying the struct copies every pointer
// (the trace summary keeps a copy of the traceBegin, extract writes events
// out), and a malformed one threw kj::Exception from inside that copy. The
// reader walks them without a schema and refuses such an event; a valid one
// (what a newer writer writes) is delivered and copies.
constexpr uint64_t kMarker = 0x6b636170aa55aa55ull;

// A traceBegin event whose struct has one data word and one pointer slot
// more than the schema's: the data word holds kMarker, the pointer a Text.
// `slotWord` replaces that pointer's word; `unknownMember` stores the
// struct as a union member no schema has.
std::vector<uint8_t> eventWithExtraSlot(std::optional<uint64_t> slotWord, bool unknownMember) {
  capnp::MallocMessageBuilder message;
  auto event = message.initRoot<schema::Event>();
  event.initTraceBegin();
  const auto layout = capnp::Schema::from<schema::TraceBegin>().getProto().getStruct();
  const uint16_t dataWords = layout.getDataWordCount(), pointers = layout.getPointerCount();
  const auto eventSchema = capnp::Schema::from<schema::Event>();
  const uint32_t slot = eventSchema.getFieldByName("traceBegin").getProto().getSlot().getOffset();
  auto begin = capnp::AnyStruct::Builder(schema::Event::Builder(event))
                   .getPointerSection()[slot]
                   .initAsAnyStruct(static_cast<uint16_t>(dataWords + 1), static_cast<uint16_t>(pointers + 1));
  std::memcpy(begin.getDataSection().begin() + 8 * dataWords, &kMarker, 8);
  begin.getPointerSection()[pointers].setAs<capnp::Text>("written by a newer kcap");
  if (unknownMember) {
    const auto node = eventSchema.getProto().getStruct();
    const uint16_t unknown = static_cast<uint16_t>(node.getDiscriminantCount() + 7);
    std::memcpy(capnp::AnyStruct::Builder(schema::Event::Builder(event)).getDataSection().begin() +
                    2 * node.getDiscriminantOffset(),
                &unknown, 2);
  }
  auto bytes = eventBytes(event.asReader());
  if (slotWord) {
    const auto* marker = reinterpret_cast<const uint8_t*>(&kMarker);
    auto at = std::search(bytes.begin(), bytes.end(), marker, marker + 8);
    EXPECT_NE(at, bytes.end());
    if (at != bytes.end()) std::memcpy(&*at + 8 + 8 * pointers, &*slotWord, 8);
  }
  return bytes;
}

// (delivered events, whether summarizing the trace threw kj::Exception)
std::pair<uint64_t, bool> readAndSummarize(const std::vector<uint8_t>& eventMessage, std::string* problems) {
  TempDir dir;
  const auto path = dir.file("slot.kcap");
  writeFileBytes(path, buildUncompressedTrace({eventMessage}, {}, 1, true));
  auto reader = format::TraceReader::open(path);
  const uint64_t delivered = reader->forEachEvent([](const format::EventRef&) { return true; });
  for (const auto& p : reader->problems()) *problems += p.message + "\n";
  try {
    auto again = format::TraceReader::open(path);
    const format::TraceSummary summary = format::summarizeTrace(*again);
    EXPECT_EQ(summary.traceBegin().has_value(), delivered == 1);
  } catch (const kj::Exception& e) {
    ADD_FAILURE() << "summarizing threw kj::Exception: " << e.getDescription().cStr();
    return {delivered, true};
  }
  return {delivered, false};
}

TEST(MalformedMessage, ValidPointerInANewerWritersSlotIsDelivered) {
  std::string problems;
  EXPECT_EQ(readAndSummarize(eventWithExtraSlot(std::nullopt, false), &problems).first, 1u) << problems;
  EXPECT_EQ(problems, "");
}

TEST(MalformedMessage, MalformedPointerInANewerWritersSlotIsNotDelivered) {
  const std::pair<const char*, uint64_t> words[] = {
      {"a pointer of no kind (OTHER, not a capability)", 0x7},
      {"a capability pointer", 0x3},
      {"a struct pointer far past the segment's end", (uint64_t{1} << 32) | (uint64_t{0x3fffff00} << 2)},
      {"a list pointer far past the segment's end", 0x0000100100000001ull | (uint64_t{0x3fffff00} << 2)},
  };
  for (const auto& [what, word] : words) {
    for (const bool unknownMember : {false, true}) {
      SCOPED_TRACE(std::string(what) + (unknownMember ? ", in a union member this build does not know" : ""));
      std::string problems;
      const auto [delivered, threw] = readAndSummarize(eventWithExtraSlot(word, unknownMember), &problems);
      EXPECT_EQ(delivered, 0u);
      EXPECT_FALSE(threw);
      EXPECT_NE(problems.find("malformed"), std::string::npos) << problems;
    }
  }
}

}  // namespace
}  // namespace kcap::test
