// Checkpoint mode, recorded end to end against the driver double: the
// program is unchanged, launches are recorded as in metadata mode, and
// Checkpoint events sit at their place in the event order and hold what
// device memory held there, named by content address and change hash.
#include "process_runner.h"

#include "change_hash.h"
#include "trace_files.h"
#include "trace_reader.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace kcap_test {
namespace {

using kcap::schema::Event;
namespace schema = kcap::schema;

struct Recording {
  Outcome plain;
  Outcome shimmed;
  std::vector<kcap::test::OwnedEvent> events;
};

// `program` run plainly and in checkpoint mode into `path`, `env` added.
Recording recordCheckpoints(const std::string& program, const std::vector<std::string>& args, const std::string& path,
                            std::map<std::string, std::string> env = {}) {
  Recording r;
  r.plain = run({program, args, {}, false});
  env["KCAP_OUTPUT"] = path;
  env["KCAP_MODE"] = "checkpoint";
  r.shimmed = run({program, args, std::move(env), true});
  r.events = kcap::test::readAllEvents(path);
  return r;
}

Outcome kcapCheck(const std::string& path) { return run({kcapBinary(), {"check", path}, {}, false}); }

void expectUnchanged(const Recording& r) {
  EXPECT_EQ(r.plain.exitCode, 0) << r.plain.describe();
  EXPECT_EQ(r.shimmed.exitCode, 0) << r.shimmed.describe();
  EXPECT_EQ(r.shimmed.err, "") << r.shimmed.describe();
  EXPECT_EQ(r.shimmed.out, r.plain.out);
}

std::vector<schema::Checkpoint::Reader> checkpointsOf(const Recording& r) {
  std::vector<schema::Checkpoint::Reader> out;
  for (const auto& e : r.events) {
    if (e.get().which() == Event::CHECKPOINT) out.push_back(e.get().getCheckpoint());
  }
  return out;
}

kcap::format::ChangeHash recordedHash(schema::CheckpointRange::Reader range, unsigned piece) {
  kcap::format::ChangeHash h;
  std::memcpy(&h.high, range.getChangeHashes().begin() + piece * kcap::format::kChangeHashBytes, 8);
  std::memcpy(&h.low, range.getChangeHashes().begin() + piece * kcap::format::kChangeHashBytes + 8, 8);
  return h;
}

// Every piece of every range: the bytes the trace holds for it hash to the
// change hash recorded beside it (content and hash describe one state).
void expectContentMatchesHashes(kcap::format::TraceReader& reader, schema::Checkpoint::Reader checkpoint) {
  for (const auto range : checkpoint.getRanges()) {
    const auto content = range.getContent();
    ASSERT_GT(content.getPieceSize(), 0u);
    ASSERT_EQ(range.getChangeHashes().size(), kcap::format::kChangeHashBytes * content.getPieces().size());
    const std::vector<uint8_t> bytes = reader.readContent(content);
    ASSERT_EQ(bytes.size(), content.getSize());
    for (unsigned p = 0; p < content.getPieces().size(); ++p) {
      const uint64_t offset = uint64_t{p} * content.getPieceSize();
      const uint64_t length = std::min<uint64_t>(content.getPieceSize(), bytes.size() - offset);
      EXPECT_EQ(kcap::format::changeHash(bytes.data() + offset, length), recordedHash(range, p))
          << "checkpoint " << checkpoint.getOrdinal() << " range 0x" << std::hex << range.getAddress() << " piece "
          << std::dec << p;
    }
  }
}

TEST(CheckpointRecord, LaunchesAreMetadataAndCheckpointsHoldTheMemoryAtTheirPlace) {
  kcap::test::TempDir dir("kcap-checkpoint");
  const std::string path = dir.file("direct.kcap");
  const Recording r =
      recordCheckpoints(interposeProgram("direct_launch"), {}, path, {{"KCAP_CHECKPOINT_EVERY", "2launches"}});
  expectUnchanged(r);
  ASSERT_FALSE(r.events.empty());
  EXPECT_EQ(r.events.front().get().getTraceBegin().getCaptureMode(), schema::CaptureMode::CHECKPOINT);

  // Launches as in metadata mode: parameters, no memory.
  uint64_t launches = 0;
  std::map<uint64_t, uint64_t> launchSeq;  // launchIndex -> seq
  for (const auto& e : r.events) {
    if (e.get().which() == Event::LAUNCH) {
      EXPECT_EQ(e.get().getLaunch().getPre().size(), 0u);
      EXPECT_GT(e.get().getLaunch().getParams().size(), 0u);
      launchSeq[e.get().getLaunch().getLaunchIndex()] = e.get().getSeq();
      ++launches;
    }
    if (e.get().which() == Event::LAUNCH_END) {
      EXPECT_EQ(e.get().getLaunchEnd().getPost().size(), 0u);
    }
  }
  ASSERT_EQ(launches, 6u);

  // First at the first launch, then every second launch, the last one at the end.
  const auto checkpoints = checkpointsOf(r);
  ASSERT_EQ(checkpoints.size(), 4u);
  const std::vector<uint64_t> launchCounts = {0, 2, 4, 6};
  for (unsigned i = 0; i < checkpoints.size(); ++i) {
    EXPECT_EQ(checkpoints[i].getOrdinal(), i);
    EXPECT_EQ(checkpoints[i].getLaunchCount(), launchCounts[i]);
    EXPECT_EQ(checkpoints[i].getResult(), 0);
  }
  // x and y at least; at exit the program has freed its buffers.
  for (unsigned i = 0; i + 1 < checkpoints.size(); ++i) {
    EXPECT_GE(checkpoints[i].getRanges().size(), 2u) << i;
  }
  EXPECT_EQ(checkpoints.front().getReason(), schema::CheckpointReason::FIRST);
  EXPECT_EQ(checkpoints[1].getReason(), schema::CheckpointReason::INTERVAL);
  EXPECT_EQ(checkpoints.back().getReason(), schema::CheckpointReason::END);

  // Each sits between launch launchCount - 1 and launch launchCount.
  for (const auto& e : r.events) {
    if (e.get().which() != Event::CHECKPOINT) continue;
    const uint64_t count = e.get().getCheckpoint().getLaunchCount();
    if (count > 0) {
      EXPECT_LT(launchSeq.at(count - 1), e.get().getSeq());
    }
    if (count < launches) {
      EXPECT_GT(launchSeq.at(count), e.get().getSeq());
    }
  }

  auto reader = kcap::format::TraceReader::open(path);
  for (const auto checkpoint : checkpoints) expectContentMatchesHashes(*reader, checkpoint);
  const Outcome check = kcapCheck(path);
  EXPECT_EQ(check.exitCode, 0) << check.describe();

  // The first holds every piece as changed; a later one counts the pieces
  // that are new or whose change hash moved, and an unchanged piece keeps
  // the content address it had.
  uint64_t pieces = 0;
  for (const auto range : checkpoints.front().getRanges()) pieces += range.getContent().getPieces().size();
  EXPECT_EQ(checkpoints.front().getChangedPieces(), pieces);
  for (unsigned i = 1; i < checkpoints.size(); ++i) {
    std::map<uint64_t, schema::CheckpointRange::Reader> before;
    for (const auto range : checkpoints[i - 1].getRanges()) before.emplace(range.getAddress(), range);
    uint64_t changed = 0, same = 0;
    for (const auto range : checkpoints[i].getRanges()) {
      const auto old = before.find(range.getAddress());
      const bool comparable = old != before.end() && old->second.getContent().getSize() == range.getContent().getSize();
      for (unsigned p = 0; p < range.getContent().getPieces().size(); ++p) {
        if (comparable && recordedHash(old->second, p) == recordedHash(range, p)) {
          EXPECT_EQ(old->second.getContent().getPieces()[p].getHigh(), range.getContent().getPieces()[p].getHigh());
          EXPECT_EQ(old->second.getContent().getPieces()[p].getLow(), range.getContent().getPieces()[p].getLow());
          ++same;
        } else {
          ++changed;
        }
      }
    }
    EXPECT_EQ(checkpoints[i].getChangedPieces(), changed) << i;
    if (i + 1 < checkpoints.size()) {
      EXPECT_GT(same, 0u) << i;  // x at least: axpy writes y
    }
  }
}

TEST(CheckpointRecord, ZeroMemoryIsNotCopied) {
  // With a change hash that says every piece holds zeros, every piece is
  // named by the zero piece's content address and nothing is copied: the
  // trace's pieces are then zeros, whatever the memory held.
  kcap::test::TempDir dir("kcap-checkpoint");
  const std::string path = dir.file("zero.kcap");
  const Recording r =
      recordCheckpoints(interposeProgram("direct_launch"), {}, path,
                        {{"KCAP_CHECKPOINT_EVERY", "1000launches"}, {"KCAP_DOUBLE_CHANGE_HASH", "zero"}});
  expectUnchanged(r);
  auto reader = kcap::format::TraceReader::open(path);
  const auto checkpoints = checkpointsOf(r);
  ASSERT_EQ(checkpoints.size(), 2u);  // first and end
  for (const auto checkpoint : checkpoints) {
    EXPECT_EQ(checkpoint.getChangedBytes(), 0u);
    for (const auto range : checkpoint.getRanges()) {
      for (const uint8_t b : reader->readContent(range.getContent())) ASSERT_EQ(b, 0);
    }
  }
}

// Recorded, then replayed by re-execution (against the double too): every
// interval that ends at a checkpoint with memory reproduces; the last one
// ends at the exit checkpoint, taken after the program freed its buffers.
TEST(CheckpointRecord, RecordedTracesReplayByReexecution) {
  kcap::test::TempDir dir("kcap-checkpoint");
  const std::string path = dir.file("replayed.kcap");
  const Recording r =
      recordCheckpoints(interposeProgram("direct_launch"), {}, path, {{"KCAP_CHECKPOINT_EVERY", "2launches"}});
  expectUnchanged(r);
  const Outcome replay = kcapOnDouble({"replay", path});
  EXPECT_EQ(replay.exitCode, 0) << replay.describe();
  EXPECT_NE(replay.out.find("interval 0 (launches 0..1, checkpoint 0 -> 1): REPRODUCED"), std::string::npos)
      << replay.describe();
  EXPECT_NE(replay.out.find("interval 1 (launches 2..3, checkpoint 1 -> 2): REPRODUCED"), std::string::npos)
      << replay.describe();
  // Re-executed with a build of axpy that flips y[100]'s lowest bit: the
  // intervals holding its launches differ, at that byte.
  const Outcome changed = kcapOnDouble({"replay", path, "--override", "axpy=" + kernelFile("axpy_changed.fatbin")});
  EXPECT_EQ(changed.exitCode, 3) << changed.describe();
  EXPECT_NE(changed.out.find("interval 0 (launches 0..1, checkpoint 0 -> 1): DIFFERS"), std::string::npos)
      << changed.describe();
  EXPECT_NE(changed.out.find("first differing byte at offset 400 (0x190)"), std::string::npos) << changed.describe();
  // kcap bisect with that build as side B names its first launch.
  const Outcome bisect =
      kcapOnDouble({"bisect", path, "--against", "override:axpy=" + kernelFile("axpy_changed.fatbin")});
  EXPECT_EQ(bisect.exitCode, 3) << bisect.describe();
  EXPECT_NE(bisect.out.find("First divergent launch: 0 (axpy), in interval 0 (launches 0..1, checkpoint 0 -> 1)"),
            std::string::npos)
      << bisect.describe();
  EXPECT_EQ(kcapOnDouble({"bisect", path}).exitCode, 0);
}

// kcap extract --launch N on a checkpoint trace: N's memory rebuilt by
// re-execution and written as a full-mode trace, which replays on its own.
TEST(CheckpointRecord, ExtractRebuildsALaunchAsAFullModeTrace) {
  kcap::test::TempDir dir("kcap-checkpoint");
  const std::string path = dir.file("source.kcap");
  const Recording r =
      recordCheckpoints(interposeProgram("direct_launch"), {}, path, {{"KCAP_CHECKPOINT_EVERY", "2launches"}});
  expectUnchanged(r);
  const std::string one = dir.file("launch3.kcap");
  const Outcome extracted = kcapOnDouble({"extract", path, "--launch", "3", "-o", one});
  EXPECT_EQ(extracted.exitCode, 0) << extracted.describe();
  EXPECT_NE(extracted.out.find("rebuilt by re-execution from the checkpoints; interval 1: REPRODUCED"),
            std::string::npos)
      << extracted.describe();
  const auto events = kcap::test::readAllEvents(one);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.front().get().getTraceBegin().getCaptureMode(), schema::CaptureMode::FULL);
  unsigned launches = 0, ends = 0;
  for (const auto& e : events) {
    if (e.get().which() == Event::LAUNCH) {
      EXPECT_EQ(e.get().getLaunch().getLaunchIndex(), 3u);
      EXPECT_EQ(e.get().getLaunch().getPre().size(), e.get().getLaunch().getPointers().size());
      EXPECT_FALSE(e.get().getLaunch().getEnded());  // as in full mode: a LaunchEnd follows, made by extract
      ++launches;
    }
    if (e.get().which() == Event::LAUNCH_END) {
      EXPECT_EQ(e.get().getLaunchEnd().getLaunchIndex(), 3u);
      EXPECT_EQ(e.get().getLaunchEnd().getResult(), 0);
      EXPECT_GT(e.get().getLaunchEnd().getPost().size(), 0u);
      ++ends;
    }
  }
  EXPECT_EQ(launches, 1u);
  EXPECT_EQ(ends, 1u);
  const Outcome check = kcapCheck(one);
  EXPECT_EQ(check.exitCode, 0) << check.describe();
  const Outcome replay = kcapOnDouble({"replay", one});
  EXPECT_EQ(replay.exitCode, 0) << replay.describe();
  EXPECT_NE(replay.out.find("REPRODUCED"), std::string::npos) << replay.describe();
  // One launch at a time.
  const Outcome two = kcapOnDouble({"extract", path, "--launch", "2", "--launch", "3", "-o", dir.file("two.kcap")});
  EXPECT_EQ(two.exitCode, 2) << two.describe();
  EXPECT_NE(two.err.find("from a checkpoint trace, one launch at a time"), std::string::npos) << two.describe();
}

// kcap check holds every change hash to the content it stands beside.
TEST(CheckpointRecord, CheckFindsChangeHashesThatDoNotMatchTheContent) {
  kcap::test::TempDir dir("kcap-checkpoint");
  const std::string path = dir.file("flip.kcap");
  const Recording r =
      recordCheckpoints(interposeProgram("direct_launch"), {}, path, {{"KCAP_DOUBLE_CHANGE_HASH", "flip"}});
  expectUnchanged(r);
  const Outcome check = kcapCheck(path);
  EXPECT_EQ(check.exitCode, 1) << check.describe();
  EXPECT_NE(check.out.find("(checkpoint 0): range 0x"), std::string::npos) << check.describe();
  EXPECT_NE(check.out.find("the change hash of piece 0 does not match its content"), std::string::npos)
      << check.describe();
}

TEST(CheckpointRecord, HostMappedMemoryALaunchReachesIsLoggedWithTheLaunch) {
  kcap::test::TempDir dir("kcap-checkpoint");
  const std::string path = dir.file("library.kcap");
  const Recording r = recordCheckpoints(scenarioProgram(), {"library"}, path);
  expectUnchanged(r);
  auto reader = kcap::format::TraceReader::open(path);
  unsigned hostInputs = 0;
  for (const auto& e : r.events) {
    if (e.get().which() != Event::LAUNCH) continue;
    for (const auto range : e.get().getLaunch().getPre()) {
      EXPECT_EQ(range.getKind(), schema::MemoryKind::HOST_MAPPED);
      // poly_eval's input: x[i] = 4 i, what the program wrote to pinned memory.
      const std::vector<uint8_t> bytes = reader->readContent(range.getContent());
      ASSERT_EQ(bytes.size() % sizeof(float), 0u);
      ASSERT_GT(bytes.size(), 0u);
      for (size_t i = 0; i < bytes.size() / sizeof(float); ++i) {
        float x = 0;
        std::memcpy(&x, bytes.data() + i * sizeof(float), sizeof x);
        ASSERT_EQ(x, 4.0f * static_cast<float>(i)) << i;
      }
      ++hostInputs;
    }
  }
  EXPECT_EQ(hostInputs, 1u);
  for (const auto checkpoint : checkpointsOf(r)) {
    for (const auto range : checkpoint.getRanges()) EXPECT_NE(range.getKind(), schema::MemoryKind::HOST_MAPPED);
  }
}

// Sixteen threads launching on four streams each: every checkpoint still
// sits at one point of the order, after exactly the launches it counts.
TEST(CheckpointRecord, ThreadsLaunchingMeanwhileAreOrderedAroundEachCheckpoint) {
  kcap::test::TempDir dir("kcap-checkpoint");
  const std::string path = dir.file("threads.kcap");
  const Recording r = recordCheckpoints(threadsProgram(), {}, path, {{"KCAP_CHECKPOINT_EVERY", "5000launches"}});
  expectUnchanged(r);
  uint64_t launchesBefore = 0;
  unsigned checkpoints = 0;
  for (const auto& e : r.events) {
    if (e.get().which() == Event::LAUNCH) ++launchesBefore;
    if (e.get().which() == Event::CHECKPOINT) {
      EXPECT_EQ(e.get().getCheckpoint().getLaunchCount(), launchesBefore);
      ++checkpoints;
    }
  }
  EXPECT_EQ(launchesBefore, 64000u);
  EXPECT_GE(checkpoints, 10u);  // every 5,000 launches (a later one when a checkpoint was due on two threads)
  auto reader = kcap::format::TraceReader::open(path);
  for (const auto checkpoint : checkpointsOf(r)) expectContentMatchesHashes(*reader, checkpoint);
}

// By time: each launch's stamp is compared with a deadline in the clock's
// own units. Checkpoints come due while the threads launch, never sooner
// than the interval after the one before.
TEST(CheckpointRecord, CheckpointsComeDueByTime) {
  kcap::test::TempDir dir("kcap-checkpoint");
  const std::string path = dir.file("threads-by-time.kcap");
  const Recording r = recordCheckpoints(threadsProgram(), {}, path, {{"KCAP_CHECKPOINT_EVERY", "2ms"}});
  expectUnchanged(r);
  std::vector<uint64_t> intervalTimes;
  uint64_t firstTime = 0;
  uint64_t lastLaunchTime = 0;
  for (const auto& e : r.events) {
    if (e.get().which() == Event::LAUNCH) lastLaunchTime = e.get().getTimeNs();
    if (e.get().which() != Event::CHECKPOINT) continue;
    const auto reason = e.get().getCheckpoint().getReason();
    if (reason == schema::CheckpointReason::FIRST) firstTime = e.get().getTimeNs();
    if (reason == schema::CheckpointReason::INTERVAL) intervalTimes.push_back(e.get().getTimeNs());
  }
  ASSERT_GT(lastLaunchTime, firstTime + 10'000'000) << "the program launched for under 10 ms: nothing to measure";
  ASSERT_GE(intervalTimes.size(), 2u) << "no checkpoint came due in " << (lastLaunchTime - firstTime) << " ns";
  uint64_t previous = firstTime;
  for (const uint64_t time : intervalTimes) {
    EXPECT_GE(time, previous + 2'000'000 - 20'000) << "a checkpoint came due before its interval";
    previous = time;
  }
  EXPECT_LE(intervalTimes.size(), (lastLaunchTime - firstTime) / 2'000'000 + 1);
}

// Managed memory the host rewrites between launches, with no CUDA call:
// each launch that reaches it logs it as the launch saw it (its `pre`, kind
// managed), checkpoints leave it out, and re-execution writes it back before
// the launch.
TEST(CheckpointRecord, HostWritesIntoManagedMemoryAreLoggedWithEachLaunch) {
  kcap::test::TempDir dir("kcap-checkpoint");
  const std::string path = dir.file("managed.kcap");
  const Recording r = recordCheckpoints(managedMemoryProgram(), {}, path, {{"KCAP_CHECKPOINT_EVERY", "2launches"}});
  expectUnchanged(r);
  ASSERT_NE(r.plain.out.find("result managed_sum "), std::string::npos) << r.plain.describe();
  uint64_t managed = 0;
  for (const auto& e : r.events) {
    if (e.get().which() == Event::ALLOC && e.get().getAlloc().getKind() == schema::AllocKind::MANAGED) {
      managed = e.get().getAlloc().getAddress();
    }
  }
  ASSERT_NE(managed, 0u) << "cuMemAllocManaged recorded";
  auto reader = kcap::format::TraceReader::open(path);
  int round = 0;
  for (const auto& e : r.events) {
    if (e.get().which() != Event::LAUNCH) continue;
    const auto pre = e.get().getLaunch().getPre();
    ASSERT_EQ(pre.size(), 1u) << "launch " << round;
    EXPECT_EQ(pre[0].getKind(), schema::MemoryKind::MANAGED) << "launch " << round;
    EXPECT_EQ(pre[0].getAddress(), managed) << "launch " << round;
    const std::vector<uint8_t> bytes = reader->readContent(pre[0].getContent());
    ASSERT_EQ(bytes.size(), 1024 * sizeof(float));
    for (size_t i = 0; i < 1024; ++i) {
      float v = 0;
      std::memcpy(&v, bytes.data() + i * sizeof v, sizeof v);
      ASSERT_EQ(v, static_cast<float>((i + 7 * static_cast<size_t>(round)) % 23))
          << "launch " << round << " x[" << i << "]";
    }
    ++round;
  }
  EXPECT_EQ(round, 6);
  const auto checkpoints = checkpointsOf(r);
  EXPECT_GE(checkpoints.size(), 3u);
  for (const auto checkpoint : checkpoints) {
    for (const auto range : checkpoint.getRanges())
      EXPECT_NE(range.getAddress(), managed) << "managed memory checkpointed";
  }
  const Outcome replay = kcapOnDouble({"replay", path});
  EXPECT_EQ(replay.exitCode, 0) << replay.describe();
  EXPECT_NE(replay.out.find("reproduced as recorded"), std::string::npos) << replay.describe();
}

// A process driving two devices, the current context changing with every
// launch: every checkpoint holds the first one's device (0), only its
// memory; replay re-executes device 0's launches, writes what device 1's
// copies put into device 0's memory from the trace, passes device 1's
// launches over, and every interval reproduces.
TEST(CheckpointRecord, AProcessDrivingTwoDevicesCheckpointsOneOfThem) {
  kcap::test::TempDir dir("kcap-checkpoint");
  const std::string path = dir.file("two-devices.kcap");
  const std::map<std::string, std::string> twoDevices = {{"KCAP_DOUBLE_DEVICES", "2"}};
  Recording r;
  r.plain = run({twoDeviceProgram(), {}, twoDevices, false});
  std::map<std::string, std::string> env = twoDevices;
  env["KCAP_OUTPUT"] = path;
  env["KCAP_MODE"] = "checkpoint";
  env["KCAP_CHECKPOINT_EVERY"] = "3launches";
  r.shimmed = run({twoDeviceProgram(), {}, env, true});
  r.events = kcap::test::readAllEvents(path);
  expectUnchanged(r);
  ASSERT_NE(r.plain.out.find("result two_device_work "), std::string::npos) << r.plain.describe();

  std::set<int> launchDevices;
  for (const auto& e : r.events) {
    if (e.get().which() == Event::LAUNCH) launchDevices.insert(e.get().getLaunch().getDevice());
  }
  EXPECT_EQ(launchDevices, (std::set<int>{0, 1}));
  const auto checkpoints = checkpointsOf(r);
  ASSERT_GE(checkpoints.size(), 4u);
  for (size_t k = 0; k < checkpoints.size(); ++k) {
    EXPECT_EQ(checkpoints[k].getDevice(), 0) << "checkpoint " << k << ": the first one's device, every time";
    EXPECT_EQ(checkpoints[k].getResult(), 0) << "checkpoint " << k;
    EXPECT_EQ(checkpoints[k].getRanges().size(), 2u) << "checkpoint " << k << ": device 0's x and y";
  }

  const Outcome replay = kcapOnDouble({"replay", path}, twoDevices);
  EXPECT_EQ(replay.exitCode, 0) << replay.describe();
  EXPECT_NE(replay.out.find("6 launch(es) on other devices than the checkpoints' (device 0) are not re-run"),
            std::string::npos)
      << replay.describe();
  EXPECT_NE(replay.out.find("Re-executed 6 launches"), std::string::npos) << "device 0's only\n" << replay.describe();
  EXPECT_NE(replay.out.find("intervals reproduced as recorded"), std::string::npos) << replay.describe();
  const Outcome info = run({kcapBinary(), {"info", path}, {}, false});
  EXPECT_NE(info.out.find("whose memory they hold; 6 launches on other devices are not re-executed"), std::string::npos)
      << info.describe();
  // A launch of device 1 cannot be rebuilt from device 0's checkpoints.
  const Outcome extract = kcapOnDouble({"extract", path, "--launch", "1", "-o", dir.file("one.kcap")}, twoDevices);
  EXPECT_NE(extract.exitCode, 0) << extract.describe();
  EXPECT_NE(extract.err.find("launch 1 ran on device 1; the checkpoints hold device 0's memory"), std::string::npos)
      << extract.describe();

  // KCAP_CHECKPOINT_DEVICE=1: the first checkpoint waits for device 1's
  // first launch, and every one holds device 1; its launches re-execute.
  const std::string second = dir.file("device-1.kcap");
  env["KCAP_OUTPUT"] = second;
  env["KCAP_CHECKPOINT_DEVICE"] = "1";
  ASSERT_EQ(run({twoDeviceProgram(), {}, env, true}).exitCode, 0);
  Recording one;
  one.events = kcap::test::readAllEvents(second);
  const auto held = checkpointsOf(one);
  ASSERT_GE(held.size(), 3u);
  for (size_t k = 0; k < held.size(); ++k) {
    EXPECT_EQ(held[k].getDevice(), 1) << "checkpoint " << k;
    EXPECT_EQ(held[k].getRanges().size(), 2u) << "checkpoint " << k << ": device 1's x and y";
  }
  EXPECT_EQ(held[0].getLaunchCount(), 1u) << "taken at device 1's first launch, after device 0's";
  const Outcome replayed = kcapOnDouble({"replay", second}, twoDevices);
  EXPECT_EQ(replayed.exitCode, 0) << replayed.describe();
  EXPECT_NE(replayed.out.find("launch(es) on other devices than the checkpoints' (device 1) are not re-run"),
            std::string::npos)
      << replayed.describe();
  EXPECT_NE(replayed.out.find("intervals reproduced as recorded"), std::string::npos) << replayed.describe();
}

TEST(CheckpointRecord, FiltersAndRangesAreRefused) {
  // Replay re-executes every launch: a trace missing some would rebuild
  // the wrong memory. The program runs unrecorded and unchanged.
  for (const auto& [variable, value] : std::map<std::string, std::string>{
           {"KCAP_INCLUDE", "axpy"}, {"KCAP_EXCLUDE", "axpy"}, {"KCAP_SKIP", "1"}, {"KCAP_MAX_LAUNCHES", "3"}}) {
    kcap::test::TempDir dir("kcap-checkpoint");
    const std::string path = dir.file("refused.kcap");
    const Outcome shimmed = run({interposeProgram("direct_launch"),
                                 {},
                                 {{"KCAP_OUTPUT", path}, {"KCAP_MODE", "checkpoint"}, {variable, value}},
                                 true});
    EXPECT_EQ(shimmed.exitCode, 0) << shimmed.describe();
    EXPECT_NE(shimmed.err.find(variable + "=\"" + value + "\": cannot be used with KCAP_MODE=checkpoint"),
              std::string::npos)
        << shimmed.describe();
    EXPECT_FALSE(std::filesystem::exists(path));
  }
}

// Memory allocated after the first checkpoint holds what the driver handed
// over (the double's dirty allocations: bytes an earlier allocation left),
// and a launch reads it before anything wrote it: the allocation logs that
// content, re-execution writes it at the allocation's place, and every
// interval reproduces. `args`: the program's (capture: b is allocated while
// a blocking stream captures into a graph, and logging its content must
// not invalidate that capture).
void expectLateAllocationReproduced(const std::vector<std::string>& args) {
  kcap::test::TempDir dir("kcap-checkpoint");
  const std::string path = dir.file("late.kcap");
  const std::map<std::string, std::string> dirty = {{"KCAP_DOUBLE_DIRTY_ALLOCATIONS", "1"}};
  std::map<std::string, std::string> env = dirty;
  env["KCAP_CHECKPOINT_EVERY"] = "1launches";
  const Recording r = recordCheckpoints(lateAllocationProgram(), args, path, env);
  ASSERT_EQ(r.shimmed.exitCode, 0) << r.shimmed.describe();
  EXPECT_EQ(r.shimmed.out, run({lateAllocationProgram(), args, dirty, false}).out);
  EXPECT_EQ(r.shimmed.err.find("kcap: warning"), std::string::npos) << r.shimmed.describe();
  constexpr size_t kBytes = 1024 * sizeof(float);
  auto reader = kcap::format::TraceReader::open(path);
  int allocs = 0, logged = 0;
  for (const auto& e : r.events) {
    if (e.get().which() != Event::ALLOC) continue;
    ++allocs;
    const auto initial = e.get().getAlloc().getInitial();
    if (initial.size() == 0) continue;
    ++logged;
    ASSERT_EQ(initial.size(), 1u);
    EXPECT_EQ(initial[0].getAddress(), e.get().getAlloc().getAddress());
    EXPECT_EQ(initial[0].getContent().getSize(), kBytes);
    const std::vector<uint8_t> bytes = reader->readContent(initial[0].getContent());
    ASSERT_EQ(bytes.size(), kBytes);
    for (const uint8_t byte : bytes) ASSERT_EQ(byte, 0x3f) << "what the double handed over";
  }
  EXPECT_EQ(allocs, 3);
  EXPECT_EQ(logged, 1) << "x and y come before the first checkpoint, b after it";
  const Outcome replay = kcapOnDouble({"replay", path});
  EXPECT_EQ(replay.exitCode, 0) << replay.describe();
  EXPECT_NE(replay.out.find("intervals reproduced as recorded"), std::string::npos) << replay.describe();
  EXPECT_EQ(replay.out.find("DIFFER"), std::string::npos) << replay.describe();
}

TEST(CheckpointRecord, MemoryAllocatedLaterStartsAsTheDriverHandedItOver) { expectLateAllocationReproduced({}); }

TEST(CheckpointRecord, MemoryAllocatedDuringAGraphCaptureStartsAsTheDriverHandedItOver) {
  expectLateAllocationReproduced({"capture"});
}

// Stream-ordered allocations (the double's pool keeps a freed block's bytes
// for the next allocation of its size, as the driver's does): a, new to the
// pool, and c, whose memory was freed before the last checkpoint, log their
// first content, read back on their stream and completed by a WrittenData;
// b, whose memory a freed since the last checkpoint, logs nothing, as
// re-execution rebuilds what a left there. Every interval reproduces.
TEST(CheckpointRecord, StreamOrderedAllocationsStartAsTheirPoolHandedThemOver) {
  kcap::test::TempDir dir("kcap-checkpoint");
  const std::string path = dir.file("pool.kcap");
  const std::map<std::string, std::string> dirty = {{"KCAP_DOUBLE_DIRTY_ALLOCATIONS", "1"}};
  std::map<std::string, std::string> env = dirty;
  env["KCAP_CHECKPOINT_EVERY"] = "1launches";
  const Recording r = recordCheckpoints(lateAllocationProgram(), {"pool"}, path, env);
  ASSERT_EQ(r.shimmed.exitCode, 0) << r.shimmed.describe();
  EXPECT_EQ(r.shimmed.out, run({lateAllocationProgram(), {"pool"}, dirty, false}).out);
  EXPECT_EQ(r.shimmed.err.find("kcap: warning"), std::string::npos) << r.shimmed.describe();
  constexpr size_t kBytes = 1024 * sizeof(float);
  std::vector<uint64_t> pooled, deferred;
  std::map<uint64_t, kcap::test::OwnedEvent const*> written;  // by the seq they complete
  for (const auto& e : r.events) {
    if (e.get().which() == Event::ALLOC && e.get().getAlloc().getKind() == schema::AllocKind::ASYNC) {
      pooled.push_back(e.get().getSeq());
      EXPECT_EQ(e.get().getAlloc().getInitial().size(), 0u) << "read back later, not with the allocation";
      if (e.get().getAlloc().getInitialDeferred()) deferred.push_back(e.get().getSeq());
    }
    if (e.get().which() == Event::WRITTEN_DATA) written[e.get().getWrittenData().getOf()] = &e;
  }
  ASSERT_EQ(pooled.size(), 3u);
  EXPECT_EQ(deferred, (std::vector<uint64_t>{pooled[0], pooled[2]})) << "a and c, not b";
  auto reader = kcap::format::TraceReader::open(path);
  const auto firstContent = [&](uint64_t seq) {
    const auto found = written.find(seq);
    EXPECT_NE(found, written.end()) << "no WrittenData completes event #" << seq;
    if (found == written.end()) return std::vector<uint8_t>{};
    return reader->readContent(found->second->get().getWrittenData().getData());
  };
  const std::vector<uint8_t> a = firstContent(pooled[0]), c = firstContent(pooled[2]);
  ASSERT_EQ(a.size(), kBytes);
  ASSERT_EQ(c.size(), kBytes);
  for (const uint8_t byte : a) ASSERT_EQ(byte, 0x3f) << "what the pool handed over";
  // c holds what b left: its first half changed by two axpys, its second half as the pool handed a over.
  EXPECT_NE(std::vector<uint8_t>(c.begin(), c.begin() + kBytes / 2), std::vector<uint8_t>(kBytes / 2, 0x3f));
  EXPECT_EQ(std::vector<uint8_t>(c.begin() + kBytes / 2, c.end()), std::vector<uint8_t>(kBytes / 2, 0x3f));
  EXPECT_EQ(written.size(), 2u);
  const Outcome check = kcapCheck(path);
  EXPECT_EQ(check.exitCode, 0) << check.describe();
  const Outcome info = run({kcapBinary(), {"info", path}, {}, false});
  EXPECT_NE(info.out.find("first contents logged      2  8.00 KiB  2 read back on their stream"), std::string::npos)
      << info.out;
  const Outcome replay = kcapOnDouble({"replay", path});
  EXPECT_EQ(replay.exitCode, 0) << replay.describe();
  EXPECT_NE(replay.out.find("intervals reproduced as recorded"), std::string::npos) << replay.describe();
  EXPECT_EQ(replay.out.find("DIFFER"), std::string::npos) << replay.describe();
  // Each interval on its own, from its checkpoint: a replay of them in turn
  // keeps what the one before left in freed memory, one alone does not.
  for (const char* launch : {"0", "1", "2", "3", "4", "5"}) {
    const Outcome alone = kcapOnDouble({"replay", path, "--launch", launch});
    EXPECT_EQ(alone.exitCode, 0) << alone.describe();
    EXPECT_NE(alone.out.find("all 1 intervals reproduced as recorded"), std::string::npos) << alone.describe();
  }
}

}  // namespace
}  // namespace kcap_test
