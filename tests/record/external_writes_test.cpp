// Memory written by something kcap does not re-execute, recorded against
// the driver double and replayed:
// - another process (CUDA IPC): the importing process's launches read an
//   allocation that the exporting process rewrites between them without a
//   CUDA call of this one (tests/record/programs/ipc_import.cpp). Checkpoint
//   mode cannot recompute those writes, so each launch that reaches the
//   memory logs it as the launch saw it; re-execution writes it back before
//   the launch;
// - another device: copies from a second device's memory, which the
//   checkpoints (of the launching device) do not hold
//   (tests/record/programs/peer_copy.cpp): each logs what it wrote;
// - other ranks, through NCCL: a two-rank stand-in for NCCL writes what the
//   other rank sent (tests/record/programs/nccl_collectives.cpp); what each
//   call wrote on this rank is read back in stream order and logged in a
//   writtenData event after the call's Collective event (or, without
//   read-back memory, in the Collective event itself).
#include "process_runner.h"

#include "trace_files.h"
#include "trace_reader.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace kcap_test {
namespace {

using kcap::schema::Event;
namespace schema = kcap::schema;

constexpr int kN = 1024;
constexpr int kRounds = 6;

struct Recording {
  Outcome plain;
  Outcome shimmed;
  std::vector<kcap::test::OwnedEvent> events;
};

Recording record(kcap::test::TempDir& dir, const std::string& mode, const std::string& path,
                 std::map<std::string, std::string> env = {}) {
  Recording r;
  const std::string shared = dir.file("exported-x");
  r.plain = run({ipcImportProgram(), {shared}, {}, false});
  env["KCAP_OUTPUT"] = path;
  env["KCAP_MODE"] = mode;
  r.shimmed = run({ipcImportProgram(), {shared}, std::move(env), true});
  r.events = kcap::test::readAllEvents(path);
  EXPECT_EQ(r.plain.exitCode, 0) << r.plain.describe();
  EXPECT_EQ(r.shimmed.exitCode, 0) << r.shimmed.describe();
  EXPECT_EQ(r.shimmed.err, "") << r.shimmed.describe();
  EXPECT_EQ(r.shimmed.out, r.plain.out);
  EXPECT_NE(r.plain.out.find("result ipc_y_sum "), std::string::npos) << r.plain.describe();
  return r;
}

std::vector<float> floatsOf(const std::vector<uint8_t>& bytes) {
  std::vector<float> values(bytes.size() / sizeof(float));
  std::memcpy(values.data(), bytes.data(), values.size() * sizeof(float));
  return values;
}

// What the exporter wrote into x before round `round` (ipc_import.cpp).
float exportedX(int round, int i) { return static_cast<float>((i * (round + 3)) % 29); }

// The import is an allocation of its own kind, with the mapping's size, and
// its close a Free of that kind.
void expectImportEvents(const Recording& r) {
  int opened = 0;
  int closed = 0;
  for (const auto& e : r.events) {
    if (e.get().which() == Event::ALLOC && e.get().getAlloc().getKind() == schema::AllocKind::IPC_IMPORT) {
      EXPECT_EQ(e.get().getAlloc().getSize(), kN * sizeof(float));
      EXPECT_NE(e.get().getAlloc().getAddress(), 0u);
      ++opened;
    }
    if (e.get().which() == Event::FREE && e.get().getFree().getKind() == schema::AllocKind::IPC_IMPORT) ++closed;
  }
  EXPECT_EQ(opened, 1);
  EXPECT_EQ(closed, 1);
}

TEST(IpcRecord, CheckpointModeLogsWhatEachLaunchReadOfAnotherProcesssMemory) {
  kcap::test::TempDir dir("kcap-ipc");
  const std::string path = dir.file("checkpoint.kcap");
  // A checkpoint every other launch: intervals of two launches, each
  // reading x as the exporter last wrote it.
  const Recording r = record(dir, "checkpoint", path, {{"KCAP_CHECKPOINT_EVERY", "2launches"}});
  expectImportEvents(r);
  auto reader = kcap::format::TraceReader::open(path);
  int round = 0;
  for (const auto& e : r.events) {
    if (e.get().which() == Event::CHECKPOINT) {
      for (const auto range : e.get().getCheckpoint().getRanges()) {
        EXPECT_NE(range.getKind(), schema::MemoryKind::IMPORTED) << "checkpoints leave another process's memory out";
      }
    }
    if (e.get().which() != Event::LAUNCH) continue;
    const auto pre = e.get().getLaunch().getPre();
    ASSERT_EQ(pre.size(), 1u) << "launch " << round;
    EXPECT_EQ(pre[0].getKind(), schema::MemoryKind::IMPORTED);
    const std::vector<uint8_t> bytes = reader->readContent(pre[0].getContent());
    ASSERT_EQ(bytes.size(), kN * sizeof(float));
    for (int i = 0; i < kN; ++i) {
      float x = 0;
      std::memcpy(&x, bytes.data() + static_cast<size_t>(i) * sizeof x, sizeof x);
      ASSERT_EQ(x, exportedX(round, i)) << "launch " << round << " element " << i;
    }
    ++round;
  }
  EXPECT_EQ(round, kRounds);

  // Re-execution writes each launch's x before it: every interval as recorded.
  const Outcome replay = kcapOnDouble({"replay", path});
  EXPECT_EQ(replay.exitCode, 0) << replay.describe();
  EXPECT_NE(replay.out.find("Verdict: all 3 intervals reproduced as recorded."), std::string::npos)
      << replay.describe();
}

// KCAP_STATS_FILE's `snapshot` line (interpose/hooks/stats.h) as key -> value.
std::map<std::string, uint64_t> snapshotStats(const std::string& stats) {
  std::map<std::string, uint64_t> out;
  const size_t at = stats.find("\nsnapshot ");
  if (at == std::string::npos) return out;
  std::istringstream words(stats.substr(at + 10, stats.find('\n', at + 1) - at - 10));
  std::string key;
  uint64_t value = 0;
  while (words >> key >> value) out[key] = value;
  return out;
}

// A large imported mapping of which each launch's exporter rewrites only
// the first 4 KiB: hashed on the device at each launch, only what changed
// copied to the host, and every launch's x still logged exactly.
TEST(IpcRecord, ALargeImportIsHashedOnTheDeviceAndOnlyItsChangesCopied) {
  kcap::test::TempDir dir("kcap-ipc");
  const std::string shared = dir.file("exported-x");
  constexpr uint64_t kMapped = 8u << 20;
  const std::vector<std::string> args = {shared, std::to_string(kMapped)};
  const Outcome plain = run({ipcImportProgram(), args, {}, false});
  ASSERT_EQ(plain.exitCode, 0) << plain.describe();
  const std::string path = dir.file("checkpoint.kcap");
  RunSpec spec{ipcImportProgram(),
               args,
               {{"KCAP_OUTPUT", path}, {"KCAP_MODE", "checkpoint"}, {"KCAP_CHECKPOINT_EVERY", "2launches"}},
               true};
  spec.shimStats = true;
  const Outcome shimmed = run(spec);
  ASSERT_EQ(shimmed.exitCode, 0) << shimmed.describe();
  EXPECT_EQ(shimmed.out, plain.out);

  auto stats = snapshotStats(shimmed.shimStats);
  EXPECT_GE(stats["device_hashed"], kRounds * kMapped) << shimmed.shimStats;
  EXPECT_LT(stats["copied"], kMapped + kRounds * (1u << 20)) << "the zeros once, then each launch's changed piece\n"
                                                             << shimmed.shimStats;
  auto reader = kcap::format::TraceReader::open(path);
  int round = 0;
  for (const auto& e : kcap::test::readAllEvents(path)) {
    if (e.get().which() != Event::LAUNCH) continue;
    const auto pre = e.get().getLaunch().getPre();
    ASSERT_EQ(pre.size(), 1u) << "launch " << round;
    const std::vector<uint8_t> bytes = reader->readContent(pre[0].getContent());
    ASSERT_EQ(bytes.size(), kMapped);
    const std::vector<float> x = floatsOf(bytes);
    for (size_t i = 0; i < x.size(); ++i) {
      ASSERT_EQ(x[i], i < kN ? exportedX(round, static_cast<int>(i)) : 0.0f) << "launch " << round << " at " << i;
    }
    ++round;
  }
  EXPECT_EQ(round, kRounds);
  const Outcome replay = kcapOnDouble({"replay", path});
  EXPECT_EQ(replay.exitCode, 0) << replay.describe();
  EXPECT_NE(replay.out.find("Verdict: all 3 intervals reproduced as recorded."), std::string::npos)
      << replay.describe();
}

// Full mode needs nothing of its own: the imported allocation is reachable
// memory like any other, snapshotted before and after each launch.
TEST(IpcRecord, FullModeSnapshotsAnotherProcesssMemoryAndReplays) {
  kcap::test::TempDir dir("kcap-ipc");
  const std::string path = dir.file("full.kcap");
  const Recording r = record(dir, "full", path);
  expectImportEvents(r);
  int launches = 0;
  for (const auto& e : r.events) {
    if (e.get().which() != Event::LAUNCH) continue;
    bool imported = false;
    for (const auto range : e.get().getLaunch().getPre()) imported |= range.getKind() == schema::MemoryKind::IMPORTED;
    EXPECT_TRUE(imported) << "launch " << launches;
    ++launches;
  }
  EXPECT_EQ(launches, kRounds);
  const Outcome replay = kcapOnDouble({"replay", path});
  EXPECT_EQ(replay.exitCode, 0) << replay.describe();
  EXPECT_NE(replay.out.find("6 REPRODUCED"), std::string::npos) << replay.describe();
}

// The WrittenData event that completes the event numbered `of` (null if
// none does); checks that it is the only one.
const kcap::test::OwnedEvent* writtenDataOf(const std::vector<kcap::test::OwnedEvent>& events, uint64_t of) {
  const kcap::test::OwnedEvent* found = nullptr;
  for (const auto& e : events) {
    if (e.get().which() != Event::WRITTEN_DATA || e.get().getWrittenData().getOf() != of) continue;
    EXPECT_EQ(found, nullptr) << "two writtenData events name event #" << of;
    EXPECT_GT(e.get().getSeq(), of) << "a writtenData event comes after the event it completes";
    found = &e;
  }
  return found;
}

// What a copy from another device wrote: logged with the copy, as the
// checkpoints hold only the launching device's memory.
// Each copy's bytes are read back in stream order into a later writtenData
// event, 2D and 3D copies' rows packed; with KCAP_READBACK=0 each copy
// waits for its stream and holds them itself.
TEST(PeerCopyRecord, CopiesFromAnotherDeviceLogWhatTheyWrote) {
  kcap::test::TempDir dir("kcap-peer");
  const std::map<std::string, std::string> twoDevices = {{"KCAP_DOUBLE_DEVICES", "2"}};
  const Outcome plain = run({peerCopyProgram(), {}, twoDevices, false});
  ASSERT_EQ(plain.exitCode, 0) << plain.describe();
  std::map<std::string, std::string> env = twoDevices;
  env["KCAP_MODE"] = "checkpoint";
  env["KCAP_CHECKPOINT_EVERY"] = "2launches";
  std::string path;
  for (const std::string readback : {"0", "256M"}) {
    SCOPED_TRACE("KCAP_READBACK=" + readback);
    const bool later = readback != "0";
    path = dir.file("peer-" + readback + ".kcap");
    env["KCAP_OUTPUT"] = path;
    env["KCAP_READBACK"] = readback;
    const Outcome shimmed = run({peerCopyProgram(), {}, env, true});
    ASSERT_EQ(shimmed.exitCode, 0) << shimmed.describe();
    EXPECT_EQ(shimmed.err, "") << shimmed.describe();
    EXPECT_EQ(shimmed.out, plain.out);

    auto reader = kcap::format::TraceReader::open(path);
    int crossDevice = 0;
    std::vector<std::vector<float>> rowCopies;  // the 2D and the 3D copy's packed rows
    const auto events = kcap::test::readAllEvents(path);
    for (const auto& e : events) {
      if (e.get().which() != Event::MEMCPY) continue;
      const auto copy = e.get().getMemcpy();
      if (copy.getDirection() != schema::CopyDirection::DEVICE_TO_DEVICE) continue;
      EXPECT_TRUE(copy.getCrossDevice()) << "every device-to-device copy of the program crosses devices";
      EXPECT_EQ(copy.getDataDeferred(), later) << "copy at event #" << e.get().getSeq();
      const auto* written = writtenDataOf(events, e.get().getSeq());
      std::vector<uint8_t> bytes;
      if (later) {
        ASSERT_NE(written, nullptr) << "copy at event #" << e.get().getSeq();
        EXPECT_EQ(std::string(written->get().getWrittenData().getMissing().cStr()), "");
        EXPECT_EQ(copy.getData().getSize(), 0u) << "its bytes come in a writtenData event";
        bytes = reader->readContent(written->get().getWrittenData().getData());
      } else {
        EXPECT_EQ(written, nullptr);
        bytes = reader->readContent(copy.getData());
      }
      if (copy.getWidth() != 0) {
        rowCopies.push_back(floatsOf(bytes));
        continue;
      }
      ASSERT_EQ(bytes.size(), kN * sizeof(float));
      for (int i = 0; i < kN; ++i) {
        float v = 0;
        std::memcpy(&v, bytes.data() + static_cast<size_t>(i) * sizeof v, sizeof v);
        ASSERT_EQ(v, static_cast<float>(i % 37)) << "copy " << crossDevice << " element " << i;
      }
      ++crossDevice;
    }
    EXPECT_EQ(crossDevice, kRounds) << "cuMemcpyPeer, cuMemcpyPeerAsync and a unified copy, twice each";
    // Their rows as the copies wrote them: source element (row * 64 + column).
    ASSERT_EQ(rowCopies.size(), 2u) << "a unified 2D copy and a cuMemcpy3DPeer";
    ASSERT_EQ(rowCopies[0].size(), 16u * 32u);
    for (size_t at = 0; at < rowCopies[0].size(); ++at) {
      ASSERT_EQ(rowCopies[0][at], static_cast<float>((at / 32 * 64 + at % 32) % 37)) << "2D element " << at;
    }
    ASSERT_EQ(rowCopies[1].size(), 4u * 4u * 16u);
    for (size_t at = 0; at < rowCopies[1].size(); ++at) {
      ASSERT_EQ(rowCopies[1][at], static_cast<float>((at / 16 * 64 + at % 16) % 37)) << "3D element " << at;
    }

    // Device 1's buffer is in no checkpoint: re-execution must write what
    // each copy wrote instead of copying it.
    const Outcome replay = kcapOnDouble({"replay", path}, twoDevices);
    EXPECT_EQ(replay.exitCode, 0) << replay.describe();
    EXPECT_NE(replay.out.find("Verdict: all 4 intervals reproduced as recorded."), std::string::npos)
        << replay.describe();
  }
  const Outcome dump = run({kcapBinary(), {"dump", path, "--type", "memcpy"}, {}, false});
  EXPECT_EQ(dump.exitCode, 0) << dump.describe();
  size_t dumped = 0;
  for (size_t at = dump.out.find("deviceToDevice"); at != std::string::npos;
       at = dump.out.find("deviceToDevice", at + 1)) {
    const size_t end = dump.out.find('\n', at);
    dumped += dump.out.substr(at, end - at).find(" crossDevice") != std::string::npos ? 1 : 0;
  }
  EXPECT_EQ(dumped, size_t{kRounds} + 2) << dump.out;

  // Metadata mode names the crossing, without the bytes.
  const std::string metadata = dir.file("metadata.kcap");
  env["KCAP_OUTPUT"] = metadata;
  env["KCAP_MODE"] = "metadata";
  ASSERT_EQ(run({peerCopyProgram(), {}, env, true}).exitCode, 0);
  int named = 0;
  for (const auto& e : kcap::test::readAllEvents(metadata)) {
    if (e.get().which() != Event::MEMCPY || !e.get().getMemcpy().getCrossDevice()) continue;
    EXPECT_EQ(e.get().getMemcpy().getData().getSize(), 0u);
    ++named;
  }
  EXPECT_EQ(named, kRounds + 2);
}

// What the other rank of fake_nccl.cpp sends, and the program's x.
float peerValue(int i) { return static_cast<float>((i * 5) % 11); }
float programX(int i) { return static_cast<float>(i % 13); }

std::vector<const kcap::test::OwnedEvent*> collectivesOf(const std::vector<kcap::test::OwnedEvent>& events) {
  std::vector<const kcap::test::OwnedEvent*> out;
  for (const auto& e : events) {
    if (e.get().which() == Event::COLLECTIVE) out.push_back(&e);
  }
  return out;
}

Outcome recordNccl(const std::string& path, const std::string& mode, const Outcome& plain,
                   const std::string& program = ncclCollectivesProgram()) {
  const Outcome shimmed = run({program, {}, {{"KCAP_OUTPUT", path}, {"KCAP_MODE", mode}}, true});
  EXPECT_EQ(shimmed.exitCode, 0) << shimmed.describe();
  EXPECT_EQ(shimmed.err, "") << shimmed.describe();
  EXPECT_EQ(shimmed.out, plain.out) << "the program's results under the shim";
  return shimmed;
}

// Each call is recorded after NCCL queued it (a group's at ncclGroupEnd),
// with what it wrote on this rank, and re-execution writes that back: the
// peer's share is in no checkpoint and no CUDA call of this process. NCCL's
// own memory, which each call changes too, is left out of the checkpoints.
TEST(NcclRecord, CheckpointModeLogsWhatEachCollectiveWrote) {
  kcap::test::TempDir dir("kcap-nccl");
  const Outcome plain = run({ncclCollectivesProgram(), {}, {}, false});
  ASSERT_EQ(plain.exitCode, 0) << plain.describe();
  ASSERT_NE(plain.out.find("result nccl_sums "), std::string::npos) << plain.describe();
  const std::string path = dir.file("checkpoint.kcap");
  recordNccl(path, "checkpoint", plain);

  const auto events = kcap::test::readAllEvents(path);
  const auto calls = collectivesOf(events);
  ASSERT_EQ(calls.size(), 4u) << "ncclAllReduce, then the group's ncclAllGather, ncclRecv and ncclSend";
  const schema::CollectiveOp ops[] = {schema::CollectiveOp::ALL_REDUCE, schema::CollectiveOp::ALL_GATHER,
                                      schema::CollectiveOp::RECV, schema::CollectiveOp::SEND};
  const uint64_t written[] = {kN * 4, kN * 4, kN * 4, 0};
  for (size_t k = 0; k < calls.size(); ++k) {
    const auto c = calls[k]->get().getCollective();
    EXPECT_EQ(c.getOperation(), ops[k]) << "call " << k;
    EXPECT_EQ(c.getGrouped(), k != 0) << "call " << k;
    EXPECT_EQ(c.getRank(), 0) << "call " << k;
    EXPECT_EQ(c.getRanks(), 2) << "call " << k;
    EXPECT_EQ(c.getResult(), 0) << "call " << k;
    EXPECT_EQ(c.getWritten(), written[k]) << "call " << k;
    EXPECT_EQ(c.getData().getSize(), 0u) << "call " << k << ": its bytes come in a writtenData event";
    EXPECT_EQ(c.getDataDeferred(), written[k] != 0) << "call " << k;
    EXPECT_EQ(std::string(c.getDataMissing().cStr()), "") << "call " << k;
    const auto* read = writtenDataOf(events, calls[k]->get().getSeq());
    ASSERT_EQ(read != nullptr, written[k] != 0) << "call " << k;
    if (read == nullptr) continue;
    EXPECT_EQ(read->get().getWrittenData().getData().getSize(), written[k]) << "call " << k;
    EXPECT_EQ(std::string(read->get().getWrittenData().getMissing().cStr()), "") << "call " << k;
  }
  // The group is recorded once the outermost ncclGroupEnd returned, after
  // the launch before it and before the launch after it.
  size_t launchesBefore = 0;
  for (const auto& e : events) {
    if (e.get().which() == Event::LAUNCH) ++launchesBefore;
    if (e.get().getSeq() == calls[1]->get().getSeq()) break;
  }
  EXPECT_EQ(launchesBefore, 2u);

  // NCCL's own memory (made in libnccl, on the calling thread and on the
  // thread it started) is marked and left out of every checkpoint; what
  // ncclMemAlloc made is the program's.
  std::vector<uint64_t> ncclOwn;
  size_t programs = 0;
  for (const auto& e : events) {
    if (e.get().which() != Event::ALLOC) continue;
    const auto a = e.get().getAlloc();
    if (a.getByNccl()) {
      ncclOwn.push_back(a.getAddress());
    } else {
      ++programs;
    }
  }
  EXPECT_EQ(ncclOwn.size(), 2u) << "the communicator's buffer and its thread's";
  EXPECT_EQ(programs, 4u) << "x, y, g and ncclMemAlloc's r";
  size_t checkpoints = 0;
  for (const auto& e : events) {
    if (e.get().which() != Event::CHECKPOINT) continue;
    ++checkpoints;
    EXPECT_EQ(e.get().getCheckpoint().getRanges().size(), 4u);
    for (const auto range : e.get().getCheckpoint().getRanges()) {
      for (const uint64_t own : ncclOwn) EXPECT_NE(range.getAddress(), own) << "NCCL's own memory checkpointed";
    }
  }
  EXPECT_GE(checkpoints, 2u);

  auto reader = kcap::format::TraceReader::open(path);
  const auto bytesOf = [&](size_t k) {
    return floatsOf(
        reader->readContent(writtenDataOf(events, calls[k]->get().getSeq())->get().getWrittenData().getData()));
  };
  const auto reduced = bytesOf(0);
  const auto gathered = bytesOf(1);
  const auto received = bytesOf(2);
  for (int i = 0; i < kN; ++i) {
    const size_t at = static_cast<size_t>(i);
    ASSERT_EQ(reduced[at], 1 + 2 * programX(i) + peerValue(i)) << "all-reduce element " << i;
    const float gather = i < kN / 2 ? 1 + 4 * programX(i) + peerValue(i) : peerValue(i - kN / 2);
    ASSERT_EQ(gathered[at], gather) << "all-gather element " << i;
    ASSERT_EQ(received[at], 2 * peerValue(i)) << "recv element " << i;
  }

  const Outcome dump = run({kcapBinary(), {"dump", path, "--type", "collective"}, {}, false});
  EXPECT_EQ(dump.exitCode, 0) << dump.describe();
  EXPECT_NE(dump.out.find("allReduce"), std::string::npos) << dump.out;
  EXPECT_NE(dump.out.find("rank=0 ranks=2"), std::string::npos) << dump.out;
  const Outcome info = run({kcapBinary(), {"info", path}, {}, false});
  EXPECT_EQ(info.exitCode, 0) << info.describe();
  EXPECT_NE(info.out.find("Written by other GPUs (4 NCCL calls: allGather 1, allReduce 1, recv 1, send 1; 0 copies"),
            std::string::npos)
      << info.out;
  EXPECT_NE(info.out.find("3 read back after their call"), std::string::npos) << info.out;
  EXPECT_EQ(info.out.find("not logged"), std::string::npos) << info.out;

  const Outcome replay = kcapOnDouble({"replay", path});
  EXPECT_EQ(replay.exitCode, 0) << replay.describe();
  EXPECT_NE(replay.out.find("reproduced as recorded"), std::string::npos) << replay.describe();
}

// The read-back memory's two limits: none (KCAP_READBACK=0), where each
// call is waited for and carries its bytes itself, as does a call too large
// for that memory; and room for one call at a time (1M: each read-back takes
// a whole MiB), where every call after the first waits for the one before
// it to be logged. Either way each call's bytes are logged once, as written.
TEST(NcclRecord, ReadBackMemoryBoundsWhatIsInFlight) {
  const Outcome plain = run({ncclCollectivesProgram(), {}, {}, false});
  ASSERT_EQ(plain.exitCode, 0) << plain.describe();
  for (const std::string bound : {"0", "1M"}) {
    SCOPED_TRACE("KCAP_READBACK=" + bound);
    const bool later = bound != "0";
    kcap::test::TempDir dir("kcap-nccl");
    const std::string path = dir.file("bounded.kcap");
    const Outcome shimmed = run({ncclCollectivesProgram(),
                                 {},
                                 {{"KCAP_OUTPUT", path}, {"KCAP_MODE", "checkpoint"}, {"KCAP_READBACK", bound}},
                                 true});
    ASSERT_EQ(shimmed.exitCode, 0) << shimmed.describe();
    EXPECT_EQ(shimmed.out, plain.out);
    const auto events = kcap::test::readAllEvents(path);
    const auto calls = collectivesOf(events);
    ASSERT_EQ(calls.size(), 4u);
    auto reader = kcap::format::TraceReader::open(path);
    std::vector<std::vector<float>> logged;
    for (size_t k = 0; k < 3; ++k) {
      const auto c = calls[k]->get().getCollective();
      EXPECT_EQ(c.getDataDeferred(), later) << "call " << k;
      const auto* read = writtenDataOf(events, calls[k]->get().getSeq());
      ASSERT_EQ(read != nullptr, later) << "call " << k;
      const auto data = later ? read->get().getWrittenData().getData() : c.getData();
      ASSERT_EQ(data.getSize(), uint64_t{kN * 4}) << "call " << k;
      logged.push_back(floatsOf(reader->readContent(data)));
    }
    for (int i = 0; i < kN; ++i) {
      const size_t at = static_cast<size_t>(i);
      ASSERT_EQ(logged[0][at], 1 + 2 * programX(i) + peerValue(i)) << "all-reduce element " << i;
      ASSERT_EQ(logged[2][at], 2 * peerValue(i)) << "recv element " << i;
    }
    const Outcome replay = kcapOnDouble({"replay", path});
    EXPECT_EQ(replay.exitCode, 0) << replay.describe();
    EXPECT_NE(replay.out.find("reproduced as recorded"), std::string::npos) << replay.describe();
  }
}

// Metadata mode records the calls, never their bytes.
TEST(NcclRecord, MetadataModeNamesTheCallsWithoutTheirData) {
  kcap::test::TempDir dir("kcap-nccl");
  const Outcome plain = run({ncclCollectivesProgram(), {}, {}, false});
  ASSERT_EQ(plain.exitCode, 0) << plain.describe();
  const std::string path = dir.file("metadata.kcap");
  recordNccl(path, "metadata", plain);
  const auto events = kcap::test::readAllEvents(path);
  const auto calls = collectivesOf(events);
  ASSERT_EQ(calls.size(), 4u);
  for (const auto& call : calls) {
    EXPECT_EQ(call->get().getCollective().getData().getSize(), 0u);
    EXPECT_EQ(std::string(call->get().getCollective().getDataMissing().cStr()), "");
    EXPECT_FALSE(call->get().getCollective().getDataDeferred());
    EXPECT_EQ(writtenDataOf(events, call->get().getSeq()), nullptr);
  }
  EXPECT_EQ(calls[0]->get().getCollective().getWritten(), uint64_t{kN * 4});
}

// The ways a program can reach NCCL, each recorded as a linked program's
// calls are: ncclAllReduce, then the group's ncclAllGather, ncclRecv and
// ncclSend, each once, and re-executed.
struct NcclWay {
  const char* name;
  const char* suffix;  // of the program (tests/record/CMakeLists.txt)
  const char* says;    // in the program's output
};

void PrintTo(const NcclWay& way, std::ostream* out) { *out << way.name; }

class NcclReached : public ::testing::TestWithParam<NcclWay> {};

TEST_P(NcclReached, EachCallIsRecordedOnceAndReexecuted) {
  const NcclWay& way = GetParam();
  kcap::test::TempDir dir("kcap-nccl");
  const std::string program = ncclCollectivesProgram() + way.suffix;
  const Outcome plain = run({program, {}, {}, false});
  ASSERT_EQ(plain.exitCode, 0) << plain.describe();
  ASSERT_NE(plain.out.find(way.says), std::string::npos) << plain.describe();
  const std::string path = dir.file("nccl.kcap");
  recordNccl(path, "checkpoint", plain, program);
  const auto events = kcap::test::readAllEvents(path);
  const auto calls = collectivesOf(events);
  ASSERT_EQ(calls.size(), 4u) << "ncclAllReduce once, then the group's three calls";
  const schema::CollectiveOp ops[] = {schema::CollectiveOp::ALL_REDUCE, schema::CollectiveOp::ALL_GATHER,
                                      schema::CollectiveOp::RECV, schema::CollectiveOp::SEND};
  for (size_t k = 0; k < calls.size(); ++k) {
    EXPECT_EQ(calls[k]->get().getCollective().getOperation(), ops[k]) << "call " << k;
    EXPECT_EQ(calls[k]->get().getCollective().getGrouped(), k != 0) << "call " << k << ": ncclGroupStart/End seen";
  }
  const Outcome replay = kcapOnDouble({"replay", path});
  EXPECT_EQ(replay.exitCode, 0) << replay.describe();
  EXPECT_NE(replay.out.find("reproduced as recorded"), std::string::npos) << replay.describe();
}

INSTANTIATE_TEST_SUITE_P(NcclRecord, NcclReached,
                         ::testing::Values(
                             // NCCL loaded only in the scope of a library the program dlopened
                             // without RTLD_GLOBAL (as Python loads PyTorch): the library's calls
                             // still reach the shim first, which must find NCCL there.
                             NcclWay{"InALocalScope", "_dlopen", "result nccl_sums "},
                             // A program that opens NCCL itself and looks its functions up by
                             // name: it gets the shim's entry points.
                             NcclWay{"LookedUpByName", "_dlsym", "result nccl_sums "},
                             // A program with a profiling layer of its own (nccl_user.cpp): its
                             // ncclAllReduce and group calls reach the shim, which forwards them
                             // to the layer, which calls NCCL's profiling names (pnccl...) and
                             // reaches the shim again; the group's calls come straight by their
                             // profiling names.
                             NcclWay{"ThroughProfilingNames", "_profiler", "profiled 3 calls"}),
                         [](const ::testing::TestParamInfo<NcclWay>& way) { return std::string(way.param.name); });

// A group of NCCL calls on two devices' streams, ended with device 0's
// context current: each call's bytes are read back on its own stream, in
// that stream's context (a copy queued on another context's stream fails).
TEST(NcclRecord, AGroupOverTwoDevicesIsReadBackOnEachStream) {
  kcap::test::TempDir dir("kcap-nccl");
  const std::string program = ncclCollectivesProgram() + "_two_devices";
  const std::map<std::string, std::string> twoDevices = {{"KCAP_DOUBLE_DEVICES", "2"}};
  const Outcome plain = run({program, {}, twoDevices, false});
  ASSERT_EQ(plain.exitCode, 0) << plain.describe();
  ASSERT_NE(plain.out.find("result nccl_two_devices "), std::string::npos) << plain.describe();
  const std::string path = dir.file("two-devices.kcap");
  std::map<std::string, std::string> env = twoDevices;
  env["KCAP_OUTPUT"] = path;
  env["KCAP_MODE"] = "checkpoint";
  const Outcome shimmed = run({program, {}, env, true});
  ASSERT_EQ(shimmed.exitCode, 0) << shimmed.describe();
  EXPECT_EQ(shimmed.out, plain.out);

  const auto events = kcap::test::readAllEvents(path);
  const auto calls = collectivesOf(events);
  ASSERT_EQ(calls.size(), 2u) << "one ncclAllReduce on each device";
  auto reader = kcap::format::TraceReader::open(path);
  for (size_t k = 0; k < calls.size(); ++k) {
    const auto c = calls[k]->get().getCollective();
    EXPECT_TRUE(c.getGrouped()) << "call " << k;
    EXPECT_TRUE(c.getDataDeferred()) << "call " << k;
    const auto* read = writtenDataOf(events, calls[k]->get().getSeq());
    ASSERT_NE(read, nullptr) << "call " << k;
    ASSERT_EQ(std::string(read->get().getWrittenData().getMissing().cStr()), "") << "call " << k;
    const std::vector<float> reduced = floatsOf(reader->readContent(read->get().getWrittenData().getData()));
    ASSERT_EQ(reduced.size(), size_t{kN}) << "call " << k;
    for (int i = 0; i < kN; ++i) {
      ASSERT_EQ(reduced[static_cast<size_t>(i)], 1 + peerValue(i)) << "call " << k << " element " << i;
    }
  }
}

// Another process's physical memory mapped through a shareable handle
// (cuMemImportFromShareableHandle, then cuMemMap): as with CUDA IPC, each
// launch that reaches it logs it as the launch saw it, checkpoints leave it
// out, and re-execution writes it back before the launch.
TEST(VmmImportRecord, CheckpointModeLogsWhatEachLaunchReadOfAnotherProcesssMemory) {
  kcap::test::TempDir dir("kcap-vmm");
  const std::string shared = dir.file("exported-x");
  const Outcome plain = run({vmmImportProgram(), {shared}, {}, false});
  ASSERT_EQ(plain.exitCode, 0) << plain.describe();
  const std::string path = dir.file("checkpoint.kcap");
  const Outcome shimmed =
      run({vmmImportProgram(),
           {shared},
           {{"KCAP_OUTPUT", path}, {"KCAP_MODE", "checkpoint"}, {"KCAP_CHECKPOINT_EVERY", "2launches"}},
           true});
  ASSERT_EQ(shimmed.exitCode, 0) << shimmed.describe();
  EXPECT_EQ(shimmed.err, "") << shimmed.describe();
  EXPECT_EQ(shimmed.out, plain.out);

  auto reader = kcap::format::TraceReader::open(path);
  int imports = 0, round = 0;
  for (const auto& e : kcap::test::readAllEvents(path)) {
    if (e.get().which() == Event::ALLOC && e.get().getAlloc().getKind() == schema::AllocKind::VMM_IMPORT) ++imports;
    if (e.get().which() == Event::CHECKPOINT) {
      for (const auto range : e.get().getCheckpoint().getRanges()) {
        EXPECT_NE(range.getKind(), schema::MemoryKind::IMPORTED) << "checkpoints leave another process's memory out";
        EXPECT_EQ(range.getContent().getSize(), kN * sizeof(float)) << "y alone";
      }
    }
    if (e.get().which() != Event::LAUNCH) continue;
    const auto pre = e.get().getLaunch().getPre();
    ASSERT_EQ(pre.size(), 1u) << "launch " << round;
    EXPECT_EQ(pre[0].getKind(), schema::MemoryKind::IMPORTED);
    const std::vector<uint8_t> bytes = reader->readContent(pre[0].getContent());
    ASSERT_GE(bytes.size(), kN * sizeof(float));
    const std::vector<float> x = floatsOf(bytes);
    for (int i = 0; i < kN; ++i) {
      ASSERT_EQ(x[static_cast<size_t>(i)], static_cast<float>((i * (round + 5)) % 31))
          << "launch " << round << " element " << i;
    }
    ++round;
  }
  EXPECT_EQ(imports, 1);
  EXPECT_EQ(round, kRounds);

  const Outcome replay = kcapOnDouble({"replay", path});
  EXPECT_EQ(replay.exitCode, 0) << replay.describe();
  EXPECT_NE(replay.out.find("Verdict: all 3 intervals reproduced as recorded."), std::string::npos)
      << replay.describe();
}

}  // namespace
}  // namespace kcap_test
