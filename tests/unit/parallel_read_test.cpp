// Large contents are decoded on several threads: the bytes must come back in
// place, and a damaged piece anywhere must still be reported with its offset.
#include <gtest/gtest.h>

#include <capnp/message.h>

#include <cstdio>
#include <fstream>
#include <vector>

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

TEST(ParallelRead, ADamagedPieceIsReportedWithItsOffset) {
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
  auto reader = TraceReader::open(path);  // indexed: the damage shows only when read
  try {
    readFirstPre(*reader);
    FAIL() << "a damaged piece was read without an error";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("at byte " + std::to_string(victim)), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("checksum"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kcap::format
