// Hostile traces: small files, checksums valid, built to cost the reader time
// or memory out of proportion to their size (fake chunk headers to resync on,
// sizes that decompression cannot back, index entries whose sums wrap,
// contents that claim gigabytes through deduplicated pieces, more damage than
// is worth keeping). The reader must bound its work and memory by what the
// file can hold, refuse the rest naming where, and still deliver what is
// intact.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <ostream>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <zstd.h>

#include "container.h"
#include "errors.h"
#include "hostile_files.h"
#include "trace_files.h"
#include "trace_reader.h"

namespace kcap::test {
namespace {

using format::ChunkKind;
using format::Codec;

constexpr uint64_t kMiB = 1ull << 20;

std::vector<uint64_t> deliveredSeqs(format::TraceReader& reader) {
  std::vector<uint64_t> seqs;
  reader.forEachEvent([&](const format::EventRef& ref) {
    seqs.push_back(ref.event.getSeq());
    return true;
  });
  return seqs;
}

std::string allProblems(const format::TraceReader& reader) {
  std::string out;
  for (const auto& p : reader.problems()) out += "  @" + std::to_string(p.offset) + ": " + p.message + "\n";
  return out;
}

bool hasProblem(const format::TraceReader& reader, uint64_t offset, const std::string& text) {
  for (const auto& p : reader.problems()) {
    if (p.offset == offset && p.message.find(text) != std::string::npos) return true;
  }
  return false;
}

uint64_t statusKiB(const char* key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) == 0) return std::stoull(line.substr(std::strlen(key)));
  }
  return 0;
}

// How far the process's peak resident memory rose above its resident memory
// while `fn` ran, in bytes. Writing 5 to clear_refs resets the peak (VmHWM).
uint64_t peakGrowth(const std::function<void()>& fn) {
  {
    std::ofstream clear("/proc/self/clear_refs");
    clear << "5";
  }
  const uint64_t before = statusKiB("VmRSS:");
  EXPECT_LE(statusKiB("VmHWM:"), before + 1024) << "the peak resident memory was not reset";
  fn();
  const uint64_t peak = statusKiB("VmHWM:");
  return (peak > before ? peak - before : 0) * 1024;
}

// ---------------------------------------------------------------------------
// The recovery scan: fake chunk headers every `stride` bytes with no trailer,
// each plausible (sizes within the limits, payload inside the file) and each
// claiming the rest of the fake region as its payload, checksums wrong. Every
// candidate the scan meets must be ruled out without re-reading and hashing
// megabytes for each.

struct FakeHeaders {
  uint64_t regionBytes;
  Codec codec;
  uint64_t stride;
};

void PrintTo(const FakeHeaders& p, std::ostream* os) {
  *os << p.regionBytes << " bytes of " << (p.codec == Codec::kZstd ? "zstd" : "raw") << " headers every " << p.stride;
}

class RecoveryScan : public ::testing::TestWithParam<FakeHeaders> {};

TEST_P(RecoveryScan, WorkIsBoundedByTheFileSize) {
  const FakeHeaders p = GetParam();
  TempDir dir;
  const auto path = dir.file("fakes.kcap");
  // Two intact events, then the fake headers, then one more intact chunk.
  std::vector<uint8_t> file = buildUncompressedTrace(messageEvents(0, 2), {}, 2, false);
  const uint64_t fakesStart = file.size();
  const uint64_t fakesEnd = fakesStart + p.regionBytes;
  file.resize(fakesEnd);
  for (uint64_t at = fakesStart; at + p.stride <= fakesEnd; at += p.stride) {
    format::ChunkHeader header;
    header.kind = ChunkKind::kRecords;
    header.codec = p.codec;
    header.storedSize = fakesEnd - at - format::kChunkHeaderSize;
    header.rawSize = header.storedSize;
    header.checksum = 0x5eed + at;
    uint8_t* h = file.data() + at;
    format::encodeChunkHeader(header, h);
    if (p.codec == Codec::kZstd) {
      // A zstd frame header that declares what the chunk header says.
      header.rawSize = std::min<uint64_t>(header.storedSize * 64, format::kMaxRecordChunkRaw);
      format::encodeChunkHeader(header, h);
      uint8_t* frame = h + format::kChunkHeaderSize;
      putLe<uint32_t>(frame, ZSTD_MAGICNUMBER);
      frame[4] = 0xe0;  // frame header descriptor: 8-byte content size, single segment
      putLe<uint64_t>(frame + 5, header.rawSize);
      ASSERT_EQ(ZSTD_getFrameContentSize(frame, 13), header.rawSize);
    }
  }
  appendChunk(file, ChunkKind::kRecords, Codec::kNone, concat(messageEvents(2, 1)), concat(messageEvents(2, 1)).size());
  writeFileBytes(path, file);

  const auto start = std::chrono::steady_clock::now();
  auto reader = format::TraceReader::open(path);
  const auto seqs = deliveredSeqs(*reader);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  // The checksum work spent on candidates that failed stays within the
  // reader's stated budget for a file of this size, whatever the candidates
  // claim (the quadratic scan hashed each candidate's claim: terabytes here).
  EXPECT_LE(reader->failedChecksumBytes(), format::kRecoveryHashAllowance + format::kRecoveryHashFactor * file.size());
  EXPECT_LT(seconds, 30.0) << "a scan of " << file.size() << " bytes";
  // The intact chunks on both sides are read: the fakes near the end claim
  // little, so the chunk after them is still within the budget.
  EXPECT_EQ(seqs, (std::vector<uint64_t>{0, 1, 2})) << allProblems(*reader);
  EXPECT_TRUE(hasProblem(*reader, fakesStart, "checksum mismatch")) << allProblems(*reader);
}

INSTANTIATE_TEST_SUITE_P(FakeHeaders, RecoveryScan,
                         ::testing::Values(FakeHeaders{1 * kMiB, Codec::kNone, 32},
                                           FakeHeaders{16 * kMiB, Codec::kNone, 32},
                                           FakeHeaders{16 * kMiB, Codec::kZstd, 64}),
                         [](const ::testing::TestParamInfo<FakeHeaders>& param) {
                           return std::to_string(param.param.regionBytes / kMiB) + "MiB" +
                                  (param.param.codec == Codec::kZstd ? "Zstd" : "Raw") + "Every" +
                                  std::to_string(param.param.stride);
                         });

// A damaged chunk followed by intact ones: the scan still resyncs on every
// intact chunk (the budget is never what decides an ordinary file).
TEST(HostileReader, DamagedChunksAmongIntactOnesAreSkippedOneByOne) {
  TempDir dir;
  const auto path = dir.file("damaged.kcap");
  std::vector<uint8_t> file = fileHeaderBytes();
  std::vector<uint64_t> damagedAt;
  for (uint64_t seq = 0; seq < 40; ++seq) {
    const auto payload = concat(messageEvents(seq, 1));
    if (seq % 4 == 3) damagedAt.push_back(file.size());
    appendChunk(file, ChunkKind::kRecords, Codec::kNone, payload, payload.size(), seq % 4 != 3);
  }
  writeFileBytes(path, file);
  auto reader = format::TraceReader::open(path);
  const auto seqs = deliveredSeqs(*reader);
  std::vector<uint64_t> expected;
  for (uint64_t seq = 0; seq < 40; ++seq) {
    if (seq % 4 != 3) expected.push_back(seq);
  }
  EXPECT_EQ(seqs, expected) << allProblems(*reader);
  for (uint64_t at : damagedAt) EXPECT_TRUE(hasProblem(*reader, at, "checksum mismatch")) << allProblems(*reader);
}

// ---------------------------------------------------------------------------
// Sizes from chunk headers are checked against what the stored bytes can
// decompress to before anything of that size is allocated.

// A records chunk claiming 256 MiB: its payload a real zstd frame that
// declares 10000 bytes, or the first 64 bytes of a frame that declares
// 256 MiB (which zstd cannot produce from so few).
TEST(HostileReader, RecordChunkLargerThanItsFrameIsRefusedBeforeAllocating) {
  TempDir dir;
  std::vector<uint8_t> noise(10000);
  std::mt19937 rng(25);
  for (auto& b : noise) b = static_cast<uint8_t>(rng());  // incompressible: the frame stays over 8 KiB
  const std::vector<uint8_t> zeros(format::kMaxRecordChunkRaw, 0);
  std::vector<uint8_t> whole = zstdFrame(zeros.data(), zeros.size());
  const std::vector<uint8_t> cut(whole.begin(), whole.begin() + 64);
  struct Case {
    const char* name;
    std::vector<uint8_t> payload;
    const char* expect;
  };
  const std::vector<Case> cases = {{"frame of 10000 bytes", zstdFrame(noise.data(), noise.size()), "10000 bytes"},
                                   {"64 bytes of a 256 MiB frame", cut, "64 bytes"}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const auto path = dir.file("claim.kcap");
    std::vector<uint8_t> file = buildUncompressedTrace(messageEvents(0, 1), {}, 1, false);
    const uint64_t hostileAt = file.size();
    appendChunk(file, ChunkKind::kRecords, Codec::kZstd, c.payload, format::kMaxRecordChunkRaw);
    appendChunk(file, ChunkKind::kRecords, Codec::kNone, concat(messageEvents(1, 1)),
                concat(messageEvents(1, 1)).size());
    writeFileBytes(path, file);
    std::unique_ptr<format::TraceReader> reader;
    std::vector<uint64_t> seqs;
    std::string verdict;
    const uint64_t grew = peakGrowth([&] {
      reader = format::TraceReader::open(path);
      seqs = deliveredSeqs(*reader);
      for (const auto& chunk : reader->chunks()) verdict += reader->verifyChunk(chunk);
    });
    EXPECT_LT(grew, 32 * kMiB) << "reading a file of " << file.size() << " bytes";
    EXPECT_EQ(seqs, (std::vector<uint64_t>{0, 1})) << allProblems(*reader);
    EXPECT_TRUE(hasProblem(*reader, hostileAt, std::to_string(format::kMaxRecordChunkRaw))) << allProblems(*reader);
    EXPECT_TRUE(hasProblem(*reader, hostileAt, c.expect)) << allProblems(*reader);
  }
}

// A footer index of a few hundred bytes that claims 1 GiB uncompressed.
TEST(HostileReader, IndexLargerThanItsFrameIsRefusedBeforeAllocating) {
  TempDir dir;
  const auto path = dir.file("index.kcap");
  std::vector<uint8_t> file = buildUncompressedTrace(messageEvents(0, 3), {}, 3, false);
  const uint64_t indexAt = file.size();
  const std::vector<uint8_t> zeros(64 * kMiB, 0);
  std::vector<uint8_t> frame = zstdFrame(zeros.data(), zeros.size());
  frame.resize(200);
  appendChunk(file, ChunkKind::kIndex, Codec::kZstd, frame, format::kMaxIndexRaw);
  appendTrailer(file, indexAt);
  writeFileBytes(path, file);
  std::unique_ptr<format::TraceReader> reader;
  std::vector<uint64_t> seqs;
  const uint64_t grew = peakGrowth([&] {
    reader = format::TraceReader::open(path);
    seqs = deliveredSeqs(*reader);
  });
  EXPECT_LT(grew, 32 * kMiB);
  EXPECT_FALSE(reader->indexed());
  EXPECT_EQ(seqs, (std::vector<uint64_t>{0, 1, 2})) << allProblems(*reader);
  EXPECT_TRUE(hasProblem(*reader, indexAt, "footer index unusable")) << allProblems(*reader);
}

// A blob of a hundred stored bytes that claims a 64 MiB piece.
TEST(HostileReader, BlobLargerThanItsFrameIsRefusedBeforeAllocating) {
  TempDir dir;
  const auto path = dir.file("blob.kcap");
  std::vector<uint8_t> file = buildUncompressedTrace(messageEvents(0, 1), {}, 1, false);
  const uint64_t blobAt = file.size();
  const std::vector<uint8_t> zeros(format::kMaxBlobRaw, 0);
  std::vector<uint8_t> frame = zstdFrame(zeros.data(), zeros.size());
  frame.resize(100);
  std::vector<uint8_t> payload(format::kBlobHashSize + frame.size(), 0x42);
  std::memcpy(payload.data() + format::kBlobHashSize, frame.data(), frame.size());
  appendChunk(file, ChunkKind::kBlob, Codec::kZstd, payload, format::kMaxBlobRaw);
  writeFileBytes(path, file);
  std::unique_ptr<format::TraceReader> reader;
  const uint64_t grew = peakGrowth([&] {
    reader = format::TraceReader::open(path);
    for (const auto& chunk : reader->chunks()) {
      if (chunk.kind != ChunkKind::kBlob) continue;
      EXPECT_THROW(reader->readBlob(chunk.hash), format::FormatError);
      reader->verifyChunk(chunk);
    }
  });
  EXPECT_LT(grew, 32 * kMiB);
  EXPECT_EQ(reader->blobCount(), 0u) << allProblems(*reader);
  EXPECT_TRUE(hasProblem(*reader, blobAt, "100 bytes")) << allProblems(*reader);
}

// ---------------------------------------------------------------------------
// Index entries are checked in 64 bits without wrapping.

TEST(HostileReader, IndexEntryWhoseEndWrapsIsRejected) {
  TempDir dir;
  const auto path = dir.file("wrap.kcap");
  std::vector<uint8_t> file = buildUncompressedTrace(messageEvents(0, 4), {}, 2, false);
  const uint64_t indexAt = file.size();
  const uint64_t wrapping = ~uint64_t{0} - 15;  // 2^64 - 16: + 32 + 16 wraps to 32
  capnp::MallocMessageBuilder message;
  auto index = message.initRoot<schema::TraceIndex>();
  index.setEventCount(4);
  auto entries = index.initChunks(1);
  entries[0].setOffset(wrapping);
  entries[0].setFirstSeq(0);
  entries[0].setEventCount(4);
  entries[0].setStoredSize(16);
  entries[0].setRawSize(16);
  const auto payload = flatBytes(message);
  appendChunk(file, ChunkKind::kIndex, Codec::kNone, payload, payload.size());
  appendTrailer(file, indexAt);
  writeFileBytes(path, file);

  auto reader = format::TraceReader::open(path);
  EXPECT_TRUE(reader->closed());
  EXPECT_FALSE(reader->indexed());
  EXPECT_EQ(deliveredSeqs(*reader), (std::vector<uint64_t>{0, 1, 2, 3})) << allProblems(*reader);
  EXPECT_TRUE(hasProblem(*reader, indexAt, "entry for byte " + std::to_string(wrapping))) << allProblems(*reader);
}

// ---------------------------------------------------------------------------
// Contents: a size is backed by pieces, but deduplication lets one 64 MiB
// piece make a content of any size. readContent refuses one over its limit,
// naming the size, before allocating it.

TEST(HostileReader, ReadContentRefusesAContentOverItsLimitBeforeAllocating) {
  TempDir dir;
  const auto path = dir.file("dedup.kcap");
  // One zero piece of 64 KiB, stored once, referenced 65536 times: 4 GiB + 64 KiB.
  const uint32_t pieceSize = 64 << 10;
  const std::vector<uint8_t> zeros(pieceSize, 0);
  const format::Hash128 hash = format::contentHash(zeros.data(), zeros.size());
  std::vector<uint8_t> file = buildUncompressedTrace(messageEvents(0, 1), {RawBlob{hash, zeros}}, 1, false);
  writeFileBytes(path, file);
  auto reader = format::TraceReader::open(path);
  ASSERT_TRUE(reader->hasBlob(hash)) << allProblems(*reader);

  capnp::MallocMessageBuilder message;
  auto content = message.initRoot<schema::Content>();
  const unsigned count = 65537;
  content.setSize(uint64_t{pieceSize} * count);
  content.setPieceSize(pieceSize);
  auto pieces = content.initPieces(count);
  for (unsigned i = 0; i < count; ++i) {
    pieces[i].setHigh(hash.high);
    pieces[i].setLow(hash.low);
  }
  const std::string size = std::to_string(uint64_t{pieceSize} * count);
  const uint64_t grew = peakGrowth([&] {
    try {
      reader->readContent(content.asReader(), format::kMaxCodeImageSize, "module image");
      ADD_FAILURE() << "no FormatError";
    } catch (const format::FormatError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(path), std::string::npos) << what;
      EXPECT_NE(what.find("module image"), std::string::npos) << what;
      EXPECT_NE(what.find(size), std::string::npos) << what;
      EXPECT_NE(what.find(std::to_string(format::kMaxCodeImageSize)), std::string::npos) << what;
    }
  });
  EXPECT_LT(grew, 64 * kMiB);
  // The same content in windows, as consumers that stream it read it.
  content.setSize(uint64_t{pieceSize} * 3);
  content.initPieces(3);
  for (unsigned i = 0; i < 3; ++i) {
    content.getPieces()[i].setHigh(hash.high);
    content.getPieces()[i].setLow(hash.low);
  }
  EXPECT_EQ(reader->readContent(content.asReader(), format::kMaxCodeImageSize, "module image"),
            std::vector<uint8_t>(3 * pieceSize, 0));
}

// ---------------------------------------------------------------------------
// Problems: the reader keeps the first kMaxProblemsKept, counts the rest, and
// says how many more there were.

TEST(HostileReader, ProblemsBeyondTheKeptAreCounted) {
  TempDir dir;
  const auto path = dir.file("many.kcap");
  std::vector<uint8_t> file = buildUncompressedTrace(messageEvents(0, 1), {}, 1, false);
  // Record chunks whose one message is malformed: a segment table that
  // claims more words than follow.
  const size_t bad = format::kMaxProblemsKept + 500;
  std::vector<uint8_t> garbage(16, 0);
  putLe<uint32_t>(garbage.data() + 4, 1000);
  for (size_t i = 0; i < bad; ++i) appendChunk(file, ChunkKind::kRecords, Codec::kNone, garbage, garbage.size());
  appendChunk(file, ChunkKind::kRecords, Codec::kNone, concat(messageEvents(1, 1)), concat(messageEvents(1, 1)).size());
  writeFileBytes(path, file);
  auto reader = format::TraceReader::open(path);
  EXPECT_EQ(deliveredSeqs(*reader), (std::vector<uint64_t>{0, 1}));
  deliveredSeqs(*reader);  // the same problems again: counted once
  EXPECT_EQ(reader->problemCount(), bad);
  ASSERT_EQ(reader->problems().size(), format::kMaxProblemsKept + 1);
  EXPECT_NE(reader->problems().back().message.find("500 more problems"), std::string::npos)
      << reader->problems().back().message;
  EXPECT_NE(reader->problems().front().message.find("malformed"), std::string::npos)
      << reader->problems().front().message;
}

}  // namespace
}  // namespace kcap::test
