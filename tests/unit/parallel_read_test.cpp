// Large contents are decoded on several threads (the reader's pool), from a
// mapping of the file or with pread: the bytes must come back in place, and a
// damaged piece anywhere, or a file cut while open, must still be reported
// with its offset.
#include <gtest/gtest.h>

#include <capnp/message.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <vector>

#include "container.h"
#include "errors.h"
#include "trace_files.h"
#include "trace_reader.h"
#include "trace_writer.h"

namespace kcap::format {
namespace {

constexpr uint32_t kPiece = 4096;

std::vector<uint8_t> pattern(size_t size) {
  std::vector<uint8_t> bytes(size);
  uint32_t x = 12345;
  for (auto& b : bytes) {
    x = x * 1103515245u + 12345u;
    b = static_cast<uint8_t>(x >> 24);
  }
  return bytes;
}

// Writes one message event whose text is irrelevant and one content of `bytes`
// in a launch's pre list, closes the trace.
void writeTrace(const std::string& path, const std::vector<uint8_t>& bytes) {
  TraceWriter::Options options;
  options.pieceSize = kPiece;
  auto writer = TraceWriter::create(path, options);
  capnp::MallocMessageBuilder message;
  auto launch = message.initRoot<schema::Event>().initLaunch();
  auto range = launch.initPre(1)[0];
  range.setAddress(0x7f0000000000);
  writer->storeContent(bytes.data(), bytes.size(), range.initContent());
  writer->append(message);
  writer->close();
}

std::vector<uint8_t> readFirstPre(TraceReader& reader) {
  std::vector<uint8_t> out;
  reader.forEachEvent([&](const EventRef& ref) {
    auto content = ref.event.getLaunch().getPre()[0].getContent();
    out.assign(content.getSize(), 0);
    reader.readContentInto(content, out.data(), out.size());
    return false;
  });
  return out;
}

TEST(ParallelRead, ManyPiecesComeBackInPlace) {
  test::TempDir dir;
  std::string path = dir.path() + "/many.kcap";
  auto bytes = pattern(37 * kPiece + 123);  // 38 pieces, the last one short
  writeTrace(path, bytes);
  auto reader = TraceReader::open(path);
  EXPECT_EQ(readFirstPre(*reader), bytes);
}

// Half the pieces random (stored raw, Codec::kNone), half a repeating pattern
// (zstd frames), interleaved, the last piece short.
std::vector<uint8_t> mixed(size_t pieces) {
  std::vector<uint8_t> bytes = pattern(pieces * kPiece - 77);
  for (size_t i = 1; i < pieces; i += 2) {
    for (size_t j = i * kPiece; j < std::min(bytes.size(), (i + 1) * kPiece); ++j)
      bytes[j] = static_cast<uint8_t>(j % 13);
  }
  return bytes;
}

// The codecs of the blob chunks, read from their headers (not through the reader's decoding).
std::set<Codec> codecsOf(TraceReader& reader) {
  std::set<Codec> codecs;
  for (const auto& chunk : reader.chunks()) {
    if (chunk.kind != ChunkKind::kBlob) continue;
    ChunkHeader header;
    if (decodeChunkHeader(reader.readStoredChunk(chunk).data(), header)) codecs.insert(header.codec);
  }
  return codecs;
}

struct Mode {
  bool map;
  unsigned threads;
};

class ReadModes : public ::testing::TestWithParam<Mode> {
 protected:
  TraceReader::Options options() const {
    TraceReader::Options o;
    o.map = GetParam().map;
    o.decodeThreads = GetParam().threads;
    return o;
  }
};

TEST_P(ReadModes, BothCodecsComeBackInPlaceCallAfterCall) {
  test::TempDir dir;
  std::string path = dir.path() + "/mixed.kcap";
  auto bytes = mixed(41);
  writeTrace(path, bytes);
  auto reader = TraceReader::open(path, options());
  EXPECT_EQ(reader->mapped(), GetParam().map);
  ASSERT_EQ(codecsOf(*reader), (std::set<Codec>{Codec::kNone, Codec::kZstd}));
  for (int round = 0; round < 3; ++round) {  // the pool's threads and buffers serve call after call
    EXPECT_EQ(readFirstPre(*reader), bytes) << "round " << round;
  }
}

// The file is cut inside the content's last piece after the reader opened it
// (and mapped it, whole): the read must fail naming that piece's offset, not
// fault on a page past the new end.
TEST_P(ReadModes, AFileCutWhileOpenIsAnErrorNamingTheOffset) {
  test::TempDir dir;
  std::string path = dir.path() + "/cut.kcap";
  capnp::MallocMessageBuilder message;
  auto content = message.initRoot<schema::Content>();
  auto bytes = mixed(24);
  {
    TraceWriter::Options o;
    o.pieceSize = kPiece;
    auto writer = TraceWriter::create(path, o);
    writer->storeContent(bytes.data(), bytes.size(), content);
    writer->close();
  }
  auto reader = TraceReader::open(path, options());
  uint64_t last = 0;  // the last blob in the file (the writer's threads need not store pieces in order)
  Hash128 lastHash;
  for (const auto& chunk : reader->chunks()) {
    if (chunk.kind == ChunkKind::kBlob && chunk.offset > last) last = chunk.offset, lastHash = chunk.hash;
  }
  ASSERT_NE(last, 0u);
  unsigned lastPiece = 0;
  while (lastPiece < content.getPieces().size() &&
         !(Hash128{content.getPieces()[lastPiece].getHigh(), content.getPieces()[lastPiece].getLow()} == lastHash)) {
    ++lastPiece;
  }
  std::filesystem::resize_file(path, last + kChunkHeaderSize + 5);
  std::vector<uint8_t> out(bytes.size());
  try {
    reader->readContentInto(content.asReader(), out.data(), out.size());
    FAIL() << "a cut file was read without an error";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("at byte " + std::to_string(last)), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("end of file"), std::string::npos) << e.what();
  }
  // Cut before opening: the torn piece is not in the file, and the content says which one it was.
  auto reopened = TraceReader::open(path, options());
  EXPECT_TRUE(reopened->torn());
  try {
    reopened->readContentInto(content.asReader(), out.data(), out.size());
    FAIL() << "a content with a torn piece was read without an error";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("piece " + std::to_string(lastPiece) + " "), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("missing"), std::string::npos) << e.what();
  }
}

TEST_P(ReadModes, ADamagedPieceIsReportedWithItsOffset) {
  test::TempDir dir;
  std::string path = dir.path() + "/damaged.kcap";
  auto bytes = pattern(40 * kPiece);
  writeTrace(path, bytes);
  uint64_t victim = 0;
  {
    auto reader = TraceReader::open(path);
    int blobs = 0;
    for (const auto& chunk : reader->chunks()) {
      if (chunk.kind == ChunkKind::kBlob && ++blobs == 29) victim = chunk.offset;
    }
    ASSERT_NE(victim, 0u);
  }
  {
    std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(static_cast<std::streamoff>(victim + kChunkHeaderSize + kBlobHashSize + 10));
    char c = 0;
    file.read(&c, 1);
    file.seekp(static_cast<std::streamoff>(victim + kChunkHeaderSize + kBlobHashSize + 10));
    c = static_cast<char>(c ^ 0x5a);
    file.write(&c, 1);
  }
  auto reader = TraceReader::open(path, options());  // indexed: the damage shows only when read
  try {
    readFirstPre(*reader);
    FAIL() << "a damaged piece was read without an error";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("at byte " + std::to_string(victim)), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("checksum"), std::string::npos) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(ParallelRead, ReadModes,
                         ::testing::Values(Mode{true, 4}, Mode{false, 4}, Mode{true, 1}, Mode{false, 1}),
                         [](const ::testing::TestParamInfo<Mode>& p) {
                           return std::string(p.param.map ? "Mapped" : "Pread") + std::to_string(p.param.threads) +
                                  "Threads";
                         });

// A child forked after the pool was made has none of its threads: its reads
// must still complete (on its own thread), and so must the parent's.
TEST(ParallelRead, AForkedChildReadsWithoutThePoolsThreads) {
  test::TempDir dir;
  std::string path = dir.path() + "/fork.kcap";
  auto bytes = mixed(30);
  writeTrace(path, bytes);
  TraceReader::Options o;
  o.decodeThreads = 4;
  auto reader = TraceReader::open(path, o);
  ASSERT_EQ(readFirstPre(*reader), bytes);  // the pool exists now
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    bool same = readFirstPre(*reader) == bytes;
    _exit(same ? 0 : 1);  // the child's reader is never destroyed: as in replay's isolated child
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
  EXPECT_EQ(readFirstPre(*reader), bytes);
}

}  // namespace
}  // namespace kcap::format
