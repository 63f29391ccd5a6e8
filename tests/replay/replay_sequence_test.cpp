// `kcap replay` of sequences against the driver double: the recorded copies
// and memsets between launches reapplied (1D, 2D row by row, 3D slice by
// slice), programmatic dependent launches kept behind the launch before,
// and copies from arrays that cannot be reapplied said so.
#include "replay_cli.h"
#include "trace_files.h"
#include "trace_reader.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <regex>
#include <string>
#include <vector>

namespace kcap_test {
namespace {

using namespace kcap_test::replay_cli;  // the replay tests' shared helpers (replay_cli.h)

// ---- (d) sequences ----------------------------------------------------------------------

TEST_F(Replay, ASequenceReappliesTheRecordedCopiesAndMemsets) {
  // Launches 1..4 read what the program's memset, copies and earlier
  // launches left; replayed in order from launch 0's pre-state, they
  // reproduce only if replay re-applies those between them.
  const Outcome run = replay({sequence(), "--range", "0..4", "-v"});
  EXPECT_EQ(run.exitCode, kExitOk) << run.describe();
  for (uint64_t i = 0; i < 5; ++i) {
    EXPECT_NE(row(run.out, i).find("REPRODUCED"), std::string::npos) << i << ": " << run.out;
  }
  EXPECT_NE(row(run.out, 4).find("reduce_sum"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("5 launches: 5 REPRODUCED"), std::string::npos) << run.out;
  // -v lists every compared buffer
  EXPECT_EQ(occurrences(run.out, ": identical"), 10u) << run.out;

  const Outcome middle = replay({sequence(), "--range", "1..3", "--no-fixed-va"});
  EXPECT_EQ(middle.exitCode, kExitOk) << middle.describe();
  EXPECT_NE(middle.out.find("3 launches: 3 REPRODUCED"), std::string::npos) << middle.out;
  EXPECT_TRUE(row(middle.out, 0).empty()) << middle.out;
  EXPECT_TRUE(row(middle.out, 4).empty()) << middle.out;

  // each launch alone, from its own pre-state, too
  const Outcome alone = replay({sequence(), "--all"});
  EXPECT_EQ(alone.exitCode, kExitOk) << alone.describe();
  EXPECT_NE(alone.out.find("5 launches: 5 REPRODUCED"), std::string::npos) << alone.out;
}

TEST_F(Replay, ALaunchWithProgrammaticStreamSerializationRunsBehindThePreviousOneInASequence) {
  // pdl: axpy (x, y); axpy with programmatic stream serialization on the
  // same stream; axpy. In a sequence the second is submitted right behind
  // the first, so the two are compared after both ran: the first without
  // y, which the second changes (y is compared with the second).
  const Outcome run = replay({pdl(), "--range", "0..2", "--json"});
  EXPECT_EQ(run.exitCode, kExitOk) << run.describe();
  EXPECT_NE(run.out.find("3 launches: 3 REPRODUCED"), std::string::npos) << run.out;
  const std::string first = jsonLaunch(run.out, 0), second = jsonLaunch(run.out, 1), third = jsonLaunch(run.out, 2);
  EXPECT_NE(first.find("launch 1 ran overlapped with it (programmatic dependent launch); compared after both, but "
                       "for the ranges that launch changes"),
            std::string::npos)
      << first;
  EXPECT_NE(first.find("\"label\":\"param 1\""), std::string::npos) << first;
  EXPECT_EQ(first.find("\"label\":\"param 2\""), std::string::npos) << first;
  EXPECT_NE(second.find("ran overlapped with the launch before it (programmatic dependent launch)"), std::string::npos)
      << second;
  EXPECT_NE(second.find("\"label\":\"param 2\""), std::string::npos) << second;
  EXPECT_EQ(third.find("overlapped"), std::string::npos) << third;

  // Each alone, from its own pre-state: nothing runs together.
  const Outcome alone = replay({pdl(), "--all", "--json"});
  EXPECT_EQ(alone.exitCode, kExitOk) << alone.describe();
  EXPECT_EQ(alone.out.find("overlapped"), std::string::npos) << alone.out;
}

// The pitched or volume scenario's events (programs/replay_scenarios.cpp),
// read back: its 2D and 3D copies (width != 0), 2D memsets and launches.
struct PitchedTrace {
  std::vector<kcap::test::OwnedEvent> events;
  std::vector<kcap::schema::Event::Reader> pitchedCopies, memsets2D, launches;
  explicit PitchedTrace(const std::string& path) : events(kcap::test::readAllEvents(path)) {
    for (const auto& owned : events) {
      const auto e = owned.get();
      if (e.isMemcpy() && e.getMemcpy().getWidth() != 0) {
        pitchedCopies.push_back(e);
      } else if (e.isMemset() && e.getMemset().getHeight() > 1) {
        memsets2D.push_back(e);
      } else if (e.isLaunch()) {
        launches.push_back(e);
      }
    }
  }
};

// The bytes a launch's pre-state holds for the range at `address`.
std::vector<uint8_t> preBytes(kcap::format::TraceReader& reader, kcap::schema::Event::Reader launch, uint64_t address) {
  for (const auto range : launch.getLaunch().getPre()) {
    if (range.getAddress() == address) {
      return reader.readContent(range.getContent());
    }
  }
  return {};
}

TEST_F(Replay, ASequenceReappliesThe2DCopiesAndMemsetsRowByRow) {
  namespace schema = kcap::schema;
  const PitchedTrace trace(pitched());
  auto reader = kcap::format::TraceReader::open(pitched());
  ASSERT_EQ(trace.pitchedCopies.size(), 2u);
  ASSERT_EQ(trace.memsets2D.size(), 1u);
  ASSERT_EQ(trace.launches.size(), 3u);
  constexpr uint64_t kPitch = 512;
  uint64_t p = 0;
  for (const auto& owned : trace.events) {
    const auto e = owned.get();
    if (e.isAlloc() && e.getAlloc().getKind() == schema::AllocKind::MEM_ALLOC_PITCH) {
      p = e.getAlloc().getAddress();
      EXPECT_EQ(e.getAlloc().getPitch(), kPitch);
      EXPECT_EQ(e.getAlloc().getSize(), 8 * kPitch);
    }
  }
  ASSERT_NE(p, 0u);

  // Host to device: 8 rows of 64 floats, from host rows 80 floats apart,
  // stored packed.
  const auto up = trace.pitchedCopies[0].getMemcpy();
  EXPECT_EQ(up.getDirection(), schema::CopyDirection::HOST_TO_DEVICE);
  EXPECT_EQ(up.getDst(), p);
  EXPECT_EQ(up.getWidth(), 256u);
  EXPECT_EQ(up.getHeight(), 8u);
  EXPECT_EQ(up.getDstPitch(), kPitch);
  EXPECT_EQ(up.getSrcPitch(), 320u);
  EXPECT_EQ(up.getSize(), 2048u);
  const std::vector<uint8_t> packed = reader->readContent(up.getData());
  ASSERT_EQ(packed.size(), 2048u);
  std::vector<float> rows(512);
  std::memcpy(rows.data(), packed.data(), packed.size());
  for (size_t r = 0; r < 8; ++r) {
    for (size_t c = 0; c < 64; ++c) {
      ASSERT_EQ(rows[r * 64 + c], static_cast<float>(r * 100 + c)) << r << "," << c;
    }
  }
  // The memset: rows 2..5 from element 16, 32 elements each.
  const auto set = trace.memsets2D[0].getMemset();
  EXPECT_EQ(set.getDst(), p + 2 * kPitch + 64);
  EXPECT_EQ(set.getElementSize(), 4u);
  EXPECT_EQ(set.getCount(), 32u);
  EXPECT_EQ(set.getHeight(), 4u);
  EXPECT_EQ(set.getPitch(), kPitch);
  // Device to device, from y into elements 32..63 of each row: no data.
  const auto across = trace.pitchedCopies[1].getMemcpy();
  EXPECT_EQ(across.getDirection(), schema::CopyDirection::DEVICE_TO_DEVICE);
  EXPECT_EQ(across.getDst(), p + 128);
  EXPECT_NE(across.getSrc(), 0u);
  EXPECT_EQ(across.getWidth(), 128u);
  EXPECT_EQ(across.getHeight(), 8u);
  EXPECT_EQ(across.getDstPitch(), kPitch);
  EXPECT_EQ(across.getSrcPitch(), kPitch);
  EXPECT_EQ(across.getData().getSize(), 0u);
  EXPECT_TRUE(trace.pitchedCopies[0].getSeq() < trace.launches[1].getSeq() &&
              trace.pitchedCopies[1].getSeq() < trace.launches[2].getSeq());

  // A sequence restores p once, from launch 0's pre-state: launches 1 and
  // 2 read a p that only the 2D copies and the memset made.
  const auto p0 = preBytes(*reader, trace.launches[0], p);
  const auto p1 = preBytes(*reader, trace.launches[1], p);
  const auto p2 = preBytes(*reader, trace.launches[2], p);
  ASSERT_EQ(p0.size(), 4096u);
  EXPECT_NE(p1, p0);
  EXPECT_NE(p2, p1);

  const Outcome run = replay({pitched(), "--range", "0..2", "--json"});
  EXPECT_EQ(run.exitCode, kExitOk) << run.describe();
  EXPECT_EQ(occurrences(run.out, "\"verdict\":\"REPRODUCED\""), 3u) << run.out;
  EXPECT_TRUE(balancedJson(run.out)) << run.out;
  const Outcome relocated = replay({pitched(), "--range", "0..2", "--no-fixed-va"});
  EXPECT_EQ(relocated.exitCode, kExitOk) << relocated.describe();
  EXPECT_NE(relocated.out.find("3 launches: 3 REPRODUCED"), std::string::npos) << relocated.out;
  const Outcome later = replay({pitched(), "--range", "1..2", "--no-fixed-va"});
  EXPECT_EQ(later.exitCode, kExitOk) << later.describe();
  EXPECT_NE(later.out.find("2 launches: 2 REPRODUCED"), std::string::npos) << later.out;
}

// `source` written to `path` (uncompressed), each of its events passed to
// `change` as a copy it may edit; returns the seq of the last one it edited.
uint64_t rewritten(const std::string& source, const std::string& path,
                   const std::function<bool(kcap::schema::Event::Builder)>& change) {
  return kcap::test::rewriteEvents(source, path, change);
}

// `source` with its device-to-device 2D or 3D copy turned into one from a
// CUDA array, as the recorder writes those: unknown, no source. Returns its
// seq.
uint64_t withCopyFromAnArray(const std::string& source, const std::string& path) {
  return rewritten(source, path, [](kcap::schema::Event::Builder e) {
    if (!e.isMemcpy() || e.getMemcpy().getWidth() == 0 ||
        e.getMemcpy().getDirection() != kcap::schema::CopyDirection::DEVICE_TO_DEVICE) {
      return false;
    }
    auto copy = e.getMemcpy();
    copy.setDirection(kcap::schema::CopyDirection::UNKNOWN);
    copy.setSrc(0);
    copy.setSrcPitch(0);
    copy.setSrcHeight(0);
    return true;
  });
}

TEST_F(Replay, A2DCopyFromAnArrayCannotBeReappliedAndSaysWhich) {
  const std::string path = file("pitched-array.kcap");
  const uint64_t arraySeq = withCopyFromAnArray(pitched(), path);
  ASSERT_NE(arraySeq, 0u);

  const Outcome run = replay({path, "--range", "0..2", "--json"});
  EXPECT_EQ(run.exitCode, kExitTrace) << run.describe();
  EXPECT_EQ(occurrences(run.out, "\"verdict\":\"REPRODUCED\""), 2u) << run.out;
  const std::string third = jsonLaunch(run.out, 2);
  EXPECT_NE(third.find("\"verdict\":\"ERROR\""), std::string::npos) << third;
  EXPECT_NE(third.find("the 2D copy at event #" + std::to_string(arraySeq) +
                       " is to or from a CUDA array, recorded without its data: replay cannot re-apply it"),
            std::string::npos)
      << third;
  // Alone, from its own pre-state, it needs no copy.
  const Outcome alone = replay({path, "--launch", "2"});
  EXPECT_EQ(alone.exitCode, kExitOk) << alone.describe();
  EXPECT_NE(alone.out.find("1 launch: 1 REPRODUCED"), std::string::npos) << alone.out;
}

TEST_F(Replay, ASequenceReappliesThe3DCopiesSliceBySlice) {
  namespace schema = kcap::schema;
  const PitchedTrace trace(volume());
  auto reader = kcap::format::TraceReader::open(volume());
  ASSERT_EQ(trace.pitchedCopies.size(), 2u);
  ASSERT_EQ(trace.launches.size(), 3u);
  constexpr uint64_t kPitch = 512, kSliceRows = 4;
  uint64_t v = 0;
  for (const auto& owned : trace.events) {
    const auto e = owned.get();
    if (e.isAlloc() && e.getAlloc().getKind() == schema::AllocKind::MEM_ALLOC_PITCH) {
      v = e.getAlloc().getAddress();
      EXPECT_EQ(e.getAlloc().getPitch(), kPitch);
      EXPECT_EQ(e.getAlloc().getSize(), 2 * kSliceRows * kPitch);
    }
  }
  ASSERT_NE(v, 0u);

  // Host to device: 2 slices of 4 rows of 64 floats, from a host volume
  // of rows 80 floats apart and slices 5 rows apart, stored packed.
  const auto up = trace.pitchedCopies[0].getMemcpy();
  EXPECT_EQ(up.getDirection(), schema::CopyDirection::HOST_TO_DEVICE);
  EXPECT_EQ(up.getDst(), v);
  EXPECT_EQ(up.getWidth(), 256u);
  EXPECT_EQ(up.getHeight(), 4u);
  EXPECT_EQ(up.getDepth(), 2u);
  EXPECT_EQ(up.getDstPitch(), kPitch);
  EXPECT_EQ(up.getDstHeight(), kSliceRows);
  EXPECT_EQ(up.getSrcPitch(), 320u);
  EXPECT_EQ(up.getSrcHeight(), 5u);
  EXPECT_EQ(up.getSize(), 2048u);
  const std::vector<uint8_t> packed = reader->readContent(up.getData());
  ASSERT_EQ(packed.size(), 2048u);
  std::vector<float> rows(512);
  std::memcpy(rows.data(), packed.data(), packed.size());
  for (size_t z = 0; z < 2; ++z) {
    for (size_t r = 0; r < 4; ++r) {
      for (size_t c = 0; c < 64; ++c) {
        ASSERT_EQ(rows[(z * 4 + r) * 64 + c], static_cast<float>(z * 1000 + r * 100 + c)) << z << "," << r;
      }
    }
  }
  // Device to device, from y into elements 32..63 of rows 1..3 of both
  // slices: no data.
  const auto across = trace.pitchedCopies[1].getMemcpy();
  EXPECT_EQ(across.getDirection(), schema::CopyDirection::DEVICE_TO_DEVICE);
  EXPECT_EQ(across.getDst(), v + kPitch + 128);
  EXPECT_NE(across.getSrc(), 0u);
  EXPECT_EQ(across.getWidth(), 128u);
  EXPECT_EQ(across.getHeight(), 3u);
  EXPECT_EQ(across.getDepth(), 2u);
  EXPECT_EQ(across.getDstPitch(), kPitch);
  EXPECT_EQ(across.getSrcPitch(), kPitch);
  EXPECT_EQ(across.getDstHeight(), kSliceRows);
  EXPECT_EQ(across.getSrcHeight(), kSliceRows);
  EXPECT_TRUE(across.getIsAsync());
  EXPECT_EQ(across.getData().getSize(), 0u);
  EXPECT_TRUE(trace.launches[0].getSeq() < trace.pitchedCopies[0].getSeq() &&
              trace.pitchedCopies[0].getSeq() < trace.launches[1].getSeq() &&
              trace.pitchedCopies[1].getSeq() < trace.launches[2].getSeq());

  // A sequence restores v once, from launch 0's pre-state: launches 1 and
  // 2 read a v that only the 3D copies made.
  const auto v0 = preBytes(*reader, trace.launches[0], v);
  const auto v1 = preBytes(*reader, trace.launches[1], v);
  const auto v2 = preBytes(*reader, trace.launches[2], v);
  ASSERT_EQ(v0.size(), 4096u);
  EXPECT_NE(v1, v0);
  EXPECT_NE(v2, v1);

  const Outcome run = replay({volume(), "--range", "0..2", "--json"});
  EXPECT_EQ(run.exitCode, kExitOk) << run.describe();
  EXPECT_EQ(occurrences(run.out, "\"verdict\":\"REPRODUCED\""), 3u) << run.out;
  EXPECT_TRUE(balancedJson(run.out)) << run.out;
  const Outcome relocated = replay({volume(), "--range", "0..2", "--no-fixed-va", "--json"});
  EXPECT_EQ(relocated.exitCode, kExitOk) << relocated.describe();
  EXPECT_EQ(occurrences(relocated.out, "\"verdict\":\"REPRODUCED\""), 3u) << relocated.out;
  EXPECT_EQ(occurrences(relocated.out, "\"memory\":\"relocated\""), 3u) << relocated.out;
  const Outcome later = replay({volume(), "--range", "1..2", "--no-fixed-va"});
  EXPECT_EQ(later.exitCode, kExitOk) << later.describe();
  EXPECT_NE(later.out.find("2 launches: 2 REPRODUCED"), std::string::npos) << later.out;
}

TEST_F(Replay, A3DCopyFromAnArrayCannotBeReappliedAndSaysWhich) {
  const std::string path = file("volume-array.kcap");
  const uint64_t arraySeq = withCopyFromAnArray(volume(), path);
  ASSERT_NE(arraySeq, 0u);

  const Outcome run = replay({path, "--range", "0..2", "--json"});
  EXPECT_EQ(run.exitCode, kExitTrace) << run.describe();
  EXPECT_EQ(occurrences(run.out, "\"verdict\":\"REPRODUCED\""), 2u) << run.out;
  const std::string third = jsonLaunch(run.out, 2);
  EXPECT_NE(third.find("\"verdict\":\"ERROR\""), std::string::npos) << third;
  EXPECT_NE(third.find("the 3D copy at event #" + std::to_string(arraySeq) +
                       " is to or from a CUDA array, recorded without its data: replay cannot re-apply it"),
            std::string::npos)
      << third;
}

TEST_F(Replay, ADamaged3DCopyIsAnErrorAndNeverReadsPastItsRows) {
  // Depth 2 + 2^54: width * height * depth wraps around to the 2048 bytes
  // the copy holds (a multiplied check would pass and read past them).
  // The slice heights 0, so that only the size can be wrong.
  const std::string wrapped = file("volume-wrapped.kcap");
  const uint64_t wrappedSeq = rewritten(volume(), wrapped, [](kcap::schema::Event::Builder e) {
    if (!e.isMemcpy() || e.getMemcpy().getDepth() == 0 || e.getMemcpy().getData().getSize() == 0) return false;
    e.getMemcpy().setDepth(2 + (uint64_t{1} << 54));
    e.getMemcpy().setDstHeight(0);
    e.getMemcpy().setSrcHeight(0);
    return true;
  });
  ASSERT_NE(wrappedSeq, 0u);
  const Outcome run = replay({wrapped, "--range", "0..2", "--json"});
  EXPECT_EQ(run.exitCode, kExitTrace) << run.describe();
  const std::string second = jsonLaunch(run.out, 1);
  EXPECT_NE(second.find("\"verdict\":\"ERROR\""), std::string::npos) << second;
  EXPECT_NE(second.find("the 3D copy at event #" + std::to_string(wrappedSeq) + " holds 2048 bytes for " +
                        std::to_string(2 + (uint64_t{1} << 54)) + " slices of 4 rows of 256"),
            std::string::npos)
      << second;

  // A slice height whose slices lie past the end of the address space.
  const std::string far = file("volume-far.kcap");
  const uint64_t farSeq = rewritten(volume(), far, [](kcap::schema::Event::Builder e) {
    if (!e.isMemcpy() || e.getMemcpy().getDepth() == 0 || e.getMemcpy().getData().getSize() == 0) return false;
    e.getMemcpy().setDstHeight(uint64_t{1} << 62);
    return true;
  });
  ASSERT_NE(farSeq, 0u);
  const Outcome farRun = replay({far, "--range", "0..2", "--json"});
  EXPECT_EQ(farRun.exitCode, kExitTrace) << farRun.describe();
  EXPECT_NE(
      jsonLaunch(farRun.out, 1)
          .find("the 3D copy at event #" + std::to_string(farSeq) + " has rows past the end of the address space"),
      std::string::npos)
      << farRun.out;
}

// Bytes overwritten across a recorded sequence's file: where a damaged
// record chunk lost events between two launches (a launch, a copy that
// wrote the next one's inputs), the launches from there on are SKIPPED
// saying so; nothing the damage took DIFFERS.
TEST_F(Replay, ASequenceStopsWhereEventsAreMissing) {
  const std::vector<uint8_t> bytes = kcap::test::readFileBytes(sequence());
  const std::string damaged = file("sequence-damaged.kcap");
  const std::regex said(
      "SKIPPED: events #[0-9]+\\.\\.[0-9]+ before launch [0-9]+ are missing \\(the trace is damaged "
      "there\\)");
  size_t missingSaid = 0;
  for (size_t k = 1; k < 100; ++k) {
    const size_t at = bytes.size() * k / 100;
    std::vector<uint8_t> copy = bytes;
    for (size_t i = at; i < std::min(at + 16, copy.size()); ++i) copy[i] ^= 0x5a;
    kcap::test::writeFileBytes(damaged, copy.data(), copy.size());
    const Outcome run = replay({damaged, "--range", "0..4"});
    EXPECT_NE(run.exitCode, kExitDiffers) << at << ": " << run.describe();
    EXPECT_EQ(run.out.find("DIFFERS"), std::string::npos) << at << ": " << run.out;
    if (std::regex_search(run.out, said)) ++missingSaid;
  }
  EXPECT_NE(missingSaid, 0u);
}

}  // namespace
}  // namespace kcap_test
