// TraceWriter storing content: pieces hashed and compressed in parallel,
// their buffers reused, pieces the file already holds skipped, content
// hashed by the producer or handed over in direct buffers, events of many
// segments, and encoded pieces copied from another trace.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include <capnp/message.h>

#include "errors.h"
#include "trace_files.h"
#include "trace_reader.h"
#include "trace_writer.h"

namespace kcap::test {
namespace {

using schema::Event;

// A large storeContent hashes and copies its pieces on several threads; the
// file must not depend on how many (pieces keep their order, duplicates
// inside the content are stored once) and must read back byte for byte.
TEST(Writer, ParallelStoreContentWritesTheSameFileWhateverTheThreads) {
  TempDir dir;
  constexpr uint32_t kPiece = 64u << 10;
  std::vector<uint8_t> data(40 * kPiece + 123);
  std::mt19937_64 random(7);
  for (auto& b : data) b = static_cast<uint8_t>(random());
  std::copy(data.begin(), data.begin() + kPiece, data.begin() + 5 * kPiece);  // piece 5 repeats piece 0
  std::vector<std::vector<uint8_t>> files;
  for (unsigned threads : {1u, 2u, 7u}) {
    const auto path = dir.file("parallel-" + std::to_string(threads) + ".kcap");
    format::TraceWriter::Options options;
    options.pieceSize = kPiece;
    options.hashingThreads = threads;
    options.compressionThreads = 2;
    auto writer = format::TraceWriter::create(path, options);
    capnp::MallocMessageBuilder message;
    auto event = message.initRoot<Event>();
    auto range = event.initLaunch().initPre(1)[0];
    writer->storeContent(data.data(), data.size(), range.initContent());
    writer->append(message);
    const auto stats = writer->stats();
    EXPECT_EQ(stats.contentBytes, data.size());
    EXPECT_EQ(stats.uniqueBytes, data.size() - kPiece) << "piece 5 is piece 0 again";
    writer->close();
    auto reader = format::TraceReader::open(path);
    uint64_t events = reader->forEachEvent([&](const format::EventRef& ref) {
      auto content = ref.event.getLaunch().getPre()[0].getContent();
      EXPECT_EQ(content.getPieces().size(), 41u);
      EXPECT_EQ(reader->readContent(content), data);
      return true;
    });
    EXPECT_EQ(events, 1u);
    files.push_back(readFileBytes(path));
  }
  EXPECT_EQ(files[0], files[1]);
  EXPECT_EQ(files[0], files[2]);
}

// The names of this process's threads (/proc/self/task/*/comm).
std::multiset<std::string> threadNames() {
  std::multiset<std::string> out;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string name;
    if (std::getline(comm, name)) out.insert(name);
  }
  return out;
}

// The writer's threads are named, so that top and gdb tell them from the
// program's.
TEST(Writer, ThreadsAreNamed) {
  TempDir dir;
  format::TraceWriter::Options options;
  options.compressionThreads = 2;
  options.hashingThreads = 2;
  options.pieceSize = 64u << 10;
  auto writer = format::TraceWriter::create(dir.file("names.kcap"), options);
  capnp::MallocMessageBuilder message;
  std::vector<uint8_t> data(4 * options.pieceSize, 1);
  writer->storeContent(data.data(), data.size(), message.initRoot<Event>().initLaunch().initPre(1)[0].initContent());
  writer->append(message);
  writer->flush();  // the hashing pool exists now (threads are named when made, run or not)
  const auto names = threadNames();
  EXPECT_EQ(names.count("kcap-zstd"), 2u);
  EXPECT_EQ(names.count("kcap-write"), 1u);
  EXPECT_EQ(names.count("kcap-merge"), 1u);
  EXPECT_EQ(names.count("kcap-hash"), 2u);
  writer->close();
}

// Piece buffers come back once their piece is compressed: a second burst of
// new memory is copied into buffers the first one used (no page faults), at
// most as many as the memory bound holds.
TEST(Writer, PieceBuffersAreReused) {
  TempDir dir;
  format::TraceWriter::Options options;
  options.pieceSize = 64u << 10;
  options.maxPendingBytes = 16 * options.pieceSize;
  options.hashingThreads = 2;
  auto writer = format::TraceWriter::create(dir.file("reuse.kcap"), options);
  std::vector<uint8_t> first(8 * options.pieceSize), second(first.size()), third(32 * options.pieceSize);
  std::mt19937_64 random(3);
  for (auto* bytes : {&first, &second, &third}) {
    for (auto& b : *bytes) b = static_cast<uint8_t>(random());
  }
  capnp::MallocMessageBuilder message;
  auto pre = message.initRoot<Event>().initLaunch().initPre(3);
  writer->storeContent(first.data(), first.size(), pre[0].initContent());
  EXPECT_EQ(writer->stats().reusedBuffers, 0u);  // nothing was used before
  writer->flush();                               // compressed and written: the buffers are back
  writer->storeContent(second.data(), second.size(), pre[1].initContent());
  EXPECT_EQ(writer->stats().reusedBuffers, 8u);
  writer->flush();
  writer->storeContent(third.data(), third.size(), pre[2].initContent());
  EXPECT_EQ(writer->stats().reusedBuffers, 16u) << "the 8 buffers there were, then new ones";
  writer->append(message);
  writer->close();
  auto reader = format::TraceReader::open(dir.file("reuse.kcap"));
  reader->forEachEvent([&](const format::EventRef& ref) {
    const auto ranges = ref.event.getLaunch().getPre();
    EXPECT_EQ(reader->readContent(ranges[0].getContent()), first);
    EXPECT_EQ(reader->readContent(ranges[1].getContent()), second);
    EXPECT_EQ(reader->readContent(ranges[2].getContent()), third);
    return true;
  });
}

// A reused buffer is written over exactly (copyPiece: sizes kept between
// uses, streaming stores): short pieces into buffers that held long ones and
// the reverse, from sources at odd addresses.
TEST(Writer, ReusedBuffersHoldExactlyTheNewPiece) {
  TempDir dir;
  format::TraceWriter::Options options;
  options.pieceSize = 64u << 10;
  options.hashingThreads = 2;
  auto writer = format::TraceWriter::create(dir.file("exact.kcap"), options);
  std::mt19937_64 random(5);
  std::vector<std::vector<uint8_t>> contents;
  for (size_t pieces : {7u, 3u, 9u}) {
    std::vector<uint8_t> bytes(pieces * options.pieceSize / 2 + 1 + 77 * pieces);  // a short last piece each
    for (auto& b : bytes) b = static_cast<uint8_t>(random());
    contents.push_back(std::move(bytes));
  }
  capnp::MallocMessageBuilder message;
  auto pre = message.initRoot<Event>().initLaunch().initPre(3);
  for (unsigned i = 0; i < 3; ++i) {
    std::vector<uint8_t> shifted(contents[i].size() + 1);  // stored from an odd address
    std::copy(contents[i].begin(), contents[i].end(), shifted.begin() + 1);
    writer->storeContent(shifted.data() + 1, contents[i].size(), pre[i].initContent());
    writer->flush();  // the buffers come back for the next content
  }
  EXPECT_GT(writer->stats().reusedBuffers, 0u);
  writer->append(message);
  writer->close();
  auto reader = format::TraceReader::open(dir.file("exact.kcap"));
  EXPECT_EQ(reader->forEachEvent([&](const format::EventRef& ref) {
    for (unsigned i = 0; i < 3; ++i) {
      EXPECT_EQ(reader->readContent(ref.event.getLaunch().getPre()[i].getContent()), contents[i]) << i;
    }
    return true;
  }),
            1u);
  for (const auto& chunk : reader->chunks()) EXPECT_EQ(reader->verifyChunk(chunk), "");
}

// Six 64 KiB pieces and a short one, piece 4 a copy of piece 0, with each
// piece's contentHash: what a producer that hashes pieces itself (the shim,
// on the device) has in hand.
struct HashedPieces {
  static constexpr uint32_t kPieceSize = 64u << 10;
  std::vector<uint8_t> data;
  std::vector<format::Hash128> hashes;

  explicit HashedPieces(uint64_t seed) : data(6 * kPieceSize + 999) {
    std::mt19937_64 random(seed);
    for (auto& b : data) b = static_cast<uint8_t>(random());
    std::copy(data.begin(), data.begin() + kPieceSize, data.begin() + 4 * kPieceSize);  // 4 = 0
    for (size_t at = 0; at < data.size(); at += kPieceSize) {
      hashes.push_back(format::contentHash(data.data() + at, std::min<size_t>(kPieceSize, data.size() - at)));
    }
  }
};

// A producer that hashes pieces itself asks which the file lacks: pieces
// stored, queued or repeated within one content are held; a piece stays
// held once it is.
TEST(Writer, MissingPiecesAreThoseTheFileDoesNotHold) {
  TempDir dir;
  format::TraceWriter::Options options;
  options.pieceSize = HashedPieces::kPieceSize;
  const HashedPieces pieces(17);
  const std::vector<uint8_t>& data = pieces.data;
  std::vector<format::Hash128> hashes = pieces.hashes;
  const size_t count = hashes.size();
  std::vector<uint8_t> other(options.pieceSize, 0x5a);
  hashes.push_back(format::contentHash(other.data(), other.size()));

  auto writer = format::TraceWriter::create(dir.file("missing.kcap"), options);
  EXPECT_EQ(writer->missingPieces(hashes), std::vector<uint8_t>(count + 1, 1));
  capnp::MallocMessageBuilder message;
  auto content = message.initRoot<Event>().initLaunch().initPre(1)[0].initContent();
  writer->storeContent(data.data(), 3 * options.pieceSize, content);  // pieces 0-2, so 4 too
  EXPECT_EQ(writer->missingPieces(hashes), (std::vector<uint8_t>{0, 0, 0, 1, 0, 1, 1, 1}));
  writer->storeContent(data.data(), data.size(), content);
  EXPECT_EQ(writer->missingPieces(hashes), (std::vector<uint8_t>{0, 0, 0, 0, 0, 0, 0, 1}));
  writer->flush();
  EXPECT_EQ(writer->missingPieces(hashes), (std::vector<uint8_t>{0, 0, 0, 0, 0, 0, 0, 1}));
  EXPECT_EQ(writer->missingPieces({}), std::vector<uint8_t>{});
  writer->append(message);
  writer->close();
}

// Content the producer hashed itself (the shim, on the device) makes the
// same file as content the writer hashes, and reads back the same.
TEST(Writer, ContentHashedByTheProducerMakesTheSameFile) {
  TempDir dir;
  format::TraceWriter::Options options;
  options.pieceSize = HashedPieces::kPieceSize;
  const HashedPieces pieces(19);
  const std::vector<uint8_t>& data = pieces.data;
  const std::vector<format::Hash128>& hashes = pieces.hashes;
  auto write = [&](const std::string& path, bool hashedByProducer) {
    auto writer = format::TraceWriter::create(path, options);
    capnp::MallocMessageBuilder message;
    auto pre = message.initRoot<Event>().initLaunch().initPre(2);
    for (unsigned r = 0; r < 2; ++r) {  // twice: the second time every piece is there
      if (hashedByProducer) {
        writer->storeHashedContent(data.data(), data.size(), hashes.data(), pre[r].initContent());
      } else {
        writer->storeContent(data.data(), data.size(), pre[r].initContent());
      }
    }
    EXPECT_EQ(writer->stats().uniqueBytes, data.size() - options.pieceSize);
    EXPECT_EQ(writer->stats().contentBytes, 2 * data.size());
    writer->append(message);
    writer->close();
  };
  write(dir.file("stored.kcap"), false);
  write(dir.file("hashed.kcap"), true);
  EXPECT_EQ(readFileBytes(dir.file("hashed.kcap")), readFileBytes(dir.file("stored.kcap")));
  auto reader = format::TraceReader::open(dir.file("hashed.kcap"));
  EXPECT_EQ(reader->forEachEvent([&](const format::EventRef& ref) {
    EXPECT_EQ(reader->readContent(ref.event.getLaunch().getPre()[1].getContent()), data);
    return true;
  }),
            1u);
}

// Page-locks nothing: counts what it is asked, and refuses when told to.
class CountingLocker final : public format::PageLocker {
 public:
  bool lock(void*, size_t bytes) override {
    ++attempts;
    if (refuse) return false;
    locked += bytes;
    return true;
  }
  void unlock(void*, size_t bytes) override { unlocked += bytes; }
  std::atomic<bool> refuse{false};
  std::atomic<size_t> attempts{0}, locked{0}, unlocked{0};
};

// Pieces a producer copied into direct blocks itself (the shim, by DMA)
// make the same file as content the writer copies, and read back the same.
// Direct memory is page-locked a slab at a time, reused, held within its
// bound, and unlocked when the writer goes; where it cannot be page-locked,
// or there is no locker, the producer gets no blocks.
TEST(Writer, DirectPiecesMakeTheSameFile) {
  TempDir dir;
  const HashedPieces pieces(23);
  const std::vector<uint8_t>& data = pieces.data;
  const std::vector<format::Hash128>& hashes = pieces.hashes;
  CountingLocker locker;
  format::TraceWriter::Options options;
  options.pieceSize = HashedPieces::kPieceSize;
  options.pageLocker = &locker;
  options.maxDirectBytes = 64u << 20;  // one slab: 1024 blocks of 64 KiB
  auto write = [&](const std::string& path, bool direct) {
    auto writer = format::TraceWriter::create(path, options);
    capnp::MallocMessageBuilder message;
    auto pre = message.initRoot<Event>().initLaunch().initPre(2);
    for (unsigned r = 0; r < 2; ++r) {  // twice: the second time every piece is there
      auto content = pre[r].initContent();
      if (!direct) {
        writer->storeContent(data.data(), data.size(), content);
        continue;
      }
      content.setSize(data.size());
      content.setPieceSize(options.pieceSize);
      auto list = content.initPieces(static_cast<unsigned>(hashes.size()));
      std::vector<format::Hash128> newHashes;
      std::vector<size_t> newPieces;
      const std::vector<uint8_t> missing = writer->missingPieces(hashes);
      for (size_t i = 0; i < hashes.size(); ++i) {
        list[static_cast<unsigned>(i)].setHigh(hashes[i].high);
        list[static_cast<unsigned>(i)].setLow(hashes[i].low);
        if (missing[i] != 0) {  // pieces 0 and 4 alike: both, the second goes back
          newHashes.push_back(hashes[i]);
          newPieces.push_back(i);
        }
      }
      EXPECT_EQ(newPieces.size(), r == 0 ? hashes.size() : 0u);
      std::vector<format::PieceBlock> blocks = writer->takeDirectBlocks(newPieces.size());
      ASSERT_EQ(blocks.size(), newPieces.size());
      for (size_t j = 0; j < blocks.size(); ++j) {
        const size_t at = newPieces[j] * options.pieceSize,
                     length = std::min<size_t>(options.pieceSize, data.size() - at);
        std::memcpy(blocks[j].data(), data.data() + at, length);
        blocks[j].setSize(length);
      }
      writer->storeDirectPieces(newHashes.data(), blocks);
      EXPECT_TRUE(blocks.empty());
    }
    EXPECT_EQ(writer->stats().uniqueBytes, data.size() - options.pieceSize);
    EXPECT_EQ(writer->stats().directBytes, direct ? data.size() : 0u);
    EXPECT_EQ(writer->stats().pageLockedBytes, direct ? options.maxDirectBytes : 0u);
    writer->append(message);
    writer->close();
  };
  write(dir.file("stored.kcap"), false);
  EXPECT_EQ(locker.locked, 0u) << "no direct blocks taken: nothing page-locked";
  write(dir.file("direct.kcap"), true);
  EXPECT_EQ(readFileBytes(dir.file("direct.kcap")), readFileBytes(dir.file("stored.kcap")));
  auto reader = format::TraceReader::open(dir.file("direct.kcap"));
  EXPECT_EQ(reader->forEachEvent([&](const format::EventRef& ref) {
    EXPECT_EQ(reader->readContent(ref.event.getLaunch().getPre()[1].getContent()), data);
    return true;
  }),
            1u);
  EXPECT_EQ(locker.locked, options.maxDirectBytes);
  EXPECT_EQ(locker.unlocked, locker.locked) << "unlocked when the writer went";

  // The bound: all or nothing, blocks held count, blocks back are reused.
  {
    auto writer = format::TraceWriter::create(dir.file("bound.kcap"), options);
    EXPECT_TRUE(writer->takeDirectBlocks(1025).empty());
    std::vector<format::PieceBlock> all = writer->takeDirectBlocks(1024);
    EXPECT_EQ(all.size(), 1024u);
    EXPECT_TRUE(writer->takeDirectBlocks(1).empty()) << "all held: no room for another slab";
    const uint8_t* first = all[0].data();
    all.erase(all.begin());
    std::vector<format::PieceBlock> again = writer->takeDirectBlocks(1);
    ASSERT_EQ(again.size(), 1u);
    EXPECT_EQ(again[0].data(), first);
    EXPECT_EQ(writer->stats().pageLockedBytes, options.maxDirectBytes);
  }
  EXPECT_EQ(locker.locked, 2 * options.maxDirectBytes);
  EXPECT_EQ(locker.unlocked, locker.locked);

  // Refused (then never asked again), or no locker: no blocks, nothing held.
  locker.refuse = true;
  {
    auto writer = format::TraceWriter::create(dir.file("refused.kcap"), options);
    const size_t attempts = locker.attempts;
    EXPECT_TRUE(writer->takeDirectBlocks(1).empty());
    EXPECT_EQ(writer->stats().pageLockedBytes, 0u);
    EXPECT_GT(writer->stats().pageLockNs, 0u);
    locker.refuse = false;
    EXPECT_TRUE(writer->takeDirectBlocks(1).empty()) << "refused once: not asked again";
    EXPECT_EQ(locker.attempts, attempts + 1);
  }
  options.pageLocker = nullptr;
  auto writer = format::TraceWriter::create(dir.file("none.kcap"), options);
  EXPECT_TRUE(writer->takeDirectBlocks(1).empty());
  EXPECT_EQ(locker.locked, locker.unlocked);
}

TEST(Writer, AppendOverwritesSeq) {
  TempDir dir;
  const auto path = dir.file("seq.kcap");
  auto writer = format::TraceWriter::create(path);
  capnp::MallocMessageBuilder message;
  auto event = message.initRoot<Event>();
  event.setSeq(12345);
  event.initMessage().setText("x");
  EXPECT_EQ(writer->append(message), 0u);
  EXPECT_EQ(message.getRoot<Event>().getSeq(), 0u);
  EXPECT_EQ(writer->append(message), 1u);  // the same builder again
  writer->close();
  auto events = readAllEvents(path);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].get().getSeq(), 0u);
  EXPECT_EQ(events[1].get().getSeq(), 1u);
}

// The writer lays each event out in Cap'n Proto's flat form itself: events
// of one segment and of many (an even count needs the table's padding word,
// over 62 takes capnp's own writer) read back with every field intact.
TEST(Writer, EventsOfManySegmentsReadBackExactly) {
  TempDir dir;
  const auto path = dir.file("segments.kcap");
  auto writer = format::TraceWriter::create(path);
  const std::vector<unsigned> argCounts = {0, 1, 2, 3, 4, 30, 61, 62, 63, 64, 100};
  std::vector<size_t> segmentCounts;
  for (unsigned args : argCounts) {
    // One word a segment: every object the event holds takes a segment of its own.
    capnp::MallocMessageBuilder message(1, capnp::AllocationStrategy::FIXED_SIZE);
    auto begin = message.initRoot<Event>().initTraceBegin();
    begin.setProcessId(args);
    auto argv = begin.initArgv(args);
    for (unsigned i = 0; i < args; ++i) argv.set(i, "argument " + std::to_string(i) + std::string(i % 5, 'x'));
    segmentCounts.push_back(message.getSegmentsForOutput().size());
    writer->append(message);
  }
  writer->close();
  EXPECT_EQ(segmentCounts.front(), 3u);  // root pointer, Event, TraceBegin
  EXPECT_GT(segmentCounts.back(), 64u);
  EXPECT_TRUE(std::any_of(segmentCounts.begin(), segmentCounts.end(), [](size_t n) { return n % 2 == 0; }));

  auto events = readAllEvents(path);
  ASSERT_EQ(events.size(), argCounts.size());
  for (size_t e = 0; e < argCounts.size(); ++e) {
    SCOPED_TRACE("event of " + std::to_string(segmentCounts[e]) + " segments");
    auto event = events[e].get();
    EXPECT_EQ(event.getSeq(), e);
    ASSERT_TRUE(event.isTraceBegin());
    EXPECT_EQ(event.getTraceBegin().getProcessId(), argCounts[e]);
    auto argv = event.getTraceBegin().getArgv();
    ASSERT_EQ(argv.size(), argCounts[e]);
    for (unsigned i = 0; i < argv.size(); ++i) {
      EXPECT_EQ(std::string(argv[i].cStr()), "argument " + std::to_string(i) + std::string(i % 5, 'x'));
    }
  }
}

TEST(Writer, EncodedPiecesAreCopiedFromAnotherTraceByteForByte) {
  // What kcap extract does: pieces read as stored from one trace, written as
  // is into another (no recompression), the events referencing them copied.
  TempDir dir;
  const auto from = dir.file("from.kcap"), to = dir.file("to.kcap");
  std::vector<uint8_t> bytes(3 * 4096 + 100, 0);  // random, zeros, a pattern, a short tail
  std::mt19937 random(7);
  for (size_t i = 0; i < 4096; ++i) bytes[i] = static_cast<uint8_t>(random());
  for (size_t i = 2 * 4096; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i % 7);
  {
    format::TraceWriter::Options options;
    options.pieceSize = 4096;
    auto writer = format::TraceWriter::create(from, options);
    capnp::MallocMessageBuilder message;
    writer->storeContent(bytes.data(), bytes.size(), message.initRoot<Event>().initMemcpy().initData());
    writer->append(message);
    writer->close();
  }
  auto source = format::TraceReader::open(from);
  auto events = readAllEvents(from);
  ASSERT_EQ(events.size(), 1u);
  const auto content = events[0].get().getMemcpy().getData();
  ASSERT_EQ(content.getPieces().size(), 4u);

  format::TraceWriter::Options options;
  options.pieceSize = 1u << 20;  // the copy keeps the recorded pieces whatever its own size
  options.zstdLevel = 19;
  auto writer = format::TraceWriter::create(to, options);
  std::unordered_map<format::Hash128, std::vector<uint8_t>, format::Hash128Hasher> stored;
  for (int pass = 0; pass < 2; ++pass) {  // the second pass is deduplicated
    for (const auto piece : content.getPieces()) {
      const format::Hash128 hash{piece.getHigh(), piece.getLow()};
      const format::ChunkInfo* chunk = source->findBlob(hash);
      ASSERT_NE(chunk, nullptr);
      auto chunkBytes = source->readStoredChunk(*chunk);
      stored[hash] = chunkBytes;
      writer->storeEncodedPiece(hash, chunk->rawSize, std::move(chunkBytes));
    }
  }
  capnp::MallocMessageBuilder message;
  message.setRoot(events[0].get());
  writer->append(message);
  writer->close();
  EXPECT_EQ(writer->stats().blobChunks, 4u);
  EXPECT_EQ(writer->stats().uniqueBytes, bytes.size());
  EXPECT_EQ(writer->stats().contentBytes, 2 * bytes.size());

  auto copy = format::TraceReader::open(to);
  ASSERT_TRUE(copy->indexed());
  EXPECT_TRUE(copy->problems().empty());
  const auto copied = readAllEvents(to);
  ASSERT_EQ(copied.size(), 1u);
  EXPECT_EQ(copy->readContent(copied[0].get().getMemcpy().getData()), bytes);
  for (const auto& chunk : copy->chunks()) {
    if (chunk.kind != format::ChunkKind::kBlob) continue;
    EXPECT_EQ(copy->verifyChunk(chunk), "");
    EXPECT_EQ(copy->readStoredChunk(chunk), stored.at(chunk.hash));  // the very bytes of the source
  }

  // a closed writer takes nothing more; no writer takes what is no blob chunk
  EXPECT_THROW(writer->storeEncodedPiece(format::Hash128{1, 2}, 10, std::vector<uint8_t>(64)), format::FormatError);
  auto fresh = format::TraceWriter::create(dir.file("short.kcap"));
  EXPECT_THROW(fresh->storeEncodedPiece(format::Hash128{1, 2}, 10, std::vector<uint8_t>(20)), format::FormatError);
}

}  // namespace
}  // namespace kcap::test
