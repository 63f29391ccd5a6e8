// The flight recorder's ring (format/ring_trace_writer.h): nothing written
// until fired; the last N checkpoints kept with the state events from before
// them; pieces released once no kept event can name them, and stored again
// when met again; the memory bound.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <random>
#include <set>
#include <string>
#include <vector>

#include <capnp/message.h>

#include "errors.h"
#include "hash.h"
#include "ring_trace_writer.h"
#include "trace_files.h"
#include "trace_reader.h"

namespace kcap::test {
namespace {

using format::contentHash;
using format::Hash128;
using schema::Event;

constexpr uint32_t kPiece = 4096;

std::vector<uint8_t> randomBytes(size_t size, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> bytes(size);
  for (auto& b : bytes) b = static_cast<uint8_t>(rng());
  return bytes;
}

bool exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

class Ring : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = ::testing::TempDir() + "ring_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".kcap";
    ::unlink(path_.c_str());
  }
  void TearDown() override { ::unlink(path_.c_str()); }

  std::unique_ptr<format::RingTraceWriter> make(unsigned checkpoints, size_t maxBytes = size_t{1} << 30) {
    format::TraceWriter::Options options;
    options.pieceSize = kPiece;
    options.exclusive = true;
    format::RingOptions ring;
    ring.checkpoints = checkpoints;
    ring.maxBytes = maxBytes;
    ring.openOutput = [this, options] { return format::TraceWriter::create(path_, options); };
    ring.warn = [this](const std::string& text) { warnings_.push_back(text); };
    return std::make_unique<format::RingTraceWriter>(options, std::move(ring));
  }

  std::string path_;
  std::vector<std::string> warnings_;
};

void appendBegin(format::TraceWriter& w) {
  capnp::MallocMessageBuilder m;
  m.initRoot<Event>().initTraceBegin();
  w.append(m);
}

void appendModule(format::TraceWriter& w, const std::vector<uint8_t>& image, uint64_t handle) {
  capnp::MallocMessageBuilder m;
  auto load = m.initRoot<Event>().initModuleLoad();
  load.setHandle(handle);
  w.storeContent(image.data(), image.size(), load.initImage());
  w.append(m);
}

void appendCopy(format::TraceWriter& w, const std::vector<uint8_t>& bytes, uint64_t dst) {
  capnp::MallocMessageBuilder m;
  auto c = m.initRoot<Event>().initMemcpy();
  c.setDst(dst);
  c.setSize(bytes.size());
  w.storeContent(bytes.data(), bytes.size(), c.initData());
  w.append(m);
}

void appendAlloc(format::TraceWriter& w, uint64_t address) {
  capnp::MallocMessageBuilder m;
  auto a = m.initRoot<Event>().initAlloc();
  a.setAddress(address);
  a.setSize(4096);
  w.append(m);
}

// A checkpoint of one range holding `memory`, stored as the shim does: the
// pieces the ring lacks are stored, the others only named.
void appendCheckpoint(format::TraceWriter& w, uint64_t ordinal, const std::vector<uint8_t>& memory) {
  std::vector<Hash128> hashes;
  for (size_t at = 0; at < memory.size(); at += kPiece) {
    hashes.push_back(contentHash(memory.data() + at, std::min<size_t>(kPiece, memory.size() - at)));
  }
  const std::vector<uint8_t> missing = w.missingPieces(hashes);
  capnp::MallocMessageBuilder scratch;
  for (size_t i = 0; i < hashes.size(); ++i) {
    if (missing[i]) {
      const size_t length = std::min<size_t>(kPiece, memory.size() - i * kPiece);
      w.storeHashedContent(memory.data() + i * kPiece, length, &hashes[i], scratch.initRoot<schema::Content>());
    }
  }
  capnp::MallocMessageBuilder m;
  auto c = m.initRoot<Event>().initCheckpoint();
  c.setOrdinal(ordinal);
  auto range = c.initRanges(1)[0];
  range.setAddress(0x1000);
  auto content = range.initContent();
  content.setSize(memory.size());
  content.setPieceSize(kPiece);
  auto pieces = content.initPieces(static_cast<unsigned>(hashes.size()));
  for (unsigned i = 0; i < hashes.size(); ++i) {
    pieces[i].setHigh(hashes[i].high);
    pieces[i].setLow(hashes[i].low);
  }
  w.append(m);
}

void appendTrigger(format::TraceWriter& w, uint64_t dropped) {
  capnp::MallocMessageBuilder m;
  auto t = m.initRoot<Event>().initTrigger();
  t.setKind(schema::TriggerKind::API);
  t.setReason("test");
  t.setDroppedEvents(dropped);
  w.append(m);
  capnp::MallocMessageBuilder end;
  end.initRoot<Event>().initTraceEnd().setEventCount(w.stats().events);
  w.append(end);
}

TEST_F(Ring, WritesNothingUnlessFired) {
  auto ring = make(2);
  appendBegin(*ring);
  appendModule(*ring, randomBytes(10000, 1), 7);
  for (uint64_t i = 0; i < 4; ++i) appendCheckpoint(*ring, i, randomBytes(3 * kPiece, 10 + i));
  ring->close();
  EXPECT_FALSE(exists(path_));
  EXPECT_TRUE(ring->path().empty());
}

TEST_F(Ring, KeepsTheLastCheckpointsAndTheStateBeforeThem) {
  auto ring = make(2);
  const auto image = randomBytes(3 * kPiece + 5, 1);
  const auto memory = randomBytes(4 * kPiece, 2);
  appendBegin(*ring);
  appendModule(*ring, image, 7);
  appendAlloc(*ring, 0x1000);
  std::vector<std::vector<uint8_t>> copies;
  for (uint64_t i = 0; i < 6; ++i) {
    std::vector<uint8_t> state = memory;
    state[i] ^= 0xff;  // one piece changes each time
    appendCheckpoint(*ring, i, state);
    copies.push_back(randomBytes(kPiece, 100 + i));
    appendCopy(*ring, copies.back(), 0x1000);
    appendAlloc(*ring, 0x10000 * (i + 2));
  }
  const uint64_t dropped = ring->fire();
  EXPECT_GT(dropped, 0u);
  appendTrigger(*ring, dropped);
  ring->close();
  ASSERT_TRUE(exists(path_));
  EXPECT_EQ(ring->path(), path_);

  auto reader = format::TraceReader::open(path_);
  EXPECT_TRUE(reader->problems().empty());
  std::vector<uint64_t> ordinals;
  std::vector<uint64_t> allocs;
  std::set<uint64_t> seqs;
  uint64_t last = 0;
  bool first = true;
  bool sawModule = false;
  bool sawTrigger = false;
  std::vector<std::vector<uint8_t>> copied;
  reader->forEachEvent([&](const format::EventRef& ref) {
    const auto e = ref.event;
    if (!first) {
      EXPECT_GT(e.getSeq(), last);
    }
    first = false;
    last = e.getSeq();
    seqs.insert(e.getSeq());
    if (e.isCheckpoint()) {
      ordinals.push_back(e.getCheckpoint().getOrdinal());
      std::vector<uint8_t> expected = memory;
      expected[e.getCheckpoint().getOrdinal()] ^= 0xff;
      EXPECT_EQ(reader->readContent(e.getCheckpoint().getRanges()[0].getContent()), expected);
    }
    if (e.isModuleLoad()) {
      sawModule = true;
      EXPECT_EQ(reader->readContent(e.getModuleLoad().getImage()), image);
    }
    if (e.isAlloc()) allocs.push_back(e.getAlloc().getAddress());
    if (e.isMemcpy()) copied.push_back(reader->readContent(e.getMemcpy().getData()));
    if (e.isTrigger()) {
      sawTrigger = true;
      EXPECT_EQ(e.getTrigger().getDroppedEvents(), dropped);
    }
    return true;
  });
  EXPECT_EQ(ordinals, (std::vector<uint64_t>{4, 5}));
  EXPECT_TRUE(sawModule);
  EXPECT_TRUE(sawTrigger);
  EXPECT_EQ(*seqs.begin(), 0u);  // traceBegin
  // Every allocation is kept, those of dropped segments too.
  EXPECT_EQ(allocs.size(), 7u);
  // The copies of the two kept intervals, not those before.
  ASSERT_EQ(copied.size(), 2u);
  EXPECT_EQ(copied[0], copies[4]);
  EXPECT_EQ(copied[1], copies[5]);
  // The gaps are the dropped events: seq numbers run to the last one.
  EXPECT_EQ(last + 1 - seqs.size(), dropped);
}

TEST_F(Ring, ReleasesPiecesNoKeptEventNamesAndStoresThemAgain) {
  auto ring = make(1);
  appendBegin(*ring);
  const auto once = randomBytes(kPiece, 5);
  const Hash128 hash = contentHash(once.data(), once.size());
  appendCheckpoint(*ring, 0, randomBytes(kPiece, 50));
  appendCopy(*ring, once, 0x1000);
  EXPECT_EQ(ring->missingPieces({hash})[0], 0);
  // A piece stored just before a checkpoint survives the next one: its
  // event may come just after.
  appendCheckpoint(*ring, 1, randomBytes(kPiece, 51));
  EXPECT_EQ(ring->ringStats().segments, 1u);
  appendCheckpoint(*ring, 2, randomBytes(kPiece, 52));
  EXPECT_EQ(ring->missingPieces({hash})[0], 1) << "not released";
  // Met again: stored again, and written with the event that names it.
  appendCopy(*ring, once, 0x2000);
  EXPECT_EQ(ring->missingPieces({hash})[0], 0);
  appendTrigger(*ring, ring->fire());
  ring->close();
  auto reader = format::TraceReader::open(path_);
  int copies = 0;
  reader->forEachEvent([&](const format::EventRef& ref) {
    if (ref.event.isMemcpy()) {
      ++copies;
      EXPECT_EQ(reader->readContent(ref.event.getMemcpy().getData()), once);
    }
    return true;
  });
  EXPECT_EQ(copies, 1);
}

TEST_F(Ring, APieceStoredOnceStaysWhileLaterCheckpointsNameIt) {
  auto ring = make(1);
  appendBegin(*ring);
  const auto memory = randomBytes(8 * kPiece, 9);
  const auto pieces = [&] { return ring->ringStats().pieces; };
  for (uint64_t i = 0; i < 10; ++i) appendCheckpoint(*ring, i, memory);  // stored by the first only
  EXPECT_EQ(pieces(), 8u);
  appendTrigger(*ring, ring->fire());
  ring->close();
  auto reader = format::TraceReader::open(path_);
  int checkpoints = 0;
  reader->forEachEvent([&](const format::EventRef& ref) {
    if (ref.event.isCheckpoint()) {
      ++checkpoints;
      EXPECT_EQ(ref.event.getCheckpoint().getOrdinal(), 9u);
      EXPECT_EQ(reader->readContent(ref.event.getCheckpoint().getRanges()[0].getContent()), memory);
    }
    return true;
  });
  EXPECT_EQ(checkpoints, 1);
}

TEST_F(Ring, ModuleImagesFromBeforeTheWindowArePinned) {
  auto ring = make(1);
  appendBegin(*ring);
  const auto image = randomBytes(2 * kPiece, 3);
  appendModule(*ring, image, 1);
  for (uint64_t i = 0; i < 5; ++i) appendCheckpoint(*ring, i, randomBytes(kPiece, 60 + i));
  const Hash128 first = contentHash(image.data(), kPiece);
  EXPECT_EQ(ring->missingPieces({first})[0], 0);
  appendTrigger(*ring, ring->fire());
  ring->close();
  auto reader = format::TraceReader::open(path_);
  bool saw = false;
  reader->forEachEvent([&](const format::EventRef& ref) {
    if (ref.event.isModuleLoad()) {
      saw = true;
      EXPECT_EQ(reader->readContent(ref.event.getModuleLoad().getImage()), image);
    }
    return true;
  });
  EXPECT_TRUE(saw);
}

TEST_F(Ring, DropsOldSegmentsEarlyPastTheBoundButNeverTheNewest) {
  // Random pieces do not compress: each checkpoint of 16 new pieces holds
  // about 64 KiB. (The pieces of the segment before the newest are held one
  // checkpoint longer: the bound is not exact.)
  auto ring = make(100, 200u << 10);
  appendBegin(*ring);
  for (uint64_t i = 0; i < 10; ++i) appendCheckpoint(*ring, i, randomBytes(16 * kPiece, 200 + i));
  auto stats = ring->ringStats();
  EXPECT_GE(stats.segments, 1u);
  EXPECT_LT(stats.segments, 4u);
  EXPECT_TRUE(warnings_.empty());
  // One interval alone over the bound: kept, said once.
  appendCheckpoint(*ring, 10, randomBytes(80 * kPiece, 300));
  appendCheckpoint(*ring, 11, randomBytes(80 * kPiece, 301));
  stats = ring->ringStats();
  EXPECT_EQ(stats.segments, 1u);
  EXPECT_GT(stats.bytes, 200u << 10);
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_NE(warnings_[0].find("over the bound"), std::string::npos);
  appendTrigger(*ring, ring->fire());
  ring->close();
  auto reader = format::TraceReader::open(path_);
  std::vector<uint64_t> ordinals;
  reader->forEachEvent([&](const format::EventRef& ref) {
    if (ref.event.isCheckpoint()) ordinals.push_back(ref.event.getCheckpoint().getOrdinal());
    return true;
  });
  EXPECT_EQ(ordinals, (std::vector<uint64_t>{11}));
}

TEST_F(Ring, DoesNotReplaceAFileAtTheOutput) {
  writeFileBytes(path_, std::vector<uint8_t>{'m', 'i', 'n', 'e'});
  auto ring = make(1);
  appendBegin(*ring);
  ring->fire();
  EXPECT_THROW(ring->close(), format::FormatError);
  EXPECT_EQ(readFileBytes(path_), (std::vector<uint8_t>{'m', 'i', 'n', 'e'}));
}

TEST_F(Ring, APieceALaunchNamesStaysWithTheLaunch) {
  auto ring = make(2);
  appendBegin(*ring);
  const auto input = randomBytes(kPiece, 77);
  // Stored in the interval before the launch's (as a producer does just
  // before a checkpoint lands between the store and the launch).
  appendCheckpoint(*ring, 0, randomBytes(kPiece, 78));
  capnp::MallocMessageBuilder launch;
  auto range = launch.initRoot<Event>().initLaunch().initPre(1)[0];
  range.setAddress(0x1000);
  ring->storeContent(input.data(), input.size(), range.initContent());
  appendCheckpoint(*ring, 1, randomBytes(kPiece, 79));
  ring->append(launch);
  // The interval the piece was stored in goes; the launch's stays.
  appendCheckpoint(*ring, 2, randomBytes(kPiece, 80));
  appendTrigger(*ring, ring->fire());
  ring->close();
  auto reader = format::TraceReader::open(path_);
  int launches = 0;
  reader->forEachEvent([&](const format::EventRef& ref) {
    if (ref.event.isLaunch()) {
      ++launches;
      EXPECT_EQ(reader->readContent(ref.event.getLaunch().getPre()[0].getContent()), input);
    }
    return true;
  });
  EXPECT_EQ(launches, 1);
}

TEST_F(Ring, AFileWriterTakesNumberedEventsWithGaps) {
  format::TraceWriter::Options options;
  options.pieceSize = kPiece;
  auto writer = format::TraceWriter::create(path_, options);
  for (uint64_t seq : {0, 1, 5, 6, 9}) {
    capnp::MallocMessageBuilder m;
    m.initRoot<Event>().setSeq(seq);
    m.getRoot<Event>().initMessage().setText("kept");
    EXPECT_EQ(writer->appendNumbered(m), seq);
  }
  capnp::MallocMessageBuilder back;
  back.initRoot<Event>().setSeq(9);
  EXPECT_THROW(writer->appendNumbered(back), format::FormatError);
  capnp::MallocMessageBuilder next;
  next.initRoot<Event>().initMessage().setText("numbered by the writer");
  EXPECT_EQ(writer->append(next), 10u);
  writer->close();
  auto reader = format::TraceReader::open(path_);
  EXPECT_TRUE(reader->problems().empty());
  std::vector<uint64_t> seqs;
  reader->forEachEvent([&](const format::EventRef& ref) {
    seqs.push_back(ref.event.getSeq());
    return true;
  });
  EXPECT_EQ(seqs, (std::vector<uint64_t>{0, 1, 5, 6, 9, 10}));
  // A record chunk's events are numbered one by one: a gap starts a chunk.
  size_t recordChunks = 0;
  for (const auto& chunk : reader->chunks()) recordChunks += chunk.kind == format::ChunkKind::kRecords;
  EXPECT_EQ(recordChunks, 3u);
}

}  // namespace
}  // namespace kcap::test
