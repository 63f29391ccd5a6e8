// Content storage: pieces are content-addressed and stored once per file;
// every content reads back byte-exact, at and around piece boundaries.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <random>
#include <string>
#include <thread>
#include <vector>

#include <capnp/message.h>

#include "errors.h"
#include "trace_files.h"
#include "trace_reader.h"
#include "trace_writer.h"

namespace kcap::test {
namespace {

using schema::Event;

std::vector<uint8_t> randomBytes(size_t size, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> bytes(size);
  for (auto& b : bytes) b = static_cast<uint8_t>(rng());
  return bytes;
}

size_t blobChunks(const format::TraceReader& reader) {
  size_t n = 0;
  for (const auto& c : reader.chunks()) n += c.kind == format::ChunkKind::kBlob;
  return n;
}

uint64_t storedBlobBytes(const format::TraceReader& reader) {
  uint64_t n = 0;
  for (const auto& c : reader.chunks()) {
    if (c.kind == format::ChunkKind::kBlob) n += c.storedSize;
  }
  return n;
}

format::TraceWriter::Options opts(uint32_t pieceSize) {
  format::TraceWriter::Options o;
  o.pieceSize = pieceSize;
  o.batchBytes = 1024;
  return o;
}

// Appends a memcpy event holding `bytes` as its data.
uint64_t appendCopy(format::TraceWriter& writer, const std::vector<uint8_t>& bytes, uint64_t dst) {
  capnp::MallocMessageBuilder message;
  auto c = message.initRoot<Event>().initMemcpy();
  c.setDst(dst);
  c.setSize(bytes.size());
  writer.storeContent(bytes.data(), bytes.size(), c.initData());
  return writer.append(message);
}

std::vector<std::vector<uint8_t>> readCopies(format::TraceReader& reader) {
  std::vector<std::vector<uint8_t>> out;
  reader.forEachEvent([&](const format::EventRef& ref) {
    EXPECT_EQ(ref.event.which(), Event::MEMCPY);
    auto data = ref.event.getMemcpy().getData();
    EXPECT_EQ(data.getSize(), ref.event.getMemcpy().getSize());
    out.push_back(reader.readContent(data));
    return true;
  });
  return out;
}

TEST(Dedup, SameBytesInTwoSnapshotsAreStoredOnce) {
  TempDir dir;
  const auto path = dir.file("t.kcap");
  const auto a = randomBytes(10000, 1);  // 3 pieces of 4096: 4096 + 4096 + 1808
  auto writer = format::TraceWriter::create(path, opts(4096));
  {
    capnp::MallocMessageBuilder message;
    auto l = message.initRoot<Event>().initLaunch();
    auto pre = l.initPre(2);
    pre[0].setAddress(0x1000);
    writer->storeContent(a.data(), a.size(), pre[0].initContent());
    pre[1].setAddress(0x9000);
    writer->storeContent(a.data(), a.size(), pre[1].initContent());
    writer->append(message);
  }
  {
    capnp::MallocMessageBuilder message;
    auto end = message.initRoot<Event>().initLaunchEnd();
    auto post = end.initPost(1);
    writer->storeContent(a.data(), a.size(), post[0].initContent());
    writer->append(message);
  }
  writer->close();
  auto stats = writer->stats();
  EXPECT_EQ(stats.events, 2u);
  EXPECT_EQ(stats.contentBytes, 3 * a.size());
  EXPECT_EQ(stats.uniqueBytes, a.size());
  EXPECT_EQ(stats.blobChunks, 3u);

  auto reader = format::TraceReader::open(path);
  EXPECT_EQ(blobChunks(*reader), 3u);
  EXPECT_EQ(reader->blobCount(), 3u);
  EXPECT_EQ(storedBlobBytes(*reader), stats.storedBlobBytes);
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(static_cast<uint64_t>(st.st_size), stats.fileBytes);

  std::vector<std::vector<uint8_t>> contents;
  std::vector<std::vector<format::Hash128>> hashes;
  reader->forEachEvent([&](const format::EventRef& ref) {
    auto collect = [&](capnp::List<schema::MemoryRange>::Reader ranges) {
      for (auto r : ranges) {
        contents.push_back(reader->readContent(r.getContent()));
        std::vector<format::Hash128> h;
        for (auto p : r.getContent().getPieces()) h.push_back({p.getHigh(), p.getLow()});
        hashes.push_back(h);
      }
    };
    if (ref.event.isLaunch()) collect(ref.event.getLaunch().getPre());
    if (ref.event.isLaunchEnd()) collect(ref.event.getLaunchEnd().getPost());
    return true;
  });
  ASSERT_EQ(contents.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(contents[i], a) << i;
    ASSERT_EQ(hashes[i].size(), 3u);
    EXPECT_EQ(hashes[i], hashes[0]);
    EXPECT_TRUE(hashes[i][0] == format::contentHash(a.data(), 4096));
    EXPECT_TRUE(hashes[i][2] == format::contentHash(a.data() + 8192, 10000 - 8192));
  }
}

TEST(Dedup, IdenticalPiecesWithinAndAcrossContentsAreStoredOnce) {
  TempDir dir;
  const auto path = dir.file("t.kcap");
  const auto page = randomBytes(4096, 2);
  std::vector<uint8_t> repeated;
  for (int i = 0; i < 5; ++i) repeated.insert(repeated.end(), page.begin(), page.end());
  repeated.resize(repeated.size() + 100, 0);  // a short tail of zeros: pieces page x5, zeros(100)
  const std::vector<uint8_t> zeros(8192, 0);  // zeros(4096) x2: one new piece
  std::vector<uint8_t> pageThenTail(page);    // page again, then the same 100-byte zero tail
  pageThenTail.resize(4096 + 100, 0);

  auto writer = format::TraceWriter::create(path, opts(4096));
  appendCopy(*writer, repeated, 0x1000);
  appendCopy(*writer, zeros, 0x2000);
  appendCopy(*writer, pageThenTail, 0x3000);
  writer->close();
  auto stats = writer->stats();
  EXPECT_EQ(stats.contentBytes, repeated.size() + zeros.size() + pageThenTail.size());
  EXPECT_EQ(stats.uniqueBytes, 4096u + 100u + 4096u);
  EXPECT_EQ(stats.blobChunks, 3u);

  auto reader = format::TraceReader::open(path);
  EXPECT_EQ(blobChunks(*reader), 3u);
  EXPECT_TRUE(reader->hasBlob(format::contentHash(page.data(), page.size())));
  EXPECT_TRUE(reader->hasBlob(format::contentHash(zeros.data(), 4096)));
  EXPECT_TRUE(reader->hasBlob(format::contentHash(zeros.data(), 100)));
  EXPECT_EQ(reader->readBlob(format::contentHash(zeros.data(), 100)), std::vector<uint8_t>(100, 0));
  auto copies = readCopies(*reader);
  ASSERT_EQ(copies.size(), 3u);
  EXPECT_EQ(copies[0], repeated);
  EXPECT_EQ(copies[1], zeros);
  EXPECT_EQ(copies[2], pageThenTail);
}

TEST(Dedup, PrefixOfAPieceIsADifferentPiece) {
  TempDir dir;
  const auto path = dir.file("t.kcap");
  const auto full = randomBytes(4096, 3);
  const std::vector<uint8_t> prefix(full.begin(), full.begin() + 4095);
  auto writer = format::TraceWriter::create(path, opts(4096));
  appendCopy(*writer, full, 0x1000);
  appendCopy(*writer, prefix, 0x2000);
  writer->close();
  EXPECT_EQ(writer->stats().blobChunks, 2u);
  auto reader = format::TraceReader::open(path);
  auto copies = readCopies(*reader);
  ASSERT_EQ(copies.size(), 2u);
  EXPECT_EQ(copies[0], full);
  EXPECT_EQ(copies[1], prefix);
}

TEST(Dedup, ConcurrentStoresOfTheSameBytesStoreOnce) {
  TempDir dir;
  const auto path = dir.file("t.kcap");
  const auto buffer = randomBytes(16 * 4096, 4);
  auto writer = format::TraceWriter::create(path, opts(4096));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 25; ++i) appendCopy(*writer, buffer, 0x1000u * static_cast<unsigned>(t + 1));
    });
  }
  for (auto& t : threads) t.join();
  writer->close();
  EXPECT_EQ(writer->stats().blobChunks, 16u);
  EXPECT_EQ(writer->stats().uniqueBytes, buffer.size());
  EXPECT_EQ(writer->stats().contentBytes, 100 * buffer.size());
  auto reader = format::TraceReader::open(path);
  EXPECT_EQ(blobChunks(*reader), 16u);
  auto copies = readCopies(*reader);
  ASSERT_EQ(copies.size(), 100u);
  for (const auto& c : copies) ASSERT_EQ(c, buffer);
}

class ContentSizes : public ::testing::TestWithParam<uint32_t> {};

TEST_P(ContentSizes, RoundTripIsExact) {
  const uint32_t ps = GetParam();
  const std::vector<size_t> sizes = {0, 1, ps - 1, ps, ps + 1, 2 * size_t{ps}, 5 * size_t{ps} + 123};
  TempDir dir;
  const auto path = dir.file("t.kcap");
  std::vector<std::vector<uint8_t>> written;
  auto writer = format::TraceWriter::create(path, opts(ps));
  EXPECT_EQ(writer->pieceSize(), ps);
  for (size_t i = 0; i < sizes.size(); ++i) {
    written.push_back(randomBytes(sizes[i], 100 + i));
    appendCopy(*writer, written.back(), 0x1000 * (i + 1));
  }
  writer->close();

  auto reader = format::TraceReader::open(path);
  EXPECT_TRUE(reader->indexed());
  size_t i = 0;
  reader->forEachEvent([&](const format::EventRef& ref) {
    auto data = ref.event.getMemcpy().getData();
    SCOPED_TRACE("size " + std::to_string(sizes[i]));
    EXPECT_EQ(data.getSize(), sizes[i]);
    EXPECT_EQ(data.getPieceSize(), ps);
    EXPECT_EQ(data.getPieces().size(), (sizes[i] + ps - 1) / ps);
    EXPECT_EQ(reader->readContent(data), written[i]);
    // readContentInto into a larger buffer leaves the rest alone.
    std::vector<uint8_t> into(sizes[i] + 8, 0xee);
    reader->readContentInto(data, into.data(), into.size());
    EXPECT_TRUE(std::equal(written[i].begin(), written[i].end(), into.begin()));
    for (size_t k = sizes[i]; k < into.size(); ++k) EXPECT_EQ(into[k], 0xee);
    if (sizes[i] > 0) {
      std::vector<uint8_t> small(sizes[i] - 1);
      EXPECT_THROW(reader->readContentInto(data, small.data(), small.size()), format::FormatError);
    }
    ++i;
    return true;
  });
  EXPECT_EQ(i, sizes.size());
}

INSTANTIATE_TEST_SUITE_P(PieceSizes, ContentSizes, ::testing::Values(4096u, 65536u));

TEST(Dedup, ReadContentRejectsInconsistentOrMissingPieces) {
  TempDir dir;
  const auto path = dir.file("t.kcap");
  const auto bytes = randomBytes(5000, 5);
  auto writer = format::TraceWriter::create(path, opts(4096));
  appendCopy(*writer, bytes, 0x1000);
  writer->close();
  auto reader = format::TraceReader::open(path);

  capnp::MallocMessageBuilder message;
  auto content = message.initRoot<schema::Content>();
  // Wrong piece count for the size.
  content.setSize(5000);
  content.setPieceSize(4096);
  content.initPieces(1);
  try {
    reader->readContent(content.asReader());
    FAIL() << "no FormatError";
  } catch (const format::FormatError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("pieces"), std::string::npos) << e.what();
  }
  // Zero piece size with a non-zero size.
  content.setPieceSize(0);
  EXPECT_THROW(reader->readContent(content.asReader()), format::FormatError);
  // A piece that is not in the file.
  content.setPieceSize(4096);
  auto pieces = content.initPieces(2);
  auto h0 = format::contentHash(bytes.data(), 4096);
  pieces[0].setHigh(h0.high);
  pieces[0].setLow(h0.low);
  pieces[1].setHigh(1);
  pieces[1].setLow(2);
  try {
    reader->readContent(content.asReader());
    FAIL() << "no FormatError";
  } catch (const format::FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("piece 1"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("missing"), std::string::npos) << e.what();
  }
  // A piece whose stored size is not what the content needs (the 4096-byte
  // piece used as the 904-byte tail).
  pieces[1].setHigh(h0.high);
  pieces[1].setLow(h0.low);
  EXPECT_THROW(reader->readContent(content.asReader()), format::FormatError);
  EXPECT_THROW(reader->readBlob(format::Hash128{1, 2}), format::FormatError);
}

// KNOWN BUG (format/trace_reader.cpp:413, TraceReader::readContent): the
// result vector is allocated with the size the content claims (up to 1 TiB)
// before the piece list is checked, so a trace that lies about a content's
// size makes readContent throw std::bad_alloc (or abort under ASan / libFuzzer's
// malloc limit) instead of FormatError. Disabled until fixed; under ASan this
// test aborts rather than fails.
TEST(Dedup, ReadContentRejectsAHugeClaimBeforeAllocating) {
  TempDir dir;
  const auto path = dir.file("t.kcap");
  format::TraceWriter::create(path)->close();
  auto reader = format::TraceReader::open(path);
  capnp::MallocMessageBuilder message;
  auto content = message.initRoot<schema::Content>();
  content.setSize(uint64_t{1} << 40);
  content.setPieceSize(1u << 31);
  content.initPieces(512);  // consistent with the size; none of them is in the file
  try {
    reader->readContent(content.asReader());
    ADD_FAILURE() << "no exception";
  } catch (const format::FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("missing"), std::string::npos) << e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw " << e.what() << " instead of FormatError";
  }
}

}  // namespace
}  // namespace kcap::test
