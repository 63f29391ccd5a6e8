// `kcap bisect` on checkpoint traces against the driver double (the traces
// of checkpoint_trace.h), and re-execution of launches in flight: a fault or
// a hang among them named by a synchronized rerun, copies and memsets kept
// in order with launches, each interval's pace.
#include "checkpoint_trace.h"

#include <gtest/gtest.h>

#include <regex>
#include <string>
#include <vector>

namespace kcap_test {
namespace {

using namespace kcap_test::checkpoint;  // the checkpoint replay tests' shared trace (checkpoint_trace.h)

Outcome bisect(const std::vector<std::string>& args) {
  std::vector<std::string> all = {"bisect"};
  all.insert(all.end(), args.begin(), args.end());
  return kcapOnDouble(all);
}

// Interval 0: poly_eval; interval 1: poly_eval, axpy (launches 1..2);
// the states as the double computes them (poly_eval as in the test above).
std::string polyThenAxpyTrace(const std::string& path) {
  Program p;
  for (uint32_t i = 0; i < kElements; ++i) p.x[i] = static_cast<float>(i % 8);
  std::vector<float> coeffs(16, 0.0f);
  coeffs[0] = 1.0f;
  coeffs[1] = 2.0f;
  int32_t calls = 0;
  const auto state = [&] {
    std::vector<RangeSpec> ranges = p.state();
    ranges.push_back({kCoeffs, bytesOf(coeffs)});
    std::vector<uint8_t> count(4);
    std::memcpy(count.data(), &calls, 4);
    ranges.push_back({kCallCount, count});
    return ranges;
  };
  const auto poly = [&] {
    for (uint32_t i = 0; i < kElements; ++i) {
      float acc = coeffs[15];
      for (int k = 14; k >= 0; --k) acc = acc * p.x[i] + coeffs[static_cast<size_t>(k)];
      p.y[i] = acc;
    }
    calls += static_cast<int32_t>(kElements / 256);
  };
  CheckpointTrace t(path);
  t.checkpoint(0, state());
  t.polyEval();
  poly();
  t.checkpoint(1, state());
  t.polyEval();
  poly();
  t.axpy();
  p.axpy();
  t.checkpoint(3, state());
  t.close();
  return path;
}

TEST_F(CheckpointReplay, BisectNamesTheFirstDivergentLaunchBetweenTwoSides) {
  const std::string path = polyThenAxpyTrace(dir_.file("bisect.kcap"));
  const std::string changed = kernelFile("axpy_changed.fatbin");
  const Outcome run = bisect({path, "--against", "override:axpy=" + changed});
  EXPECT_EQ(run.exitCode, kExitDiffers) << run.describe();
  // Not interval 1's first launch (poly_eval, the same on both sides): its first axpy.
  EXPECT_NE(run.out.find("First divergent launch: 2 (axpy), in interval 1 (launches 1..2, checkpoint 1 -> 2)"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("range 0x7e1000400000 (allocation, 16384 bytes): 1 of 4 pieces differ, the first at "
                         "bytes 0..4095"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("reproduce it: kcap replay " + path + " --launch 2 --override 'axpy=" + changed + "'"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("2 of 2 intervals compared before it was found; then each launch of interval 1"),
            std::string::npos)
      << run.out;

  const Outcome json = bisect({path, "--against", "override:axpy=" + changed, "--json"});
  EXPECT_EQ(json.exitCode, kExitDiffers) << json.describe();
  EXPECT_NE(json.out.find("\"launchIndex\":2"), std::string::npos) << json.out;
  EXPECT_NE(json.out.find("\"kernel\":\"axpy\""), std::string::npos) << json.out;
}

TEST_F(CheckpointReplay, BisectWithNoDivergenceSaysSo) {
  const std::string path = polyThenAxpyTrace(dir_.file("same.kcap"));
  const Outcome same = bisect({path, "--against", "override:axpy=" + kernelFile("axpy.fatbin")});
  EXPECT_EQ(same.exitCode, kExitOk) << same.describe();
  EXPECT_NE(same.out.find("No launch diverges: all 2 compared intervals agree between the sides."), std::string::npos)
      << same.out;
  const Outcome recorded = bisect({path});
  EXPECT_EQ(recorded.exitCode, kExitOk) << recorded.describe();
  EXPECT_NE(recorded.out.find("No launch diverges: all 2 compared intervals agree with the recording."),
            std::string::npos)
      << recorded.out;
}

TEST_F(CheckpointReplay, BisectAgainstTheRecordingNamesTheInterval) {
  const std::string path = dir_.file("wrong-hash.kcap");
  Program p;
  CheckpointTrace t(path);
  t.checkpoint(0, p.state());
  t.axpy();
  p.axpy();
  t.checkpoint(1, p.state());
  t.axpy();
  p.axpy();
  t.axpy();
  p.axpy();
  auto spoiled = p.state();
  spoiled[1].wrongHashPiece = 1;
  t.checkpoint(3, spoiled);
  t.close();

  const Outcome run = bisect({path});
  EXPECT_EQ(run.exitCode, kExitDiffers) << run.describe();
  EXPECT_NE(run.out.find("First divergent interval: interval 1 (launches 1..2, checkpoint 1 -> 2)"), std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("needs a second side"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("range 0x7e1000400000 (allocation, 16384 bytes): 1 of 4 pieces differ; the bytes equal "
                         "the recorded piece"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("reproduce it: kcap replay " + path + " --launch 1"), std::string::npos) << run.out;
}

TEST_F(CheckpointReplay, BisectThatComparesNothingSaysSo) {
  const std::string path = dir_.file("one-checkpoint.kcap");
  Program p;
  CheckpointTrace t(path);
  t.checkpoint(0, p.state());
  t.axpy();
  t.close();
  for (const std::string& against : {std::string("recorded"), "override:axpy=" + kernelFile("axpy_changed.fatbin")}) {
    const Outcome run = bisect({path, "--against", against});
    EXPECT_EQ(run.exitCode, kExitTrace) << run.describe();
    EXPECT_NE(run.out.find("Nothing compared: no interval ran up to an intact checkpoint"), std::string::npos)
        << run.out;
  }
  const Outcome perf = bisect({path, "--perf"});
  EXPECT_EQ(perf.exitCode, kExitUsage) << perf.describe();
  EXPECT_NE(perf.err.find("--perf on a checkpoint trace: not built"), std::string::npos) << perf.err;
  EXPECT_EQ(bisect({path, "--sequence"}).exitCode, kExitUsage);
}

TEST_F(CheckpointReplay, BisectNamesAFaultingLaunch) {
  const std::string path = dir_.file("bisect-fault.kcap");
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

  const Outcome recorded = bisect({path});
  EXPECT_EQ(recorded.exitCode, kExitFault) << recorded.describe();
  EXPECT_NE(recorded.out.find("First divergent launch: 2 (axpy), in interval 1 (launches 1..2, checkpoint 1 -> 2)"),
            std::string::npos)
      << recorded.out;
  EXPECT_NE(recorded.out.find("FAULT: it faults when re-executed: "), std::string::npos) << recorded.out;
  const Outcome sides = bisect({path, "--against", "override:axpy=" + kernelFile("axpy.fatbin")});
  EXPECT_EQ(sides.exitCode, kExitFault) << sides.describe();
  EXPECT_NE(sides.out.find("First divergent launch: 2 (axpy)"), std::string::npos) << sides.out;
  EXPECT_NE(sides.out.find("FAULT: it fails on both sides: "), std::string::npos) << sides.out;
}

// Launches go out without a wait between them: a fault in the middle of an
// interval shows at a later launch's submission, and the interval is run
// again with a wait after every launch to name it.
TEST_F(CheckpointReplay, FaultAmongLaunchesInFlightIsNamedByASynchronizedRerun) {
  const std::string path = dir_.file("fault-in-flight.kcap");
  Program p;
  CheckpointTrace t(path);
  t.checkpoint(0, p.state());
  t.axpy();
  p.axpy();
  t.checkpoint(1, p.state());
  t.axpy();
  t.axpy();
  t.axpy(0x1000);  // nothing is mapped there: the double's fault shows at the next call
  t.axpy();
  t.axpy();
  t.checkpoint(6, p.state());
  t.close();

  const Outcome run = replay({path});
  EXPECT_EQ(run.exitCode, kExitFault) << run.describe();
  EXPECT_NE(run.out.find("interval 0 (launch 0, checkpoint 0 -> 1): REPRODUCED"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("interval 1 failed with launches in flight: running it again with a wait after every launch"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("interval 1 (launches 1..5, checkpoint 1 -> 2): FAULT in launch 3 (axpy): "),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("(the launch found by a synchronized re-run of the interval; its first run, with launches "
                         "in flight, ended: "),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("the failing launch is one of launches 1..4"), std::string::npos) << run.out;

  const Outcome json = replay({path, "--json"});
  EXPECT_EQ(json.exitCode, kExitFault) << json.describe();
  EXPECT_NE(json.out.find("\"faultFoundByRerun\":true"), std::string::npos) << json.out;
  EXPECT_NE(json.out.find("\"faultLaunch\":3"), std::string::npos) << json.out;

  // In this process there is no second context to run it again in: the
  // launches it can be are said.
  const Outcome here = replay({path, "--no-isolate"});
  EXPECT_EQ(here.exitCode, kExitFault) << here.describe();
  EXPECT_NE(here.out.find("interval 1 (launches 1..5, checkpoint 1 -> 2): FAULT: "), std::string::npos) << here.out;
  EXPECT_NE(here.out.find("the failing launch is one of launches 1..4"), std::string::npos) << here.out;
}

// A launch that never finishes, among launches in flight: HANG, named by the
// synchronized re-run (each run waits --timeout).
TEST_F(CheckpointReplay, HangAmongLaunchesInFlightIsNamedByASynchronizedRerun) {
  const std::string path = dir_.file("hang-in-flight.kcap");
  Program p;
  CheckpointTrace t(path);
  t.checkpoint(0, p.state());
  t.axpy();
  t.axpy();
  t.axpy(0xDEAD0000DEAD4A46ull);  // the double's kPoisonHang: the launch never returns
  t.axpy();
  t.checkpoint(4, p.state());
  t.close();

  const Outcome run = replay({path, "--timeout", "1"});
  EXPECT_EQ(run.exitCode, kExitFault) << run.describe();
  EXPECT_NE(run.out.find("interval 0 (launches 0..3, checkpoint 0 -> 1): HANG in launch 2 (axpy): did not finish "
                         "within 1 s (--timeout) (the launch found by a synchronized re-run"),
            std::string::npos)
      << run.out;
}

// Copies and memsets between launches go on the stream behind them: each
// launch sees the ones before it and none after. With KCAP_DOUBLE_DEFER_COPIES
// a host-to-device copy reads its source only at the next driver call, so a
// source rewritten before the stream is waited for would show.
TEST_F(CheckpointReplay, CopiesAndMemsetsStayInOrderWithLaunches) {
  const std::string path = dir_.file("ordered.kcap");
  Program p;
  CheckpointTrace t(path);
  t.checkpoint(0, p.state());
  t.axpy();
  p.axpy();
  const float one = 1.0f;
  uint32_t bits = 0;
  std::memcpy(&bits, &one, 4);
  t.memset32(kY, bits, kElements);
  std::fill(p.y.begin(), p.y.end(), one);
  t.axpy();
  p.axpy();
  for (uint32_t i = 0; i < kElements; ++i) p.x[i] = static_cast<float>(i % 5);
  t.copyToDevice(kX, bytesOf(p.x));
  for (uint32_t i = 0; i < kElements; ++i) p.y[i] = static_cast<float>(i % 11);
  t.copyToDevice(kY, bytesOf(p.y));  // right behind the other: two sources pending at once
  t.axpy();
  p.axpy();
  t.copyDeviceToDevice(kY + 64, kX, 256);
  std::memcpy(p.y.data() + 16, p.x.data(), 256);
  t.axpy();
  p.axpy();
  t.checkpoint(4, p.state());
  t.close();

  for (const char* defer : {"0", "1"}) {
    const Outcome run = replay({path}, {{"KCAP_DOUBLE_DEFER_COPIES", defer}});
    EXPECT_EQ(run.exitCode, kExitOk) << defer << ": " << run.describe();
    EXPECT_NE(run.out.find("interval 0 (launches 0..3, checkpoint 0 -> 1): REPRODUCED"), std::string::npos)
        << defer << ": " << run.out;
  }
}

// Each interval says how many launches it re-executed in how long, beside
// the program's time for them (between the checkpoints' holds); a line at
// the end gives the pace over all of them.
TEST_F(CheckpointReplay, IntervalsSayTheirPace) {
  const std::string path = dir_.file("pace.kcap");
  Program p;
  CheckpointTrace t(path);
  t.checkpoint(0, p.state(), 0, 1'000'000, 500'000);
  t.axpy();
  p.axpy();
  t.axpy();
  p.axpy();
  t.checkpoint(2, p.state(), 0, 6'000'000, 1'000'000);  // launches from 1 ms to 5 ms
  t.axpy();
  p.axpy();
  t.checkpoint(3, p.state());  // no times: the program's is not known
  t.close();

  const Outcome run = replay({path});
  EXPECT_EQ(run.exitCode, kExitOk) << run.describe();
  EXPECT_TRUE(std::regex_search(run.out, std::regex("interval 0 \\(launches 0\\.\\.1, checkpoint 0 -> 1\\): REPRODUCED "
                                                    "\\([^)]*\\); re-executed 2 launches in [0-9.]+ (us|ms) \\(the "
                                                    "program: 4\\.0 ms\\)\n")))
      << run.out;
  EXPECT_TRUE(std::regex_search(
      run.out, std::regex("interval 1 \\(launch 2, checkpoint 1 -> 2\\): REPRODUCED \\([^)]*\\); re-executed 1 "
                          "launch in [0-9.]+ (us|ms)\n")))
      << run.out;
  EXPECT_TRUE(std::regex_search(run.out, std::regex("Re-executed 3 launches in [0-9.]+ (us|ms): [0-9,]+ launches/s; "
                                                    "the program ran those it timed at 500 launches/s "
                                                    "\\(re-execution at [0-9.]+x the program's pace\\)\\.")))
      << run.out;

  const Outcome json = replay({path, "--json"});
  EXPECT_NE(json.out.find("\"programNs\":4000000"), std::string::npos) << json.out;
  EXPECT_NE(json.out.find("\"timedLaunches\":2"), std::string::npos) << json.out;
}

}  // namespace
}  // namespace kcap_test
