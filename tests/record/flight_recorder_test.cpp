// The flight recorder end to end (--trigger, --ring; docs/checkpoint.md):
// record_scenarios' "flight" programs run under the shim against the driver
// double in checkpoint mode with triggers set. Nothing fired: no file at
// all. Each trigger: a trace that kcap check passes, holding the trigger
// event that says why, the code loaded before the window, and only the last
// checkpoints.
#include "process_runner.h"

#include "trace_files.h"
#include "trace_reader.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <iostream>
#include <string>
#include <tuple>
#include <vector>

namespace kcap_test {
namespace {

using kcap::schema::Event;
namespace schema = kcap::schema;

constexpr const char* kAllTriggers = "error,signal,exit,api";

struct Flight {
  Outcome outcome;
  std::string path;
};

class FlightRecorder : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = std::make_unique<kcap::test::TempDir>("kcap-flight"); }

  Flight record(const std::string& how, std::map<std::string, std::string> env = {}) {
    Flight flight;
    flight.path = dir_->file("fail.kcap");
    env["KCAP_OUTPUT"] = flight.path;
    env.emplace("KCAP_MODE", "checkpoint");
    env.emplace("KCAP_CHECKPOINT_EVERY", "2launches");
    env.emplace("KCAP_TRIGGER", kAllTriggers);
    env.emplace("KCAP_RING", "2");
    flight.outcome = run({scenarioProgram(), {"flight", how}, std::move(env), true});
    return flight;
  }

  // Every file the run left in the directory.
  std::vector<std::string> leftovers() const {
    std::vector<std::string> out;
    for (const auto& entry : std::filesystem::directory_iterator(dir_->path())) {
      out.push_back(entry.path().filename().string());
    }
    return out;
  }

  std::unique_ptr<kcap::test::TempDir> dir_;
};

std::vector<kcap::test::OwnedEvent> eventsOf(const std::string& path) { return kcap::test::readAllEvents(path); }

std::vector<Event::Reader> only(const std::vector<kcap::test::OwnedEvent>& events, Event::Which which) {
  std::vector<Event::Reader> out;
  for (const auto& e : events) {
    if (e.get().which() == which) {
      out.push_back(e.get());
    }
  }
  return out;
}

void expectChecks(const std::string& path) {
  const Outcome check = run({kcapBinary(), {"check", path}, {}, false});
  EXPECT_EQ(check.exitCode, 0) << check.describe();
  EXPECT_NE(check.out.find("OK: "), std::string::npos) << check.describe();
}

// The trace of a fired trigger: checks, one trigger event of `kind`
// (returned), the module load from before any checkpoint, traceEnd last.
schema::Trigger::Reader expectFired(const Flight& flight, const std::vector<kcap::test::OwnedEvent>& events,
                                    schema::TriggerKind kind) {
  expectChecks(flight.path);
  const auto triggers = only(events, Event::TRIGGER);
  EXPECT_EQ(triggers.size(), 1u);
  EXPECT_EQ(only(events, Event::MODULE_LOAD).size(), 1u);
  EXPECT_FALSE(events.empty());
  if (!events.empty()) {
    EXPECT_EQ(events.front().get().which(), Event::TRACE_BEGIN);
    EXPECT_EQ(events.back().get().which(), Event::TRACE_END);
  }
  const std::string said = "kcap: trigger ";
  EXPECT_NE(flight.outcome.err.find(said), std::string::npos) << flight.outcome.describe();
  EXPECT_NE(flight.outcome.err.find("wrote " + flight.path), std::string::npos) << flight.outcome.describe();
  if (triggers.empty()) {
    ADD_FAILURE() << "no trigger event";
    return schema::Trigger::Reader();
  }
  EXPECT_EQ(triggers[0].getTrigger().getKind(), kind);
  return triggers[0].getTrigger();
}

TEST_F(FlightRecorder, NothingFiredWritesNoFile) {
  const Outcome plain = run({scenarioProgram(), {"flight", "none"}, {}, false});
  const Flight flight = record("none");
  EXPECT_EQ(flight.outcome.exitCode, 0) << flight.outcome.describe();
  EXPECT_EQ(flight.outcome.err, "");
  EXPECT_EQ(flight.outcome.out, plain.out);
  EXPECT_TRUE(leftovers().empty()) << leftovers().front();
}

TEST_F(FlightRecorder, AVforkChildsExitIsNotTheProcesss) {
  const Flight flight = record("vfork");
  EXPECT_EQ(flight.outcome.exitCode, 0) << flight.outcome.describe();
  EXPECT_NE(flight.outcome.out.find("result child 255"), std::string::npos) << flight.outcome.describe();
  EXPECT_EQ(flight.outcome.err, "");
  EXPECT_TRUE(leftovers().empty());
}

TEST_F(FlightRecorder, ExitZeroWritesNoFile) {
  const Flight flight = record("exit0");
  EXPECT_EQ(flight.outcome.exitCode, 0) << flight.outcome.describe();
  EXPECT_TRUE(leftovers().empty());
}

TEST_F(FlightRecorder, ApiTrigger) {
  const Flight flight = record("api");
  EXPECT_EQ(flight.outcome.exitCode, 0) << flight.outcome.describe();
  EXPECT_NE(flight.outcome.out.find("result trigger 0"), std::string::npos) << flight.outcome.describe();
  EXPECT_NE(flight.outcome.err.find("kcap: trigger api fired (loss is NaN): wrote " + flight.path), std::string::npos)
      << flight.outcome.describe();
  const auto events = eventsOf(flight.path);
  const auto trigger = expectFired(flight, events, schema::TriggerKind::API);
  EXPECT_EQ(std::string(trigger.getReason().cStr()), "loss is NaN");
  // The program went on; the launches after the trigger are not recorded.
  EXPECT_NE(flight.outcome.out.find("result flight y[5]"), std::string::npos);
  EXPECT_EQ(leftovers(), std::vector<std::string>{"fail.kcap"});

  // kcap info: the trigger, and a complete trace.
  const Outcome info = run({kcapBinary(), {"info", flight.path}, {}, false});
  EXPECT_EQ(info.exitCode, 0) << info.describe();
  EXPECT_NE(info.out.find("Triggers (1)"), std::string::npos) << info.out;
  EXPECT_NE(info.out.find("loss is NaN"), std::string::npos) << info.out;
  EXPECT_EQ(info.out.find("damaged"), std::string::npos) << info.out;
}

TEST_F(FlightRecorder, ApiWithoutTheApiTriggerFiresNothing) {
  const Flight flight = record("api", {{"KCAP_TRIGGER", "error"}});
  EXPECT_EQ(flight.outcome.exitCode, 0) << flight.outcome.describe();
  EXPECT_NE(flight.outcome.out.find("result trigger 1"), std::string::npos) << flight.outcome.describe();
  EXPECT_TRUE(leftovers().empty());
}

TEST_F(FlightRecorder, UserSignalFiresAndTheProgramGoesOn) {
  const Flight flight = record("sigusr2");
  EXPECT_EQ(flight.outcome.exitCode, 0) << flight.outcome.describe();
  EXPECT_NE(flight.outcome.out.find("result flight y[5]"), std::string::npos) << flight.outcome.describe();
  const auto events = eventsOf(flight.path);
  const auto trigger = expectFired(flight, events, schema::TriggerKind::SIGNAL);
  EXPECT_EQ(trigger.getSignal(), SIGUSR2);
  EXPECT_EQ(std::string(trigger.getReason().cStr()), "SIGUSR2");
}

TEST_F(FlightRecorder, AbortFiresAndTheProgramStillDies) {
  const Flight flight = record("abort");
  EXPECT_EQ(flight.outcome.signal, SIGABRT) << flight.outcome.describe();
  const auto events = eventsOf(flight.path);
  const auto trigger = expectFired(flight, events, schema::TriggerKind::SIGNAL);
  EXPECT_EQ(trigger.getSignal(), SIGABRT);
  EXPECT_EQ(events.back().get().getTraceEnd().getReason(), schema::EndReason::SIGNAL);
}

TEST_F(FlightRecorder, FatalSignalsFire) {
  for (const auto& [how, sig, name] :
       {std::tuple{"sigterm", SIGTERM, "SIGTERM"}, std::tuple{"segv", SIGSEGV, "SIGSEGV"}}) {
    SCOPED_TRACE(how);
#if defined(__SANITIZE_ADDRESS__)
    if (sig == SIGSEGV) {
      std::cout << "[ SKIPPED  ] segv: AddressSanitizer handles SIGSEGV itself (and exits instead of dying of it)\n";
      continue;
    }
#endif
    const Flight flight = record(how);
    EXPECT_EQ(flight.outcome.signal, sig) << flight.outcome.describe();
    const auto events = eventsOf(flight.path);
    const auto trigger = expectFired(flight, events, schema::TriggerKind::SIGNAL);
    EXPECT_EQ(trigger.getSignal(), sig);
    EXPECT_EQ(std::string(trigger.getReason().cStr()), name);
    EXPECT_EQ(events.back().get().getTraceEnd().getSignal(), sig);
    std::filesystem::remove(flight.path);
  }
}

TEST_F(FlightRecorder, NonZeroExitFires) {
  for (const char* how : {"exit3", "_exit3"}) {
    SCOPED_TRACE(how);
    const Flight flight = record(how);
    EXPECT_EQ(flight.outcome.exitCode, 3) << flight.outcome.describe();
    const auto events = eventsOf(flight.path);
    const auto trigger = expectFired(flight, events, schema::TriggerKind::EXIT);
    EXPECT_EQ(trigger.getExitStatus(), 3);
    EXPECT_EQ(std::string(trigger.getReason().cStr()), std::string(how[0] == '_' ? "_exit" : "exit") + "(3)");
    std::filesystem::remove(flight.path);
  }
}

// Checkpoints every 2 launches (launches numbered as the shim appends
// them) and by time (numbered by the writer's merger, after the append).
TEST_F(FlightRecorder, StickyErrorFires) {
  for (const char* every : {"2launches", "60m"}) {
    SCOPED_TRACE(every);
    const Flight flight = record("fault", {{"KCAP_CHECKPOINT_EVERY", every}});
    EXPECT_EQ(flight.outcome.exitCode, 0) << flight.outcome.describe();
    const auto events = eventsOf(flight.path);
    const auto trigger = expectFired(flight, events, schema::TriggerKind::ERROR);
    EXPECT_EQ(trigger.getResult(), 700);  // CUDA_ERROR_ILLEGAL_ADDRESS
    EXPECT_NE(std::string(trigger.getReason().cStr()).find("CUDA_ERROR_ILLEGAL_ADDRESS"), std::string::npos);
    EXPECT_TRUE(trigger.getHasLaunch());
    // The launch named is the last in the trace (the faulting one is it or
    // one before).
    std::vector<uint64_t> launches;
    for (const auto e : only(events, Event::LAUNCH)) launches.push_back(e.getLaunch().getLaunchIndex());
    ASSERT_FALSE(launches.empty());
    EXPECT_EQ(trigger.getLaunchIndex(), *std::max_element(launches.begin(), launches.end()));
    std::filesystem::remove(flight.path);
  }
}

TEST_F(FlightRecorder, AnOrdinaryErrorDoesNotFire) {
  const Flight flight = record("not-found", {{"KCAP_TRIGGER", "error"}});
  EXPECT_EQ(flight.outcome.exitCode, 0) << flight.outcome.describe();
  EXPECT_NE(flight.outcome.out.find("result lookup 500"), std::string::npos) << flight.outcome.describe();
  EXPECT_TRUE(leftovers().empty());
}

TEST_F(FlightRecorder, HangFiresWhenTheWorkNeverFinishes) {
  const Flight flight = record("hang", {{"KCAP_TRIGGER", "hang=1"}, {"KCAP_DOUBLE_EVENT_NOT_READY", "1"}});
  EXPECT_EQ(flight.outcome.exitCode, 0) << flight.outcome.describe();
  const auto events = eventsOf(flight.path);
  const auto trigger = expectFired(flight, events, schema::TriggerKind::HANG);
  EXPECT_TRUE(trigger.getHasLaunch());
  // The last launch recorded on the stream when the watchdog looked (each
  // checkpoint's drain waits on events that never complete here, so that
  // may be an early one): in the trace.
  EXPECT_LT(trigger.getLaunchIndex(), 8u);
  // No last checkpoint: the work does not finish.
  for (const auto e : only(events, Event::CHECKPOINT)) {
    EXPECT_NE(e.getCheckpoint().getReason(), schema::CheckpointReason::END);
  }
  EXPECT_NE(std::string(trigger.getReason().cStr()).find("has not finished after 1 s"), std::string::npos)
      << trigger.getReason().cStr();
}

TEST_F(FlightRecorder, HangDoesNotFireWhenTheWorkFinishes) {
  const Flight flight = record("hang", {{"KCAP_TRIGGER", "hang=1"}});
  EXPECT_EQ(flight.outcome.exitCode, 0) << flight.outcome.describe();
  EXPECT_EQ(flight.outcome.err, "");
  EXPECT_TRUE(leftovers().empty());
}

TEST_F(FlightRecorder, KeepsOnlyTheLastCheckpoints) {
  const Flight flight = record("api", {{"KCAP_RING", "2"}});
  const auto events = eventsOf(flight.path);
  std::vector<Event::Reader>
      checkpoints;  // those of the ring; the last one, taken as the trigger ends the recording, apart
  std::vector<Event::Reader> last;
  for (const auto e : only(events, Event::CHECKPOINT)) {
    (e.getCheckpoint().getReason() == schema::CheckpointReason::END ? last : checkpoints).push_back(e);
  }
  const auto trigger = expectFired(flight, events, schema::TriggerKind::API);
  // Eight launches, a checkpoint at the first and every two: four or more
  // were taken, the ring kept two.
  ASSERT_EQ(checkpoints.size(), 2u);
  ASSERT_EQ(last.size(), 1u);
  EXPECT_GT(last[0].getSeq(), only(events, Event::TRIGGER)[0].getSeq());
  const uint64_t oldest = checkpoints[0].getCheckpoint().getOrdinal();
  EXPECT_GE(oldest, 2u);
  EXPECT_EQ(checkpoints[1].getCheckpoint().getOrdinal(), oldest + 1);
  EXPECT_GT(trigger.getDroppedEvents(), 0u);
  // The code and the allocations from before the window are kept.
  EXPECT_LT(only(events, Event::MODULE_LOAD)[0].getSeq(), checkpoints[0].getSeq());
  EXPECT_GE(only(events, Event::ALLOC).size(), 2u);
  // Replay re-executes the kept intervals from the oldest kept checkpoint.
  const Outcome replay = kcapOnDouble({"replay", flight.path});
  EXPECT_EQ(replay.exitCode, 0) << replay.describe();
  EXPECT_NE(replay.out.find("Verdict: all 2 intervals reproduced as recorded."), std::string::npos)
      << replay.describe();
}

// An allocation made after the first checkpoint logs its first content
// (bytes the double hands over dirty), which no checkpoint holds once the
// program sets the memory. Inside the window the ring keeps those bytes for
// re-execution; before it they are not needed (the window's first
// checkpoint holds the memory) and the written trace drops them from the
// allocation: every piece it names is in the file either way.
// late-pool: the same from a stream-ordered allocation, whose first content
// comes in a later WrittenData: inside the window both are kept, before it
// the allocation no longer waits for one.
TEST_F(FlightRecorder, AnAllocationsFirstContentGoesWithItsWindow) {
  for (const std::string how : {"late-alloc", "late-pool"}) {
    for (const std::string ring : {"2", "8"}) {
      SCOPED_TRACE(how + ", ring " + ring);
      dir_ = std::make_unique<kcap::test::TempDir>("kcap-flight");  // a path of its own for each recording
      const Flight flight = record(how, {{"KCAP_RING", ring}, {"KCAP_DOUBLE_DIRTY_ALLOCATIONS", "1"}});
      const auto events = eventsOf(flight.path);
      expectFired(flight, events, schema::TriggerKind::API);
      const bool inWindow = ring == "8";
      int late = 0;
      for (const auto e : only(events, Event::ALLOC)) {
        if (e.getAlloc().getSize() != 64u << 10) continue;
        ++late;
        const auto alloc = e.getAlloc();
        if (how == "late-alloc") {
          EXPECT_EQ(alloc.getInitial().size(), inWindow ? 1u : 0u)
              << (inWindow ? "made inside the window" : "made before the window");
        } else {
          EXPECT_EQ(alloc.getInitial().size(), 0u);
          EXPECT_EQ(alloc.getInitialDeferred(), inWindow);
          size_t completing = 0;
          for (const auto w : only(events, Event::WRITTEN_DATA)) {
            completing += w.getWrittenData().getOf() == e.getSeq() && w.getWrittenData().getData().getSize() != 0;
          }
          EXPECT_EQ(completing, inWindow ? 1u : 0u);
        }
      }
      EXPECT_EQ(late, 1);
      const Outcome check = kcapOnDouble({"check", flight.path});
      EXPECT_EQ(check.exitCode, 0) << check.describe();
      const Outcome replay = kcapOnDouble({"replay", flight.path});
      EXPECT_EQ(replay.exitCode, 0) << replay.describe();
      EXPECT_NE(replay.out.find("intervals reproduced as recorded"), std::string::npos) << replay.describe();
    }
  }
}

// A graph captured before the window and launched in it, copying the same
// host bytes at every launch: the ring keeps the graph's definition (as it
// keeps the code), and every launch's host bytes stay in the file, so that
// the window's graph launches re-execute.
TEST_F(FlightRecorder, GraphsDefinedBeforeTheWindowAreKept) {
  const Flight flight = record("graph-host", {{"KCAP_RING", "2"}});
  const auto events = eventsOf(flight.path);
  expectFired(flight, events, schema::TriggerKind::API);
  const auto defines = only(events, Event::GRAPH_DEFINE);
  ASSERT_EQ(defines.size(), 1u);
  std::vector<Event::Reader> window;
  for (const auto e : only(events, Event::CHECKPOINT)) window.push_back(e);
  ASSERT_FALSE(window.empty());
  EXPECT_LT(defines[0].getSeq(), window[0].getSeq()) << "defined before the window";
  size_t launches = 0;
  for (const auto e : only(events, Event::GRAPH_LAUNCH)) {
    launches += e.getSeq() > window[0].getSeq();
    EXPECT_EQ(e.getGraphLaunch().getHostCopies().size(), 1u);
  }
  EXPECT_GE(launches, 2u);
  const Outcome replay = kcapOnDouble({"replay", flight.path});
  EXPECT_EQ(replay.exitCode, 0) << replay.describe();
  EXPECT_NE(replay.out.find("intervals reproduced as recorded"), std::string::npos) << replay.describe();
  EXPECT_EQ(replay.out.find("NOT RE-EXECUTABLE"), std::string::npos) << replay.describe();
}

// Checkpoints of the window (not the last one, taken as the trigger ends
// the recording).
size_t ringCheckpoints(const std::vector<kcap::test::OwnedEvent>& events) {
  size_t count = 0;
  for (const auto e : only(events, Event::CHECKPOINT)) {
    count += e.getCheckpoint().getReason() != schema::CheckpointReason::END;
  }
  return count;
}

TEST_F(FlightRecorder, TheRingSpillsPastTheBufferToAFileNothingLeavesBehind) {
  // Each interval overwrites 40 MiB with new bytes: three kept checkpoints
  // hold about 120 MiB, past a 64 MiB buffer.
  const std::map<std::string, std::string> env = {{"KCAP_RING", "3"}, {"KCAP_BUFFER", "64M"}};
  auto withDisk = env;
  withDisk["KCAP_RING_DISK"] = "256M";
  const Flight flight = record("spill", withDisk);
  EXPECT_EQ(flight.outcome.exitCode, 0) << flight.outcome.describe();
  const auto events = eventsOf(flight.path);
  expectFired(flight, events, schema::TriggerKind::API);
  EXPECT_EQ(ringCheckpoints(events), 3u);
  EXPECT_EQ(flight.outcome.err.find("ring file failed"), std::string::npos) << flight.outcome.describe();
  EXPECT_EQ(flight.outcome.err.find("over the bound"), std::string::npos) << flight.outcome.describe();
  EXPECT_EQ(leftovers(), std::vector<std::string>{"fail.kcap"});
  std::filesystem::remove(flight.path);

  // Without the ring file the buffer alone keeps fewer.
  auto noDisk = env;
  noDisk["KCAP_RING_DISK"] = "0";
  const Flight dropped = record("spill", noDisk);
  EXPECT_EQ(dropped.outcome.exitCode, 0) << dropped.outcome.describe();
  const auto fewer = eventsOf(dropped.path);
  expectFired(dropped, fewer, schema::TriggerKind::API);
  EXPECT_LT(ringCheckpoints(fewer), 3u);
}

TEST_F(FlightRecorder, KcapRecordSaysWhenNoTriggerFired) {
  const std::string path = dir_->file("t.kcap");
  const Outcome rec = run({kcapBinary(),
                           {"record", "--mode", "checkpoint", "--trigger", "api,exit", "--ring", "3", "-o", path, "--",
                            scenarioProgram(), "flight", "none"},
                           {},
                           false});
  EXPECT_EQ(rec.exitCode, 0) << rec.describe();
  EXPECT_NE(rec.err.find("kcap: no trigger fired (exit,api); nothing written to " + path), std::string::npos)
      << rec.describe();
  EXPECT_TRUE(leftovers().empty());
}

// The documented Python helper, and sys.exit, from a Python program that
// calls the driver (the double) through ctypes.
TEST_F(FlightRecorder, FromPython) {
  if (std::system("python3 -c pass 2>/dev/null") != 0) {
    GTEST_SKIP() << "no python3";
  }
  const std::string script = dir_->file("job.py");
  std::ofstream(script) << "import ctypes, sys\n"
                           "cuda = ctypes.CDLL('libcuda.so.1')\n"
                           "assert cuda.cuInit(0) == 0\n"
                           "device = ctypes.c_int()\n"
                           "assert cuda.cuDeviceGet(ctypes.byref(device), 0) == 0\n"
                           "context = ctypes.c_void_p()\n"
                           "assert cuda.cuDevicePrimaryCtxRetain(ctypes.byref(context), device) == 0\n"
                           "assert cuda.cuCtxSetCurrent(context) == 0\n"
                           "memory = ctypes.c_uint64()\n"
                           "assert cuda.cuMemAlloc_v2(ctypes.byref(memory), 4096) == 0\n"
                           "if sys.argv[1] == 'api':\n"
                           "    print('trigger', ctypes.CDLL(None).kcap_trigger(b'loss is NaN'))\n"
                           "sys.exit(int(sys.argv[2]))\n";
  for (const auto& [how, status, kind] :
       {std::tuple{"api", 0, schema::TriggerKind::API}, std::tuple{"exit", 3, schema::TriggerKind::EXIT}}) {
    SCOPED_TRACE(how);
    const std::string path = dir_->file(std::string(how) + ".kcap");
    const Outcome rec = run({kcapBinary(),
                             {"record", "--mode", "checkpoint", "--trigger", "api,exit", "-o", path, "--", "python3",
                              script, how, std::to_string(status)},
                             // Under AddressSanitizer: python's and the shell's own leaks are not the shim's.
                             {{"ASAN_OPTIONS", "detect_leaks=0"}},
                             false});
    EXPECT_EQ(rec.exitCode, status) << rec.describe();
    const auto events = eventsOf(path);
    const auto triggers = only(events, Event::TRIGGER);
    ASSERT_EQ(triggers.size(), 1u) << rec.describe();
    EXPECT_EQ(triggers[0].getTrigger().getKind(), kind);
    expectChecks(path);
  }
  const Outcome clean = run({kcapBinary(),
                             {"record", "--mode", "checkpoint", "--trigger", "api,exit", "-o", dir_->file("clean.kcap"),
                              "--", "python3", script, "none", "0"},
                             {{"ASAN_OPTIONS", "detect_leaks=0"}},
                             false});
  EXPECT_EQ(clean.exitCode, 0) << clean.describe();
  EXPECT_FALSE(std::filesystem::exists(dir_->file("clean.kcap")));
}

TEST_F(FlightRecorder, TriggersNeedCheckpointMode) {
  const Outcome rec = run({kcapBinary(),
                           {"record", "--mode", "metadata", "--trigger", "api", "-o", dir_->file("t.kcap"), "--",
                            scenarioProgram(), "flight", "none"},
                           {},
                           false});
  EXPECT_NE(rec.exitCode, 0) << rec.describe();
  EXPECT_NE(rec.err.find("--trigger"), std::string::npos) << rec.describe();
  EXPECT_NE(rec.err.find("triggers need KCAP_MODE=checkpoint"), std::string::npos) << rec.describe();
  const Outcome bad = run({kcapBinary(),
                           {"record", "--mode", "checkpoint", "--trigger", "api,oom", "-o", dir_->file("t.kcap"), "--",
                            scenarioProgram(), "flight", "none"},
                           {},
                           false});
  EXPECT_NE(bad.exitCode, 0) << bad.describe();
  EXPECT_NE(bad.err.find("'oom' is not a trigger"), std::string::npos) << bad.describe();
}

}  // namespace
}  // namespace kcap_test
