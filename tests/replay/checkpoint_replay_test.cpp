// `kcap replay` on checkpoint traces (--mode checkpoint), against the driver
// double: traces written with TraceWriter (checkpoint_trace.h), re-executed
// by `kcap replay` with KCAP_LIBCUDA naming the double, whose
// kcap_change_hash is the host reference. Checks the interval verdicts, the
// damage paths, --launch N and the exit codes; checkpoint_bisect_test.cpp
// goes on with `kcap bisect` and launches in flight.
#include "checkpoint_trace.h"

#include <gtest/gtest.h>

#include <regex>
#include <string>
#include <vector>

namespace kcap_test {
namespace {

using namespace kcap_test::checkpoint;  // the checkpoint replay tests' shared trace (checkpoint_trace.h)

// (a) four intervals, all reproduced; (c) a host-to-device copy in the
// middle of one, a device-to-device copy and a memset in another.
TEST_F(CheckpointReplay, IntervalsReproduceWithACopyInside) {
  // Both forms of a launch: its outcome in it (Launch.ended), and a LaunchEnd
  // after it (as recorded before that field).
  for (const bool launchEnds : {false, true}) {
    SCOPED_TRACE(launchEnds ? "launchEnd events" : "ended launches");
    const std::string path = dir_.file(launchEnds ? "three-ends.kcap" : "three.kcap");
    Program p;
    CheckpointTrace t(path);
    if (launchEnds) t.withLaunchEnds();
    t.checkpoint(0, p.state());
    t.axpy();
    p.axpy();
    t.axpy();
    p.axpy();
    t.checkpoint(2, p.state());
    t.axpy();
    p.axpy();
    for (uint32_t i = 0; i < kElements; ++i) p.x[i] = static_cast<float>(3 * (i % 7));
    t.copyToDevice(kX, bytesOf(p.x));
    t.axpy();
    p.axpy();
    t.checkpoint(4, p.state());
    t.axpy();
    p.axpy();
    t.checkpoint(5, p.state());
    // A device-to-device copy and a memset in the last interval.
    t.copyDeviceToDevice(kY + 64, kX, 256);
    std::memcpy(p.y.data() + 16, p.x.data(), 256);
    const float half = 0.5f;
    uint32_t bits = 0;
    std::memcpy(&bits, &half, 4);
    t.memset32(kX + 4096, bits, 100);
    std::fill(p.x.begin() + 1024, p.x.begin() + 1124, half);
    t.axpy();
    p.axpy();
    t.checkpoint(6, p.state());
    t.close();

    const Outcome run = replay({path});
    EXPECT_EQ(run.exitCode, kExitOk) << run.describe();
    EXPECT_NE(run.out.find("interval 0 (launches 0..1, checkpoint 0 -> 1): REPRODUCED (32.0 KiB in 8 pieces compared)"),
              std::string::npos)
        << run.out;
    EXPECT_NE(run.out.find("interval 1 (launches 2..3, checkpoint 1 -> 2): REPRODUCED"), std::string::npos) << run.out;
    EXPECT_NE(run.out.find("interval 2 (launch 4, checkpoint 2 -> 3): REPRODUCED"), std::string::npos) << run.out;
    EXPECT_NE(run.out.find("interval 3 (launch 5, checkpoint 3 -> 4): REPRODUCED"), std::string::npos) << run.out;
    EXPECT_NE(run.out.find("all 4 intervals reproduced"), std::string::npos) << run.out;

    const Outcome json = replay({path, "--json"});
    EXPECT_EQ(json.exitCode, kExitOk) << json.describe();
    EXPECT_NE(json.out.find("\"verdict\":\"REPRODUCED\""), std::string::npos) << json.out;
    EXPECT_NE(json.out.find("\"compared\":true"), std::string::npos) << json.out;
  }
}

// Launches that read page-locked host memory the program rewrote between
// them (no CUDA call in between): each runs on what it read when recorded,
// logged with it; the first launch of an interval, the others in flight.
TEST_F(CheckpointReplay, HostMemoryLaunchesReadIsWrittenAsEachSawIt) {
  const std::string path = dir_.file("host-input.kcap");
  Program p;
  CheckpointTrace t(path);
  t.checkpoint(0, p.state());
  for (int round = 0; round < 3; ++round) {
    std::vector<float> host(kElements);
    for (uint32_t i = 0; i < kElements; ++i) host[i] = static_cast<float>((i * (round + 3)) % 29);
    t.axpyFromHost(bytesOf(host));
    for (uint32_t i = 0; i < kElements; ++i) p.y[i] = kAlpha * host[i] + p.y[i];
  }
  t.checkpoint(3, p.state());
  t.axpy();
  p.axpy();
  t.checkpoint(4, p.state());
  t.close();

  const Outcome run = replay({path});
  EXPECT_EQ(run.exitCode, kExitOk) << run.describe();
  EXPECT_NE(run.out.find("interval 0 (launches 0..2, checkpoint 0 -> 1): REPRODUCED"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("all 2 intervals reproduced"), std::string::npos) << run.out;
  // One launch at a time (the extract path) writes them the same way.
  const Outcome single = replay({path, "--launch", "1"});
  EXPECT_EQ(single.exitCode, kExitOk) << single.describe();
}

// (b) a wrong recorded hash and a real divergence: DIFFERS, naming the range.
TEST_F(CheckpointReplay, DifferingPiecesAreNamed) {
  const std::string path = dir_.file("differs.kcap");
  Program p;
  CheckpointTrace t(path);
  t.checkpoint(0, p.state());
  t.axpy();
  p.axpy();
  auto spoiled = p.state();
  spoiled[1].wrongHashPiece = 2;
  t.checkpoint(1, spoiled);
  t.axpy();
  p.axpy();
  auto wrong = p.state();
  wrong[1].bytes[3 * kPieceSize + 17] ^= 0x40;  // the recording says y held this
  t.checkpoint(2, wrong);
  t.close();

  const Outcome run = replay({path});
  EXPECT_EQ(run.exitCode, kExitDiffers) << run.describe();
  EXPECT_NE(run.out.find("interval 0 (launch 0, checkpoint 0 -> 1): DIFFERS (1 range differs"), std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("range 0x7e1000400000 (allocation, 16.0 KiB): 1 of 4 pieces differ; the bytes equal the "
                         "recorded piece: its recorded change hash is wrong"),
            std::string::npos)
      << run.out;
  // Checkpoint 1 did not reproduce: it is restored, and interval 1 found on its own.
  EXPECT_NE(run.out.find("interval 1 (launch 1, checkpoint 1 -> 2): DIFFERS"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("1 of 4 pieces differ, first differing byte at offset 12,305 (0x3011)"), std::string::npos)
      << run.out;
}

// (d) --launch N re-executes from the last checkpoint before it.
TEST_F(CheckpointReplay, LaunchPicksTheCheckpointBeforeIt) {
  const std::string path = dir_.file("launch.kcap");
  Program p;
  CheckpointTrace t(path);
  t.checkpoint(0, p.state());
  t.axpy();
  p.axpy();
  t.axpy();
  p.axpy();
  t.checkpoint(2, p.state());
  t.axpy();
  p.axpy();
  t.axpy();
  p.axpy();
  t.checkpoint(4, p.state());
  t.close();

  const Outcome run = replay({path, "--launch", "3"});
  EXPECT_EQ(run.exitCode, kExitOk) << run.describe();
  EXPECT_NE(run.out.find("launch 3 (axpy, grid (16,1,1), block (256,1,1)"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("re-executed from checkpoint 1"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("interval 1 (launches 2..3, checkpoint 1 -> 2): REPRODUCED"), std::string::npos) << run.out;
  EXPECT_EQ(run.out.find("interval 0 "), std::string::npos) << run.out;

  const Outcome first = replay({path, "--launch", "0"});
  EXPECT_EQ(first.exitCode, kExitOk) << first.describe();
  EXPECT_NE(first.out.find("re-executed from checkpoint 0"), std::string::npos) << first.out;
  EXPECT_NE(first.out.find("interval 0 (launches 0..1, checkpoint 0 -> 1): REPRODUCED"), std::string::npos)
      << first.out;

  EXPECT_EQ(replay({path, "--launch", "9"}).exitCode, kExitTrace);
  EXPECT_EQ(replay({path, "--range", "0..1"}).exitCode, kExitUsage);
  EXPECT_EQ(replay({path, "--no-fixed-va"}).exitCode, kExitUsage);
}

// (e) a checkpoint whose blob is missing and one that is incomplete: replay
// starts from the first intact one and goes through the incomplete one.
TEST_F(CheckpointReplay, DamagedCheckpointsAreNamed) {
  const std::string path = dir_.file("damaged.kcap");
  Program p;
  CheckpointTrace t(path);
  auto unstored = p.state();
  for (float& v : p.y) v = 5.0f;  // nothing else in the file holds checkpoint 0's y
  unstored = p.state();
  unstored[1].storeBlobs = false;
  t.checkpoint(0, unstored);
  t.axpy();
  p.axpy();
  t.checkpoint(1, p.state());
  t.axpy();
  p.axpy();
  t.checkpoint(2, {}, 2);  // CUDA_ERROR_OUT_OF_MEMORY while taking it
  t.axpy();
  p.axpy();
  t.checkpoint(3, p.state());
  t.close();

  const Outcome run = replay({path});
  EXPECT_EQ(run.exitCode, kExitOk) << run.describe();
  EXPECT_TRUE(std::regex_search(run.out, std::regex("checkpoint 0 at event #[0-9]+ is damaged \\(the content of range "
                                                    "0x7e1000400000 is not in the file")))
      << run.out;
  EXPECT_NE(run.out.find("replay starts from checkpoint 1"), std::string::npos) << run.out;
  EXPECT_TRUE(std::regex_search(
      run.out,
      std::regex("checkpoint 2 at event #[0-9]+ is damaged \\(incomplete: taking it failed with CUresult 2\\)")))
      << run.out;
  EXPECT_NE(run.out.find("interval 0 (launch 0, checkpoint 0 -> 1): NOT VERIFIED"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("interval 1 (launches 1..2, checkpoint 1 -> 3): REPRODUCED"), std::string::npos) << run.out;
}

// A checkpoint of another device than the first one's: not a state of the
// memory the others hold, so it is damage (replay compares the interval
// with the next checkpoint instead), and `kcap check` says so.
TEST_F(CheckpointReplay, ACheckpointOfAnotherDeviceIsDamage) {
  const std::string path = dir_.file("devices.kcap");
  Program p;
  CheckpointTrace t(path);
  t.checkpoint(0, p.state());
  t.axpy();
  p.axpy();
  t.checkpoint(1, p.state());
  t.axpy();
  p.axpy();
  t.checkpointDevice(1);
  t.checkpoint(2, p.state());
  t.checkpointDevice(0);
  t.axpy();
  p.axpy();
  t.checkpoint(3, p.state());
  t.close();

  const Outcome run = replay({path});
  EXPECT_EQ(run.exitCode, kExitOk) << run.describe();
  EXPECT_TRUE(std::regex_search(run.out, std::regex("checkpoint 2 at event #[0-9]+ is damaged \\(it holds device 1's "
                                                    "memory; the trace's first checkpoint holds device 0's\\)")))
      << run.out;
  EXPECT_NE(run.out.find("interval 1 (launches 1..2, checkpoint 1 -> 3): REPRODUCED"), std::string::npos) << run.out;
  const Outcome check = kcapOnDouble({"check", path});
  EXPECT_EQ(check.exitCode, 1) << check.describe();
  EXPECT_TRUE(std::regex_search(check.out,
                                std::regex("event #[0-9]+ \\(checkpoint 2\\) holds device 1's memory; the first holds "
                                           "device 0's")))
      << check.describe();
}

// (f) no checkpoint after the launches: nothing compared, never REPRODUCED.
TEST_F(CheckpointReplay, NothingComparedIsSaid) {
  const std::string path = dir_.file("one.kcap");
  Program p;
  CheckpointTrace t(path);
  t.checkpoint(0, p.state());
  t.axpy();
  t.axpy();
  t.close();

  const Outcome run = replay({path});
  EXPECT_EQ(run.exitCode, kExitTrace) << run.describe();
  EXPECT_EQ(run.out.find("REPRODUCED"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("interval 0 (launches 0..1, checkpoint 0 -> end of trace): NOT VERIFIED"), std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("Verdict: nothing compared"), std::string::npos) << run.out;
}

// A graph launch cannot be re-executed yet: its interval says so, and replay
// goes on from the next checkpoint.
TEST_F(CheckpointReplay, GraphLaunchEndsItsInterval) {
  const std::string path = dir_.file("graph.kcap");
  Program p;
  CheckpointTrace t(path);
  t.checkpoint(0, p.state());
  t.axpy();
  p.axpy();
  t.graphLaunch();
  t.checkpoint(1, p.state());
  t.axpy();
  p.axpy();
  t.checkpoint(2, p.state());
  t.close();

  const Outcome run = replay({path});
  EXPECT_EQ(run.exitCode, kExitTrace) << run.describe();
  EXPECT_TRUE(std::regex_search(
      run.out,
      std::regex("interval 0 \\(launch 0, checkpoint 0 -> 1\\): NOT RE-EXECUTABLE \\(graph launch at event #")))
      << run.out;
  EXPECT_NE(run.out.find("interval 1 (launch 1, checkpoint 1 -> 2): REPRODUCED"), std::string::npos) << run.out;
}

// An NCCL collective waits for its peers, which re-execution does not run,
// and what it wrote is not logged: its interval says so instead of hanging,
// and replay goes on from the next checkpoint.
TEST_F(CheckpointReplay, NcclCollectiveEndsItsInterval) {
  const std::string path = dir_.file("nccl.kcap");
  Program p;
  CheckpointTrace t(path);
  t.checkpoint(0, p.state());
  t.axpy();
  p.axpy();
  t.checkpoint(1, p.state());
  t.ncclAllReduce();
  for (float& v : p.y) v *= 2;  // the sum over two ranks of equal y
  t.axpy();
  p.axpy();
  t.checkpoint(3, p.state());
  t.axpy();
  p.axpy();
  t.checkpoint(4, p.state());
  t.close();

  const Outcome run = replay({path});
  EXPECT_EQ(run.exitCode, kExitTrace) << run.describe();
  EXPECT_NE(run.out.find("interval 0 (launch 0, checkpoint 0 -> 1): REPRODUCED"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("interval 1 (launches 1..2, checkpoint 1 -> 2): NOT RE-EXECUTABLE (launch 1 "
                         "(ncclDevKernel_AllReduce_Sum_f32_RING_LL) is an NCCL kernel that no NCCL call kcap saw "
                         "launched: it waits for its peers"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("interval 2 (launch 3, checkpoint 2 -> 3): REPRODUCED"), std::string::npos) << run.out;
}

// The same all-reduce made through an NCCL call the shim saw, which logged
// what it wrote on this rank: the kernel is passed over, the logged bytes
// written in its place, and the interval reproduces. The peers' share
// (another rank's y) is in no checkpoint: without the log it differs.
TEST_F(CheckpointReplay, LoggedCollectiveIsWrittenInPlaceOfItsKernel) {
  const std::string path = dir_.file("nccl-logged.kcap");
  Program p;
  CheckpointTrace t(path);
  t.checkpoint(0, p.state());
  t.axpy();
  p.axpy();
  t.checkpoint(1, p.state());
  for (uint32_t i = 0; i < kElements; ++i) p.y[i] += static_cast<float>(3 * (i % 7));  // the peer's y
  t.ncclAllReduce(&p.y);
  t.axpy();
  p.axpy();
  t.checkpoint(3, p.state());
  t.close();

  const Outcome run = replay({path});
  EXPECT_EQ(run.exitCode, kExitOk) << run.describe();
  EXPECT_NE(run.out.find("1 NCCL kernel launch(es) are not re-run"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("interval 1 (launches 1..2, checkpoint 1 -> 2): REPRODUCED"), std::string::npos) << run.out;
}

// A call whose writes were not logged (its stream captured, say) stops its
// interval with the reason the recorder gave.
TEST_F(CheckpointReplay, CollectiveWithoutItsDataEndsItsInterval) {
  const std::string path = dir_.file("nccl-missing.kcap");
  Program p;
  CheckpointTrace t(path);
  t.checkpoint(0, p.state());
  t.ncclAllReduce(nullptr, "reading it back failed (CUresult 700)");
  t.axpy();
  p.axpy();
  t.checkpoint(2, p.state());
  t.close();

  const Outcome run = replay({path});
  EXPECT_EQ(run.exitCode, kExitTrace) << run.describe();
  EXPECT_NE(run.out.find("NOT RE-EXECUTABLE (the NCCL allReduce at event #"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("wrote 16384 bytes the trace does not hold: reading it back failed (CUresult 700)"),
            std::string::npos)
      << run.out;
}

// The same call read back in stream order: its bytes arrive in a
// writtenData event after the next checkpoint, and re-execution writes them
// at the call's place. Without that event the interval cannot be
// re-executed, and says why.
TEST_F(CheckpointReplay, ReadBackWrittenLaterIsWrittenAtTheCallsPlace) {
  for (const char* ending : {"read back", "never read back", "read back failed"}) {
    SCOPED_TRACE(ending);
    const std::string path = dir_.file(std::string("nccl-later-") + ending + ".kcap");
    Program p;
    CheckpointTrace t(path);
    t.checkpoint(0, p.state());
    t.axpy();
    p.axpy();
    t.checkpoint(1, p.state());
    for (uint32_t i = 0; i < kElements; ++i) p.y[i] += static_cast<float>(3 * (i % 7));  // the peer's y
    const uint64_t call = t.ncclAllReduceReadBackLater();
    const std::vector<float> written = p.y;  // what the call left in y
    t.axpy();
    p.axpy();
    t.checkpoint(3, p.state());
    const std::string which = ending;
    if (which == "read back") {
      t.writtenData(call, &written);
    } else if (which == "read back failed") {
      t.writtenData(call, nullptr, "the copy back failed (CUresult 700)");
    }
    t.close();

    const Outcome run = replay({path});
    if (which == "read back") {
      EXPECT_EQ(run.exitCode, kExitOk) << run.describe();
      EXPECT_NE(run.out.find("interval 1 (launches 1..2, checkpoint 1 -> 2): REPRODUCED"), std::string::npos)
          << run.out;
      const Outcome info = kcapOnDouble({"info", path});
      EXPECT_NE(info.out.find("1 read back after their call"), std::string::npos) << info.out;
      EXPECT_EQ(info.out.find("not logged"), std::string::npos) << info.out;
      // The launch after the call cut out as a full-mode trace: its memory
      // is rebuilt by re-execution through the call's read-back bytes.
      const std::string cut = dir_.file("nccl-later-cut.kcap");
      const Outcome extract = kcapOnDouble({"extract", path, "--launch", "2", "-o", cut});
      ASSERT_EQ(extract.exitCode, kExitOk) << extract.describe();
      const Outcome again = replay({cut});
      EXPECT_EQ(again.exitCode, kExitOk) << again.describe();
      EXPECT_NE(again.out.find("REPRODUCED"), std::string::npos) << again.describe();
      continue;
    }
    EXPECT_EQ(run.exitCode, kExitTrace) << run.describe();
    const Outcome info = kcapOnDouble({"info", path});
    EXPECT_NE(info.out.find("not logged"), std::string::npos) << info.out;
    const std::string why = which == "never read back" ? "the trace ends before the bytes it wrote were read back"
                                                       : "the copy back failed (CUresult 700)";
    EXPECT_NE(run.out.find("wrote 16384 bytes the trace does not hold: " + why), std::string::npos) << run.out;
  }
}

// (g) the recorded addresses refused: re-execution cannot relocate.
TEST_F(CheckpointReplay, RefusedAddressesAreRelocatedAndSaidSo) {
  const std::string path = dir_.file("fixed.kcap");
  Program p;
  CheckpointTrace t(path);
  t.checkpoint(0, p.state());
  t.axpy();
  p.axpy();
  t.checkpoint(1, p.state());
  t.close();

  // The memory goes elsewhere; parameters and checkpoints are translated,
  // and the interval still reproduces (nothing in this memory is a pointer).
  const Outcome run = replay({path}, {{"KCAP_DOUBLE_REFUSE_ADDRESS_HINTS", "1"}});
  EXPECT_EQ(run.exitCode, kExitOk) << run.describe();
  EXPECT_NE(run.out.find("relocated, the driver not granting their recorded addresses"), std::string::npos)
      << run.describe();
  EXPECT_NE(run.out.find("pointers stored inside device memory are not rewritten"), std::string::npos)
      << run.describe();
  EXPECT_NE(run.out.find("interval 0 (launch 0, checkpoint 0 -> 1): REPRODUCED"), std::string::npos) << run.describe();
}

// A launch that faults ends the replay with FAULT naming it (the double
// refuses a pointer to unmapped memory with a sticky illegal address).
TEST_F(CheckpointReplay, FaultNamesTheLaunch) {
  const std::string path = dir_.file("fault.kcap");
  Program p;
  CheckpointTrace t(path);
  t.checkpoint(0, p.state());
  t.axpy();
  p.axpy();
  t.checkpoint(1, p.state());
  t.axpy();
  t.axpy(0x1000);  // nothing is mapped there
  t.checkpoint(3, p.state());
  t.close();

  const Outcome run = replay({path});
  EXPECT_EQ(run.exitCode, kExitFault) << run.describe();
  EXPECT_NE(run.out.find("interval 0 (launch 0, checkpoint 0 -> 1): REPRODUCED"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("interval 1 (launches 1..2, checkpoint 1 -> 2): FAULT in launch 2 (axpy): "),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("CUDA_ERROR_ILLEGAL_ADDRESS"), std::string::npos) << run.out;
}

// A trace cut short: replay runs what is intact and says the trace is damaged.
TEST_F(CheckpointReplay, TruncatedTraceRunsWhatIsIntact) {
  const std::string path = dir_.file("whole.kcap");
  Program p;
  CheckpointTrace t(path);
  t.checkpoint(0, p.state());
  for (uint64_t k = 1; k <= 3; ++k) {
    t.axpy();
    p.axpy();
    t.checkpoint(k, p.state());
  }
  t.close();
  std::vector<uint8_t> bytes = kcap::test::readFileBytes(path);
  const std::string cut = dir_.file("cut.kcap");
  size_t reproducedAfterCut = 0;
  for (size_t keep = bytes.size() / 8; keep < bytes.size(); keep += bytes.size() / 8) {
    kcap::test::writeFileBytes(cut, bytes.data(), keep);
    const Outcome run = replay({cut});
    EXPECT_TRUE(run.exitCode == kExitOk || run.exitCode == kExitTrace) << keep << ": " << run.describe();
    EXPECT_EQ(run.out.find("DIFFERS"), std::string::npos) << keep << ": " << run.out;
    if (run.exitCode == kExitOk) {
      EXPECT_NE(run.out.find("the trace is damaged or cut short"), std::string::npos) << keep << ": " << run.out;
      EXPECT_NE(run.out.find("REPRODUCED"), std::string::npos) << keep << ": " << run.out;
      ++reproducedAfterCut;
    }
  }
  EXPECT_NE(reproducedAfterCut, 0u);
}

// Bytes overwritten anywhere in the file: the events of a damaged record
// chunk are missing, and the interval they fall in is not re-executed (what
// is left of it is not what the program ran); nothing damaged DIFFERS.
TEST_F(CheckpointReplay, EventsLostToDamageAreNotCompared) {
  const std::string path = dir_.file("whole.kcap");
  Program p;
  CheckpointTrace t(path);
  t.checkpoint(0, p.state());
  for (uint64_t k = 1; k <= 6; ++k) {
    t.axpy();
    p.axpy();
    t.axpy();
    p.axpy();
    t.checkpoint(k, p.state());
  }
  t.close();
  const std::vector<uint8_t> bytes = kcap::test::readFileBytes(path);
  const std::string damaged = dir_.file("damaged.kcap");
  size_t missingSaid = 0;
  for (size_t at = bytes.size() / 16; at + 16 < bytes.size(); at += bytes.size() / 16) {
    std::vector<uint8_t> copy = bytes;
    for (size_t i = at; i < at + 16; ++i) copy[i] ^= 0x5a;
    kcap::test::writeFileBytes(damaged, copy.data(), copy.size());
    const Outcome run = replay({damaged});
    EXPECT_TRUE(run.exitCode == kExitOk || run.exitCode == kExitTrace) << at << ": " << run.describe();
    EXPECT_EQ(run.out.find("DIFFERS"), std::string::npos) << at << ": " << run.out;
    if (std::regex_search(run.out, std::regex("NOT VERIFIED \\(not re-executed: events #[0-9]+\\.\\.[0-9]+ after "
                                              "checkpoint [0-9]+ at event #[0-9]+ are missing"))) {
      ++missingSaid;
    }
  }
  EXPECT_NE(missingSaid, 0u);
}

// --check determinism runs a differing interval again: a launch whose
// outputs vary between runs is named; an interval that repeats exactly says so.
TEST_F(CheckpointReplay, DeterminismNamesTheVaryingLaunch) {
  const std::string path = dir_.file("racy.kcap");
  Program p;
  for (uint32_t i = 0; i < kElements; ++i) p.x[i] = 1.0f / static_cast<float>(i + 3);  // order-dependent sums
  CheckpointTrace t(path);
  t.checkpoint(0, p.state());
  t.axpy();
  p.axpy();
  auto wrong = p.state();
  wrong[1].bytes[40] ^= 1;
  t.checkpoint(1, wrong);  // axpy is deterministic: the recording is what differs
  t.axpy();
  t.racySum();
  p.axpy();
  t.checkpoint(3, p.state());  // y[0] as racy_sum leaves it differs in any case
  t.close();

  const Outcome run = replay({path, "--check", "determinism", "--runs", "3"});
  EXPECT_EQ(run.exitCode, kExitDiffers) << run.describe();
  EXPECT_NE(run.out.find("determinism: the 3 runs from checkpoint 0 at event #"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("agree with each other: deterministic here"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("determinism: launch 2 (racy_sum) is the first whose outputs vary between 3 runs from "
                         "checkpoint 1"),
            std::string::npos)
      << run.out;
  EXPECT_EQ(replay({path, "--check", "unwritten"}).exitCode, kExitUsage);
}

// Module globals: restored where the module's load put them, written by a
// copy to the symbol between launches, and compared at the next checkpoint.
TEST_F(CheckpointReplay, ModuleGlobalsAreRestoredWrittenAndCompared) {
  const std::string path = dir_.file("globals.kcap");
  Program p;
  for (uint32_t i = 0; i < kElements; ++i) p.x[i] = static_cast<float>(i % 8);
  std::vector<float> coeffs(16, 0.0f);
  coeffs[0] = 1.0f;
  coeffs[1] = 2.0f;
  int32_t calls = 7;
  const auto state = [&](int32_t callCount) {
    std::vector<RangeSpec> ranges = p.state();
    ranges.push_back({kCoeffs, bytesOf(coeffs)});
    std::vector<uint8_t> count(4);
    std::memcpy(count.data(), &callCount, 4);
    ranges.push_back({kCallCount, count});
    return ranges;
  };
  // poly_eval as the double runs it, with small integers: exact in float.
  const auto poly = [&] {
    for (uint32_t i = 0; i < kElements; ++i) {
      float acc = coeffs[15];
      for (int k = 14; k >= 0; --k) acc = acc * p.x[i] + coeffs[static_cast<size_t>(k)];
      p.y[i] = acc;
    }
    calls += static_cast<int32_t>(kElements / 256);
  };
  CheckpointTrace t(path);
  t.checkpoint(0, state(calls));
  t.polyEval();
  poly();
  coeffs[2] = 1.0f;
  t.copyToDevice(kCoeffs, bytesOf(coeffs));  // cudaMemcpyToSymbol
  t.polyEval();
  poly();
  t.checkpoint(2, state(calls));
  t.polyEval();
  poly();
  t.checkpoint(3, state(calls + 1));  // call_count is not what the recording says
  t.close();

  const Outcome run = replay({path});
  EXPECT_EQ(run.exitCode, kExitDiffers) << run.describe();
  EXPECT_NE(run.out.find("interval 0 (launches 0..1, checkpoint 0 -> 1): REPRODUCED (32.1 KiB in 10 pieces compared)"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("interval 1 (launch 2, checkpoint 1 -> 2): DIFFERS"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("range 0x7e2000000100 (moduleGlobal, 4 B): 1 of 1 piece differs, first differing byte at "
                         "offset 0"),
            std::string::npos)
      << run.out;
}

// The sizes and counts of a checkpoint, checked before anything uses them.
TEST(CheckpointProblem, NamesWhatDoesNotAddUp) {
  capnp::MallocMessageBuilder message;
  auto c = message.initRoot<kcap::schema::Checkpoint>();
  const auto problem = [&] { return kcap::replay::checkpointProblem(c.asReader()); };
  auto ranges = c.initRanges(2);
  const auto set = [&](unsigned i, uint64_t address, uint64_t size, uint32_t pieceSize, unsigned pieces,
                       size_t hashBytes) {
    ranges[i].setAddress(address);
    auto content = ranges[i].initContent();
    content.setSize(size);
    content.setPieceSize(pieceSize);
    content.initPieces(pieces);
    ranges[i].initChangeHashes(static_cast<unsigned>(hashBytes));
  };
  set(0, 0x1000, 8192, 4096, 2, 32);
  set(1, 0x4000, 100, 4096, 1, 16);
  EXPECT_EQ(problem(), "");
  c.setResult(2);
  EXPECT_EQ(problem(), "incomplete: taking it failed with CUresult 2");
  c.setResult(0);
  set(1, 0x4000, 100, 4096, 1, 15);
  EXPECT_EQ(problem(), "range 0x4000: 15 bytes of change hashes for 1 pieces (expected 16)");
  set(1, 0x4000, 8193, 4096, 2, 32);
  EXPECT_EQ(problem(), "range 0x4000: 2 pieces for 8193 bytes of 4096-byte pieces (expected 3)");
  set(1, 0x4000, 100, 0, 0, 0);
  EXPECT_EQ(problem(), "range 0x4000: piece size 0 for 100 bytes");
  set(1, 0xfffffffffffff000ull, 0x2000, 4096, 2, 32);
  EXPECT_EQ(problem(), "range 0xfffffffffffff000: its 8192 bytes wrap past the end of the address space");
  set(1, 0x2000, 100, 4096, 1, 16);
  EXPECT_EQ(problem(), "range 0x2000: overlaps or precedes the range before it");
}

// A checkpoint whose change hashes do not match its pieces is damaged:
// not compared, re-execution goes on to the next.
TEST_F(CheckpointReplay, MiscountedHashesAreDamage) {
  const std::string path = dir_.file("miscounted.kcap");
  Program p;
  CheckpointTrace t(path);
  t.checkpoint(0, p.state());
  t.axpy();
  p.axpy();
  auto bad = p.state();
  bad[0].shortHashes = true;
  t.checkpoint(1, bad);
  t.axpy();
  p.axpy();
  t.checkpoint(2, p.state());
  t.close();

  const Outcome run = replay({path});
  EXPECT_EQ(run.exitCode, kExitOk) << run.describe();
  EXPECT_TRUE(std::regex_search(run.out, std::regex("checkpoint 1 at event #[0-9]+ is damaged \\(range 0x7e1000000000: "
                                                    "48 bytes of change hashes for 4 pieces \\(expected 64\\)\\)")))
      << run.out;
  EXPECT_NE(run.out.find("interval 0 (launches 0..1, checkpoint 0 -> 2): REPRODUCED"), std::string::npos) << run.out;
}

// kcap bisect on checkpoint traces: the intervals re-executed from their
// checkpoints; between two sides, the first interval whose end states
// differ, then in it the first launch whose outputs differ.

}  // namespace
}  // namespace kcap_test
