// Opening things that are not (readable) kcap traces: FormatError, with a
// message that names the path and says what is wrong.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "container.h"
#include "errors.h"
#include "trace_files.h"
#include "trace_reader.h"
#include "trace_writer.h"

namespace kcap::test {
namespace {

// The FormatError message of opening `path`; fails the test if open succeeds
// or throws anything else.
std::string openError(const std::string& path) {
  try {
    format::TraceReader::open(path);
  } catch (const format::FormatError& e) {
    return e.what();
  }
  ADD_FAILURE() << "opening " << path << " did not throw FormatError";
  return {};
}

void expectContains(const std::string& text, const std::string& part) {
  EXPECT_NE(text.find(part), std::string::npos) << "'" << text << "' does not contain '" << part << "'";
}

std::vector<uint8_t> validTrace(const TempDir& dir) {
  const auto path = dir.file("valid.kcap");
  format::TraceWriter::create(path)->close();
  return readFileBytes(path);
}

TEST(Header, EmptyWriterOutputIsAValidTrace) {
  TempDir dir;
  auto bytes = validTrace(dir);
  ASSERT_GE(bytes.size(), format::kFileHeaderSize);
  EXPECT_EQ(std::memcmp(bytes.data(), format::kFileMagic.data(), 8), 0);
  auto reader = format::TraceReader::open(dir.file("valid.kcap"));
  EXPECT_TRUE(reader->indexed());
  EXPECT_FALSE(reader->torn());
  EXPECT_TRUE(reader->problems().empty());
  EXPECT_EQ(reader->header().formatVersion, format::kFormatVersion);
  EXPECT_EQ(std::string(reader->header().writerVersion).rfind("kcap ", 0), 0u);
  EXPECT_EQ(reader->forEachEvent([](const format::EventRef&) { return true; }), 0u);
}

TEST(Header, WriterVersionIsStoredAndTruncated) {
  TempDir dir;
  format::TraceWriter::Options options;
  options.writerVersion = "custom-writer 1.2.3";
  format::TraceWriter::create(dir.file("a.kcap"), options)->close();
  EXPECT_STREQ(format::TraceReader::open(dir.file("a.kcap"))->header().writerVersion, "custom-writer 1.2.3");
  options.writerVersion = std::string(100, 'v');
  format::TraceWriter::create(dir.file("b.kcap"), options)->close();
  EXPECT_EQ(std::string(format::TraceReader::open(dir.file("b.kcap"))->header().writerVersion),
            std::string(format::kWriterVersionSize - 1, 'v'));
}

TEST(Header, NotATrace) {
  TempDir dir;
  const auto path = dir.file("notes.txt");
  const std::string text = "This is a text file, long enough to hold a kcap header but it is not one.\n";
  writeFileBytes(path, text.data(), text.size());
  auto message = openError(path);
  expectContains(message, path);
  expectContains(message, "not a kcap trace");
}

TEST(Header, TooShort) {
  TempDir dir;
  for (size_t size : {size_t{0}, size_t{1}, size_t{10}, format::kFileHeaderSize - 1}) {
    SCOPED_TRACE(size);
    auto bytes = validTrace(dir);
    bytes.resize(size);
    const auto path = dir.file("short.kcap");
    writeFileBytes(path, bytes);
    auto message = openError(path);
    expectContains(message, path);
    expectContains(message, "shorter than the 48-byte header");
    expectContains(message, std::to_string(size) + " bytes");
  }
}

TEST(Header, NewerFormatVersion) {
  TempDir dir;
  auto bytes = validTrace(dir);
  format::FileHeader header;
  header.formatVersion = format::kFormatVersion + 1;
  std::strncpy(header.writerVersion, "kcap 9.0.0", format::kWriterVersionSize - 1);
  format::encodeFileHeader(header, bytes.data());
  const auto path = dir.file("future.kcap");
  writeFileBytes(path, bytes);
  auto message = openError(path);
  expectContains(message, path);
  expectContains(message, "format " + std::to_string(format::kFormatVersion + 1));
  expectContains(message, "kcap 9.0.0");
  expectContains(message, "reads format " + std::to_string(format::kFormatVersion));
}

TEST(Header, FormatVersionZeroIsRejected) {
  TempDir dir;
  auto bytes = validTrace(dir);
  format::FileHeader header;
  header.formatVersion = 0;
  format::encodeFileHeader(header, bytes.data());
  const auto path = dir.file("zero.kcap");
  writeFileBytes(path, bytes);
  expectContains(openError(path), path);
}

TEST(Header, DamagedHeaderChecksum) {
  TempDir dir;
  auto bytes = validTrace(dir);
  bytes[20] ^= 0x01;  // inside the writer version, covered by the header checksum
  const auto path = dir.file("damaged.kcap");
  writeFileBytes(path, bytes);
  auto message = openError(path);
  expectContains(message, path);
  expectContains(message, "at byte 0");
  expectContains(message, "damaged");
}

TEST(Header, MissingFileAndDirectory) {
  TempDir dir;
  const auto missing = dir.file("does-not-exist.kcap");
  auto message = openError(missing);
  expectContains(message, missing);
  expectContains(message, "cannot open");
  message = openError(dir.path());
  expectContains(message, dir.path());
  expectContains(message, "not a regular file");
}

TEST(Header, ContainerEncodingRoundTrips) {
  format::FileHeader header;
  header.formatVersion = 7;
  std::strncpy(header.writerVersion, "x", format::kWriterVersionSize - 1);
  uint8_t bytes[format::kFileHeaderSize];
  format::encodeFileHeader(header, bytes);
  format::FileHeader decoded;
  ASSERT_TRUE(format::decodeFileHeader(bytes, decoded));
  EXPECT_EQ(decoded.formatVersion, 7u);
  EXPECT_STREQ(decoded.writerVersion, "x");
  bytes[0] ^= 1;
  EXPECT_FALSE(format::decodeFileHeader(bytes, decoded));

  format::ChunkHeader chunk;
  chunk.kind = format::ChunkKind::kBlob;
  chunk.codec = format::Codec::kNone;
  chunk.storedSize = 123;
  chunk.rawSize = 107;
  chunk.checksum = 0x0123456789abcdefull;
  uint8_t cbytes[format::kChunkHeaderSize];
  format::encodeChunkHeader(chunk, cbytes);
  format::ChunkHeader cdecoded;
  ASSERT_TRUE(format::decodeChunkHeader(cbytes, cdecoded));
  EXPECT_EQ(cdecoded.kind, format::ChunkKind::kBlob);
  EXPECT_EQ(cdecoded.codec, format::Codec::kNone);
  EXPECT_EQ(cdecoded.storedSize, 123u);
  EXPECT_EQ(cdecoded.rawSize, 107u);
  EXPECT_EQ(cdecoded.checksum, 0x0123456789abcdefull);
  cbytes[4] = 9;  // unknown kind
  EXPECT_FALSE(format::decodeChunkHeader(cbytes, cdecoded));

  format::Trailer trailer;
  trailer.indexOffset = 4242;
  uint8_t tbytes[format::kTrailerSize];
  format::encodeTrailer(trailer, tbytes);
  format::Trailer tdecoded;
  ASSERT_TRUE(format::decodeTrailer(tbytes, tdecoded));
  EXPECT_EQ(tdecoded.indexOffset, 4242u);
  tbytes[9] ^= 1;
  EXPECT_FALSE(format::decodeTrailer(tbytes, tdecoded));
}

}  // namespace
}  // namespace kcap::test
