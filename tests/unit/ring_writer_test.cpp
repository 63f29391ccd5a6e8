// The flight recorder's ring (format/ring_trace_writer.h): nothing written
// until fired; the last N checkpoints kept with the state events from before
// them; pieces released once no kept event can name them, and stored again
// when met again (a piece stored while checkpoints appended before it are
// not filed yet is kept for its producer's interval); the memory bound; the
// ring file past it (format/ring_spill.h).
#include <gtest/gtest.h>

#include <dirent.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>

#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <capnp/message.h>

#include "errors.h"
#include "hash.h"
#include "ring_spill.h"
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
    spillPath_ = path_ + ".ring";
  }
  void TearDown() override { ::unlink(path_.c_str()); }

  std::unique_ptr<format::RingTraceWriter> make(unsigned checkpoints, size_t maxBytes = size_t{1} << 30,
                                                uint64_t maxSpillBytes = 0) {
    format::TraceWriter::Options options;
    options.pieceSize = kPiece;
    options.exclusive = true;
    format::RingOptions ring;
    ring.checkpoints = checkpoints;
    ring.maxBytes = maxBytes;
    ring.maxSpillBytes = maxSpillBytes;
    ring.spillPath = spillPath_;
    ring.openOutput = [this, options] { return format::TraceWriter::create(path_, options); };
    ring.warn = [this](const std::string& text) { warnings_.push_back(text); };
    return std::make_unique<format::RingTraceWriter>(options, std::move(ring));
  }

  // Names in the test directory that start with the ring file's.
  std::vector<std::string> leftovers() const {
    const size_t slash = spillPath_.rfind('/');
    const std::string directory = spillPath_.substr(0, slash);
    const std::string prefix = spillPath_.substr(slash + 1);
    std::vector<std::string> out;
    DIR* dir = ::opendir(directory.c_str());
    if (dir == nullptr) return {"cannot list " + directory};
    while (const dirent* entry = ::readdir(dir)) {
      if (std::string(entry->d_name).rfind(prefix, 0) == 0) out.emplace_back(entry->d_name);
    }
    ::closedir(dir);
    return out;
  }

  std::string path_;
  std::string spillPath_;
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
  // Fired before the ring filed what was appended (it lags the appends):
  // what filing them drops after fire() is added to the trigger's count.
  appendTrigger(*ring, ring->fire());
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
  uint64_t dropped = 0;
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
      dropped = e.getTrigger().getDroppedEvents();
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
  EXPECT_GT(dropped, 0u);
  EXPECT_EQ(last + 1 - seqs.size(), dropped);
}

// A stream-ordered allocation's first content comes in a WrittenData after
// it, possibly several checkpoints later. Before the window neither is
// needed (the window's first checkpoint holds the memory), even when the
// WrittenData itself lands in the window; inside the window both are kept.
TEST_F(Ring, AFirstContentReadBackLateGoesWithItsAllocation) {
  auto ring = make(2);
  const auto memory = randomBytes(2 * kPiece, 2);
  auto deferredAlloc = [&](uint64_t address) {
    capnp::MallocMessageBuilder m;
    auto a = m.initRoot<Event>().initAlloc();
    a.setAddress(address);
    a.setSize(kPiece);
    a.setInitialDeferred(true);
    return ring->append(m);
  };
  auto firstContent = [&](uint64_t of, uint64_t tag) {
    const auto bytes = randomBytes(kPiece, tag);
    capnp::MallocMessageBuilder m;
    auto w = m.initRoot<Event>().initWrittenData();
    w.setOf(of);
    ring->storeContent(bytes.data(), bytes.size(), w.initData());
    return ring->append(m);
  };
  appendBegin(*ring);
  appendCheckpoint(*ring, 0, memory);
  const uint64_t before = deferredAlloc(0x20000);
  for (uint64_t i = 1; i < 4; ++i) appendCheckpoint(*ring, i, memory);
  const uint64_t late = firstContent(before, 50);  // read back late: in the window, of an allocation before it
  const uint64_t inside = deferredAlloc(0x30000);
  firstContent(inside, 51);
  const uint64_t dropped = ring->fire();
  appendTrigger(*ring, dropped);
  ring->close();

  auto reader = format::TraceReader::open(path_);
  EXPECT_TRUE(reader->problems().empty());
  std::map<uint64_t, bool> deferred;  // seq of each allocation: initialDeferred
  std::vector<uint64_t> completed;    // `of` of each WrittenData
  std::string noteInItsPlace;
  reader->forEachEvent([&](const format::EventRef& ref) {
    if (ref.event.getSeq() == late && ref.event.isMessage()) noteInItsPlace = ref.event.getMessage().getText();
    if (ref.event.isAlloc()) deferred[ref.event.getSeq()] = ref.event.getAlloc().getInitialDeferred();
    if (ref.event.isWrittenData()) {
      completed.push_back(ref.event.getWrittenData().getOf());
      EXPECT_EQ(reader->readContent(ref.event.getWrittenData().getData()), randomBytes(kPiece, 51));
    }
    return true;
  });
  EXPECT_EQ(deferred, (std::map<uint64_t, bool>{{before, false}, {inside, true}}));
  EXPECT_EQ(completed, (std::vector<uint64_t>{inside}));
  // The late one's seq stays, as a note: the trigger's count of what the
  // ring let go still matches the gaps.
  EXPECT_NE(noteInItsPlace.find("allocation at event #" + std::to_string(before)), std::string::npos) << noteInItsPlace;
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
  ring->settle();  // what the ring holds lags the appends
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

// The content before each launch of the trace at `path`, in order.
std::vector<std::vector<uint8_t>> launchInputs(const std::string& path) {
  auto reader = format::TraceReader::open(path);
  EXPECT_TRUE(reader->problems().empty());
  std::vector<std::vector<uint8_t>> inputs;
  reader->forEachEvent([&](const format::EventRef& ref) {
    if (ref.event.isLaunch()) inputs.push_back(reader->readContent(ref.event.getLaunch().getPre()[0].getContent()));
    return true;
  });
  return inputs;
}

// Makes `launch` a launch event naming `input`, stored now.
void launchNaming(format::TraceWriter& w, capnp::MallocMessageBuilder& launch, const std::vector<uint8_t>& input) {
  auto range = launch.initRoot<Event>().initLaunch().initPre(1)[0];
  range.setAddress(0x1000);
  w.storeContent(input.data(), input.size(), range.initContent());
}

TEST_F(Ring, APieceALaunchNamesStaysWithTheLaunch) {
  auto ring = make(2);
  appendBegin(*ring);
  const auto input = randomBytes(kPiece, 77);
  // Stored in the interval before the launch's (as a producer does just
  // before a checkpoint lands between the store and the launch).
  appendCheckpoint(*ring, 0, randomBytes(kPiece, 78));
  capnp::MallocMessageBuilder launch;
  launchNaming(*ring, launch, input);
  appendCheckpoint(*ring, 1, randomBytes(kPiece, 79));
  ring->append(launch);
  // The interval the piece was stored in goes; the launch's stays.
  appendCheckpoint(*ring, 2, randomBytes(kPiece, 80));
  appendTrigger(*ring, ring->fire());
  ring->close();
  EXPECT_EQ(launchInputs(path_), std::vector<std::vector<uint8_t>>{input});
}

// Appends return before the ring files them: a producer that appended two
// checkpoints and then stores a piece is in the third interval, whatever
// the ring has filed. Taken for the first (where the ring still was), the
// piece would go when the next checkpoint lands, before the launch that
// names it, appended just after that checkpoint.
TEST_F(Ring, APieceStoredBeforeTheRingFiledEarlierCheckpointsStays) {
  auto ring = make(2);
  appendBegin(*ring);
  appendCheckpoint(*ring, 0, randomBytes(kPiece, 81));
  appendCheckpoint(*ring, 1, randomBytes(kPiece, 82));
  const auto input = randomBytes(kPiece, 83);
  capnp::MallocMessageBuilder launch;
  launchNaming(*ring, launch, input);
  appendCheckpoint(*ring, 2, randomBytes(kPiece, 84));
  ring->append(launch);
  appendTrigger(*ring, ring->fire());
  ring->close();
  EXPECT_EQ(launchInputs(path_), std::vector<std::vector<uint8_t>>{input});
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

// ---- the ring file ------------------------------------------------------------------

// The checkpoints a written ring holds, each checked against the memory it
// was taken of.
std::vector<uint64_t> writtenCheckpoints(const std::string& path, const std::vector<std::vector<uint8_t>>& states) {
  auto reader = format::TraceReader::open(path);
  EXPECT_TRUE(reader->problems().empty());
  std::vector<uint64_t> ordinals;
  reader->forEachEvent([&](const format::EventRef& ref) {
    if (ref.event.isCheckpoint()) {
      const uint64_t ordinal = ref.event.getCheckpoint().getOrdinal();
      ordinals.push_back(ordinal);
      EXPECT_EQ(reader->readContent(ref.event.getCheckpoint().getRanges()[0].getContent()), states.at(ordinal))
          << "checkpoint " << ordinal;
    }
    return true;
  });
  return ordinals;
}

TEST_F(Ring, TheRingFilePlacesReusesAndJoinsExtents) {
  format::RingSpill spill(spillPath_, 64u << 10);
  EXPECT_TRUE(leftovers().empty());  // unnamed
  const auto a = randomBytes(1000, 1);
  const auto b = randomBytes(600, 2);
  const auto c = randomBytes(5000, 3);
  const auto atA = spill.put(a);
  const auto atB = spill.put(b);
  const auto atC = spill.put(c);
  ASSERT_TRUE(atA && atB && atC);
  EXPECT_EQ(atA->offset, 0u);
  EXPECT_EQ(atB->offset, 1024u);  // whole grains
  EXPECT_EQ(atC->offset, 2048u);
  EXPECT_EQ(spill.read(*atB), b);
  spill.release(*atB);
  const auto d = randomBytes(500, 4);
  const auto atD = spill.put(d);
  ASSERT_TRUE(atD);
  EXPECT_EQ(atD->offset, 1024u);  // b's space again
  EXPECT_EQ(spill.read(*atD), d);
  // Freed neighbours join: a chunk larger than either fits where both were.
  spill.release(*atA);
  spill.release(*atD);
  const auto e = randomBytes(1500, 5);
  const auto atE = spill.put(e);
  ASSERT_TRUE(atE);
  EXPECT_EQ(atE->offset, 0u);
  EXPECT_EQ(spill.read(*atE), e);
  EXPECT_EQ(spill.read(*atC), c);
  // Past the bound there is no room; what is freed at the end shortens it.
  EXPECT_FALSE(spill.put(randomBytes((64u << 10) - 7000, 6)));
  spill.release(*atC);
  spill.release(*atE);
  EXPECT_EQ(spill.endBytes(), 0u);
  EXPECT_EQ(spill.usedBytes(), 0u);
  EXPECT_LE(spill.fileBytes(), 64u << 10);
  EXPECT_TRUE(spill.put(randomBytes((64u << 10) - 7000, 6)));
  EXPECT_THROW(spill.read({1u << 20, 10}), format::FormatError);
}

TEST_F(Ring, SpillsPastTheBufferAndKeepsEveryCheckpointBitExact) {
  // Four checkpoints of 16 new random pieces hold about 256 KiB; the
  // buffer is 100 KiB: the rest goes to the ring file.
  auto ring = make(4, 100u << 10, 8u << 20);
  appendBegin(*ring);
  const auto image = randomBytes(3 * kPiece + 5, 1);
  appendModule(*ring, image, 7);
  std::vector<std::vector<uint8_t>> states;
  for (uint64_t i = 0; i < 10; ++i) {
    states.push_back(randomBytes(16 * kPiece, 400 + i));
    appendCheckpoint(*ring, i, states.back());
    EXPECT_LE(ring->ringStats().bytes, 100u << 10) << i;
  }
  const auto stats = ring->ringStats();
  EXPECT_EQ(stats.segments, 4u);
  EXPECT_EQ(stats.droppedSegments, 7u);  // the one before the first checkpoint, and six by count
  EXPECT_GT(stats.spilledPieces, 16u);
  EXPECT_GT(stats.spilledBytes, 16u * kPiece);
  EXPECT_GT(stats.spillFileBytes, 0u);
  EXPECT_TRUE(warnings_.empty());
  EXPECT_TRUE(leftovers().empty());
  appendTrigger(*ring, ring->fire());
  ring->close();
  EXPECT_TRUE(leftovers().empty());
  EXPECT_EQ(writtenCheckpoints(path_, states), (std::vector<uint64_t>{6, 7, 8, 9}));
  auto reader = format::TraceReader::open(path_);
  bool sawModule = false;
  reader->forEachEvent([&](const format::EventRef& ref) {
    if (ref.event.isModuleLoad()) {
      sawModule = true;
      EXPECT_EQ(reader->readContent(ref.event.getModuleLoad().getImage()), image);
    }
    return true;
  });
  EXPECT_TRUE(sawModule);
}

TEST_F(Ring, ReusesRingFileSpaceAcrossManyCheckpoints) {
  // Fifty checkpoints of 64 KiB each pass through a 1 MiB file: only
  // space given back makes room for them.
  auto ring = make(2, 100u << 10, 1u << 20);
  appendBegin(*ring);
  std::vector<std::vector<uint8_t>> states;
  for (uint64_t i = 0; i < 50; ++i) {
    states.push_back(randomBytes(16 * kPiece, 500 + i));
    appendCheckpoint(*ring, i, states.back());
    const auto stats = ring->ringStats();
    if (i >= 2) {  // the one before the first checkpoint gone
      EXPECT_EQ(stats.segments, 2u) << i;
    }
    EXPECT_LE(stats.spillFileBytes, 1u << 20);
  }
  EXPECT_EQ(ring->ringStats().droppedSegments, 49u);  // none early
  EXPECT_TRUE(warnings_.empty());
  ring->close();  // not fired
  EXPECT_TRUE(leftovers().empty());
  EXPECT_FALSE(exists(path_));
}

TEST_F(Ring, DropsEarlyWhenTheRingFileIsFullToo) {
  auto ring = make(100, 100u << 10, 256u << 10);
  appendBegin(*ring);
  std::vector<std::vector<uint8_t>> states;
  for (uint64_t i = 0; i < 12; ++i) {
    states.push_back(randomBytes(16 * kPiece, 600 + i));
    appendCheckpoint(*ring, i, states.back());
  }
  const auto stats = ring->ringStats();
  // More than the buffer alone holds (one or two), fewer than all twelve.
  EXPECT_GE(stats.segments, 3u);
  EXPECT_LT(stats.segments, 8u);
  EXPECT_LE(stats.spilledBytes, 256u << 10);
  EXPECT_LE(stats.bytes, 100u << 10);
  EXPECT_TRUE(warnings_.empty());  // a full file is the bound, not a failure
  appendTrigger(*ring, ring->fire());
  ring->close();
  std::vector<uint64_t> expected;
  for (uint64_t i = 12 - stats.segments; i < 12; ++i) expected.push_back(i);
  EXPECT_EQ(writtenCheckpoints(path_, states), expected);
  EXPECT_TRUE(leftovers().empty());
}

TEST_F(Ring, ARingFileThatCannotBeMadeWarnsOnceAndDrops) {
  spillPath_ = ::testing::TempDir() + "no_such_directory_" + std::to_string(::getpid()) + "/t.kcap.ring";
  auto ring = make(100, 200u << 10, 8u << 20);
  appendBegin(*ring);
  std::vector<std::vector<uint8_t>> states;
  for (uint64_t i = 0; i < 10; ++i) {
    states.push_back(randomBytes(16 * kPiece, 700 + i));
    appendCheckpoint(*ring, i, states.back());
  }
  const auto stats = ring->ringStats();
  EXPECT_LT(stats.segments, 4u);
  EXPECT_EQ(stats.spilledPieces, 0u);
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_NE(warnings_[0].find("ring file failed"), std::string::npos) << warnings_[0];
  appendTrigger(*ring, ring->fire());
  ring->close();
  EXPECT_EQ(writtenCheckpoints(path_, states).back(), 9u);
}

TEST_F(Ring, AFileSizeLimitBoundsTheRingFileInsteadOfEndingTheProgram) {
  // Past RLIMIT_FSIZE a write raises SIGXFSZ, which ends the process: the
  // ring, in a child under a small limit, must stay within it.
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    int code = 0;
    try {
      const rlimit limit{64u << 10, 64u << 10};
      if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) ::_exit(10);
      std::signal(SIGXFSZ, SIG_DFL);
      auto ring = make(100, 160u << 10, 8u << 20);
      appendBegin(*ring);
      for (uint64_t i = 0; i < 10; ++i) appendCheckpoint(*ring, i, randomBytes(16 * kPiece, 800 + i));
      const auto stats = ring->ringStats();
      if (stats.spilledPieces == 0) code = 11;
      if (stats.spilledBytes > (64u << 10) || stats.spillFileBytes > (64u << 10)) code = 12;
      if (stats.droppedSegments == 0) code = 13;
      for (const std::string& warning : warnings_) {
        std::fprintf(stderr, "%s\n", warning.c_str());
        code = 14;
      }
      ring->close();
    } catch (...) {
      code = 15;
    }
    ::_exit(code);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_TRUE(leftovers().empty());
}

}  // namespace
}  // namespace kcap::test
