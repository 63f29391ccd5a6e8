// A trace cut at every byte offset: the reader never crashes, recovers exactly
// the events of the record chunks that are complete before the cut, says the
// file is torn when the cut is inside a chunk, and every content those events
// reference is present (the writer puts pieces before the events using them).
#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "errors.h"
#include "sample_trace.h"
#include "trace_files.h"
#include "trace_reader.h"

namespace kcap::test {
namespace {

SampleOptions smallSample() {
  SampleOptions o;
  o.realImages = false;  // keeps the file small: every offset is tried
  o.axpyLaunches = 2;
  o.elements = 256;
  o.weightElements = 256;
  o.batchBytes = 512;
  return o;
}

struct Original {
  std::vector<uint8_t> bytes;
  RawLayout layout;
  std::map<uint64_t, uint64_t> eventsInChunk;  // record chunk offset -> events
  std::vector<uint64_t> chunkOfSeq;            // seq -> record chunk offset
};

Original describe(const std::string& path) {
  Original o;
  o.bytes = readFileBytes(path);
  o.layout = walkChunks(o.bytes);
  for (const auto& e : readAllEvents(path)) {
    EXPECT_EQ(e.get().getSeq(), o.chunkOfSeq.size());
    o.chunkOfSeq.push_back(e.chunkOffset);
    o.eventsInChunk[e.chunkOffset]++;
  }
  return o;
}

void checkEveryCut(const std::string& source, bool checkContentsOften) {
  const Original o = describe(source);
  ASSERT_EQ(o.layout.end, o.bytes.size()) << "the source must be intact";
  size_t records = 0;
  for (const auto& c : o.layout.chunks) records += c.kind == format::ChunkKind::kRecords;
  ASSERT_GE(records, 4u) << "want several record chunks";
  ASSERT_EQ(o.chunkOfSeq.size(), std::accumulate(o.eventsInChunk.begin(), o.eventsInChunk.end(), uint64_t{0},
                                                 [](uint64_t a, const auto& kv) { return a + kv.second; }));

  std::set<uint64_t> boundaries = {format::kFileHeaderSize, o.bytes.size()};
  for (const auto& c : o.layout.chunks) boundaries.insert(c.end());

  TempDir dir("kcap-trunc");
  const auto path = dir.file("cut.kcap");
  writeFileBytes(path, o.bytes);
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);

  // Longest first: each cut is one ftruncate of the same file.
  for (uint64_t cut = o.bytes.size() + 1; cut-- > 0;) {
    ASSERT_EQ(::ftruncate(fd, static_cast<off_t>(cut)), 0);
    SCOPED_TRACE("cut at " + std::to_string(cut) + " of " + std::to_string(o.bytes.size()));
    if (cut < format::kFileHeaderSize) {
      try {
        format::TraceReader::open(path);
        ADD_FAILURE() << "open succeeded";
      } catch (const format::FormatError& e) {
        EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
      }
      continue;
    }
    std::unique_ptr<format::TraceReader> reader;
    try {
      reader = format::TraceReader::open(path);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "open threw: " << e.what();
      continue;
    }
    uint64_t expected = 0;
    for (const auto& c : o.layout.chunks) {
      if (c.kind == format::ChunkKind::kRecords && c.end() <= cut) expected += o.eventsInChunk.at(c.offset);
    }
    const bool atBoundary = boundaries.count(cut) != 0;
    EXPECT_EQ(reader->torn(), !atBoundary);
    EXPECT_EQ(reader->indexed(), cut == o.bytes.size());
    if (!atBoundary) {
      const uint64_t chunkStart = *std::prev(boundaries.lower_bound(cut));
      ASSERT_FALSE(reader->problems().empty());
      EXPECT_EQ(reader->problems().back().offset, chunkStart);
      EXPECT_FALSE(reader->problems().back().message.empty());
    }

    uint64_t seq = 0;
    const bool readContents = checkContentsOften || cut % 61 == 0 || atBoundary;
    try {
      reader->forEachEvent([&](const format::EventRef& ref) {
        EXPECT_EQ(ref.event.getSeq(), seq);
        if (seq < o.chunkOfSeq.size()) {
          EXPECT_EQ(ref.chunkOffset, o.chunkOfSeq[seq]);
        }
        forEachContent(ref.event, [&](schema::Content::Reader content) {
          for (auto p : content.getPieces()) {
            EXPECT_TRUE(reader->hasBlob({p.getHigh(), p.getLow()})) << "seq " << seq << " lacks a piece";
          }
          if (readContents) {
            EXPECT_EQ(reader->readContent(content).size(), content.getSize());
          }
        });
        ++seq;
        return true;
      });
    } catch (const std::exception& e) {
      ADD_FAILURE() << "reading threw: " << e.what();
    }
    EXPECT_EQ(seq, expected);
    for (const auto& chunk : reader->chunks()) EXPECT_EQ(reader->verifyChunk(chunk), "") << chunk.offset;
    if (::testing::Test::HasFailure()) break;  // one cut's report is enough
  }
  ::close(fd);
}

TEST(Truncation, EveryByteOffsetOfAnIndexedTrace) {
  TempDir dir;
  const auto path = dir.file("sample.kcap");
  writeSampleTrace(path, smallSample());
  checkEveryCut(path, false);
}

TEST(Truncation, EveryByteOffsetOfAnUncompressedTrace) {
  // Without compression the record payloads are plain Cap'n Proto, so a cut
  // lands inside message bytes rather than a zstd frame.
  TempDir dir;
  const auto sample = dir.file("sample.kcap");
  auto options = smallSample();
  options.axpyLaunches = 1;
  options.elements = 64;
  options.weightElements = 64;
  writeSampleTrace(sample, options);
  const auto raw = dir.file("raw.kcap");
  rewriteUncompressed(sample, raw, 6, true);
  checkEveryCut(raw, false);
}

TEST(Truncation, KilledWriterWithoutIndex) {
  TempDir dir;
  const auto path = dir.file("killed.kcap");
  auto options = smallSample();
  options.orderly = false;
  writeSampleTrace(path, options);
  auto reader = format::TraceReader::open(path);
  EXPECT_FALSE(reader->indexed());
  EXPECT_FALSE(reader->torn());
  EXPECT_TRUE(reader->problems().empty());
  uint64_t n = reader->forEachEvent([](const format::EventRef& ref) { return !ref.event.isTraceEnd(); });
  EXPECT_EQ(n, sampleEventCount(options));
}

}  // namespace
}  // namespace kcap::test
