// The flight recorder's ring file (format/ring_spill.h): extents placed,
// reused and joined; the ring spilling past its memory bound with every
// checkpoint kept bit-exact; the file's own bound, a ring file that cannot
// be made, and a file size limit, each dropping the oldest instead of
// ending the program.
#include <gtest/gtest.h>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <string>
#include <vector>

#include <capnp/message.h>

#include "errors.h"
#include "ring_spill.h"
#include "ring_test_support.h"
#include "ring_trace_writer.h"
#include "trace_reader.h"

namespace kcap::test {
namespace {

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
  expectModuleImage(path_, image);
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

// A traceBegin, then `count` checkpoints of 16 pieces of random memory
// (seeds from `seed` on); returns the memory of each.
std::vector<std::vector<uint8_t>> beginAndCheckpoints(format::TraceWriter& w, uint64_t count, uint64_t seed) {
  appendBegin(w);
  std::vector<std::vector<uint8_t>> states;
  for (uint64_t i = 0; i < count; ++i) {
    states.push_back(randomBytes(16 * kPiece, seed + i));
    appendCheckpoint(w, i, states.back());
  }
  return states;
}

TEST_F(Ring, DropsEarlyWhenTheRingFileIsFullToo) {
  auto ring = make(100, 100u << 10, 256u << 10);
  const auto states = beginAndCheckpoints(*ring, 12, 600);
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
  const auto states = beginAndCheckpoints(*ring, 10, 700);
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
