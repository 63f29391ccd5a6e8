// The flight recorder's ring (format/ring_trace_writer.h): nothing written
// until fired; the last N checkpoints kept with the state events from before
// them; pieces released once no kept event can name them, and stored again
// when met again (a piece stored while checkpoints appended before it are
// not filed yet is kept for its producer's interval); the memory bound
// (the ring file past it: ring_spill_test.cpp).
#include <gtest/gtest.h>

#include <unistd.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include <capnp/message.h>

#include "errors.h"
#include "ring_test_support.h"
#include "ring_trace_writer.h"
#include "trace_files.h"
#include "trace_reader.h"

namespace kcap::test {
namespace {

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
  expectModuleImage(path_, image);
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

}  // namespace
}  // namespace kcap::test
