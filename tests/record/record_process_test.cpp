// How a recording meets the process's life: fork, every way a process ends
// (the trace ends as the process did), writing behind the program, large
// ranges, device hashing's fallback and the shim's own failures.
#include "record_trace.h"

#include <cuda.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <sstream>
#include <optional>
#include <string>
#include <vector>

namespace kcap_test {
namespace {

using namespace kcap_test::record;  // the recording tests' shared helpers (record_trace.h)

// ---- fork --------------------------------------------------------------------------------

void checkForkTraces(const std::string& pattern, const std::function<std::string(uint32_t)>& parentPath,
                     const std::function<std::string(uint32_t)>& childPath) {
  kcap::test::TempDir dir("kcap-record");
  (void)pattern;
  const Outcome shimmed = recorded(scenarioProgram(), {"fork"}, {{"KCAP_OUTPUT", dir.file(pattern)}});
  expectClean(shimmed);
  const size_t at = shimmed.out.find("child ");
  ASSERT_NE(at, std::string::npos) << shimmed.describe();
  const uint32_t child = static_cast<uint32_t>(std::stoul(shimmed.out.substr(at + 6)));

  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    files.push_back(entry.path().filename().string());
  }
  ASSERT_EQ(files.size(), 2u);
  const std::string childFile = dir.file(childPath(child));
  ASSERT_EQ(access(childFile.c_str(), F_OK), 0) << childFile;
  std::string parentFile;
  for (const std::string& name : files) {
    if (dir.file(name) != childFile) {
      parentFile = dir.file(name);
    }
  }
  Trace parent(parentFile);
  const uint32_t parentPid = parent.all().front().getTraceBegin().getProcessId();
  EXPECT_EQ(parentFile, dir.file(parentPath(parentPid)));
  EXPECT_EQ(parent.launches().size(), 2u);  // before and after the fork; not the child's
  EXPECT_EQ(parent.all().back().getTraceEnd().getReason(), schema::EndReason::EXIT);
  expectChecks(parentFile);

  Trace mine(childFile);
  EXPECT_EQ(mine.all().front().getTraceBegin().getProcessId(), child);
  ASSERT_EQ(mine.launches().size(), 2u);
  // The child's own allocation, uploaded after the fork, is snapshotted.
  const auto allocs = mine.of(Event::ALLOC);
  ASSERT_EQ(allocs.size(), 1u);
  EXPECT_EQ(floatsAt(mine, mine.launches()[0].getPre(), allocs[0].getAlloc().getAddress()), ramp(10.0f, 1024));
  EXPECT_EQ(mine.all().back().getTraceEnd().getReason(), schema::EndReason::EXIT);
  expectChecks(childFile);
}

TEST(Record, ForkedChildWritesItsOwnTrace) {
  KCAP_SKIP_FORK_UNDER_ASAN();
  checkForkTraces(
      "t.%p.kcap", [](uint32_t pid) { return "t." + std::to_string(pid) + ".kcap"; },
      [](uint32_t pid) { return "t." + std::to_string(pid) + ".kcap"; });
}

TEST(Record, ForkedChildNeverOverwritesTheParentsTrace) {
  KCAP_SKIP_FORK_UNDER_ASAN();
  checkForkTraces(
      "t.kcap", [](uint32_t) { return std::string("t.kcap"); },
      [](uint32_t pid) { return "t." + std::to_string(pid) + ".kcap"; });
}

// ---- exit paths --------------------------------------------------------------------------------

// Everything flushed before the kill is readable; the trace is just not closed.
void expectReadableButNotClosed(const std::string& path) {
  const Outcome check = kcapCheck(path);
  EXPECT_EQ(check.exitCode, 1) << check.describe();
  EXPECT_NE(check.out.find("not closed"), std::string::npos) << check.describe();
  EXPECT_EQ(check.out.find("checksum"), std::string::npos) << check.describe();
  EXPECT_EQ(check.out.find("missing"), std::string::npos) << check.describe();
}

// Every way record_scenarios can end, recorded: how the program ended (its
// exit code or the signal that ended it, passed on by the shim), whether the
// trace was closed (kcap check passes) or is readable up to what was flushed,
// how many launches and launch ends it holds, and how its TRACE_END says the
// process ended (or that there is none, after SIGKILL). A case is built by
// naming what it expects; `more`: what only that case shows.
struct EndCase {
  EndCase(const char* caseName, const char* scenarioName) : name(caseName), scenario(scenarioName) {}
  EndCase& with(const std::string& variable, const std::string& value) {
    env[variable] = value;
    return *this;
  }
  EndCase& exits(int code) {
    exitCode = code;
    return *this;
  }
  EndCase& killedBy(int signalNumber) {
    signal = signalNumber;
    return *this;
  }
  // Clean (exit 0, stderr empty) and the same output as without the shim.
  EndCase& likePlainRun() {
    likePlain = true;
    return *this;
  }
  EndCase& quietly() {
    quiet = true;
    return *this;
  }
  EndCase& notClosed() {
    closed = false;
    return *this;
  }
  EndCase& launches(size_t count) { return launchesBetween(count, count); }
  EndCase& launchesBetween(size_t least, size_t most) {
    minLaunches = least;
    maxLaunches = most;
    return *this;
  }
  EndCase& endedLaunches(size_t count) {
    launchEnds = count;
    return *this;
  }
  EndCase& traceEnd(schema::EndReason reason) {
    endReason = reason;
    return *this;
  }
  EndCase& noTraceEnd() {
    noEnd = true;
    return *this;
  }
  EndCase& andThen(std::function<void(const Trace&)> check) {
    more = std::move(check);
    return *this;
  }

  const char* name;                        // the test's name
  const char* scenario;                    // record_scenarios' argument
  std::map<std::string, std::string> env;  // beside KCAP_OUTPUT
  int exitCode = 0;
  int signal = 0;  // 0: it exits
  bool likePlain = false;
  bool quiet = false;  // stderr empty
  bool closed = true;  // else readable but not closed
  size_t minLaunches = 0, maxLaunches = SIZE_MAX;
  std::optional<size_t> launchEnds;
  std::optional<schema::EndReason> endReason;
  bool noEnd = false;
  std::function<void(const Trace&)> more;
};

void PrintTo(const EndCase& endCase, std::ostream* out) { *out << endCase.name; }

// A fatal signal, unhandled: the trace is closed and says so, the program
// still dies of the signal.
EndCase fatalSignal(const char* scenario, int signal) {
  return EndCase(scenario, scenario).killedBy(signal).launches(3).endedLaunches(3).traceEnd(schema::EndReason::SIGNAL);
}

// Metadata and checkpoint modes hand a launch's event to the writer before
// the call and store its outcome after it: launch calls in progress when
// the process dies are in the trace, with their outcomes where the calls
// returned in time (one thread's call takes 300 ms), without where they
// never did (the call that aborted, one that hangs). With a signal trigger
// the flight recorder's ring holds them the same way when the signal fires.
EndCase dieInLaunch(const char* name, const char* mode, const char* trigger = nullptr) {
  EndCase endCase(name, "die-in-launch");
  if (trigger != nullptr) {
    endCase.with("KCAP_TRIGGER", trigger);
  }
  return endCase.with("KCAP_MODE", mode)
      .killedBy(SIGABRT)
      .launches(4)
      .endedLaunches(0)
      .traceEnd(schema::EndReason::SIGNAL)
      .andThen([triggered = trigger != nullptr](const Trace& trace) {
        const auto triggers = trace.of(Event::TRIGGER);
        if (triggered) {  // written because the trigger fired, naming the signal
          ASSERT_EQ(triggers.size(), 1u);
          EXPECT_EQ(triggers[0].getTrigger().getKind(), schema::TriggerKind::SIGNAL);
        } else {
          EXPECT_TRUE(triggers.empty());
        }
        const auto launches = trace.launches();
        ASSERT_EQ(launches.size(), 4u);
        EXPECT_EQ(at<uint64_t>(launches[3].getParams(), 8), kPoisonAbort);  // the last one made
        std::map<uint64_t, int> seen;
        for (const auto launch : launches) {
          const uint64_t x = at<uint64_t>(launch.getParams(), 8);
          ++seen[x];
          if (x == kPoisonSlow) {
            EXPECT_TRUE(launch.getEnded());
            EXPECT_EQ(launch.getResult(), 0);
            EXPECT_GE(launch.getCallNs(), 300'000'000u);
          } else if (x == kPoisonHang || x == kPoisonAbort) {
            EXPECT_FALSE(launch.getEnded()) << std::hex << x;
          } else {
            EXPECT_TRUE(launch.getEnded());
            EXPECT_EQ(launch.getResult(), 0);
          }
        }
        EXPECT_EQ(seen[kPoisonSlow], 1);
        EXPECT_EQ(seen[kPoisonHang], 1);
      });
}

const EndCase kEndCases[] = {
    dieInLaunch("die_in_launch_metadata", "metadata"),
    dieInLaunch("die_in_launch_checkpoint", "checkpoint"),
    dieInLaunch("die_in_launch_flight_recorder", "checkpoint", "signal"),
    fatalSignal("abort", SIGABRT),
    fatalSignal("segv", SIGSEGV),
    fatalSignal("sigterm", SIGTERM),
    fatalSignal("sighup", SIGHUP),
    fatalSignal("sigquit", SIGQUIT),
    fatalSignal("sigpipe", SIGPIPE),
    fatalSignal("sigill", SIGILL),
    fatalSignal("sigalrm", SIGALRM),
    fatalSignal("sigusr1", SIGUSR1),
    // exit() from another thread than main.
    EndCase("exit_thread", "exit-thread")
        .exits(7)
        .quietly()
        .launchesBetween(20, SIZE_MAX)
        .traceEnd(schema::EndReason::EXIT),
    // A handled signal is passed on and recording goes on.
    EndCase("sigterm_handled", "sigterm-handled").likePlainRun().launches(4).traceEnd(schema::EndReason::EXIT),
    EndCase("sighup_handled", "sighup-handled").likePlainRun().launches(4).traceEnd(schema::EndReason::EXIT),
    // SIGKILL leaves every flushed launch readable: each flushed before it ran.
    EndCase("sigkill", "sigkill")
        .killedBy(SIGKILL)
        .notClosed()
        .launches(3)
        .noTraceEnd()
        .andThen([](const Trace& trace) {
          for (const auto launch : trace.launches()) {
            EXPECT_EQ(launch.getPre().size(), 2u);
          }
        }),
    // A launch that kills the process is on disk; it never returned.
    EndCase("fault_kill", "fault-kill")
        .killedBy(SIGKILL)
        .notClosed()
        .launches(2)
        .endedLaunches(1)
        .noTraceEnd()
        .andThen([](const Trace& trace) {
          const auto launches = trace.launches();
          ASSERT_EQ(launches.size(), 2u);
          EXPECT_EQ(at<uint64_t>(launches[1].getParams(), 8), kPoisonKill);
        }),
    // --flush batch: what was written before the kill is readable.
    EndCase("fault_kill_flush_batch", "fault-kill")
        .with("KCAP_FLUSH", "batch")
        .killedBy(SIGKILL)
        .notClosed()
        .launchesBetween(0, 2)
        .noTraceEnd(),
    // A faulting launch is recorded with its error.
    EndCase("fault", "fault")
        .exits(3)
        .quietly()
        .endedLaunches(2)
        .traceEnd(schema::EndReason::EXIT)
        .andThen([](const Trace& trace) {
          const auto ends = trace.launchEnds();
          ASSERT_EQ(ends.size(), 2u);
          EXPECT_EQ(ends[1].getResult(), 0);  // the launch itself was accepted
          EXPECT_EQ(ends[1].getSyncResult(), static_cast<int>(CUDA_ERROR_ILLEGAL_ADDRESS));
          EXPECT_EQ(ends[1].getPost().size(), 0u);
          bool sawSync = false;
          for (const auto& e : trace.of(Event::API_ERROR)) {
            const auto error = e.getApiError();
            if (std::string(error.getFunction().cStr()) == "cuCtxSynchronize") {
              sawSync = true;
              EXPECT_EQ(std::string(error.getResultName().cStr()), "CUDA_ERROR_ILLEGAL_ADDRESS");
            }
          }
          EXPECT_TRUE(sawSync);
        }),
};

class ProcessEnd : public ::testing::TestWithParam<EndCase> {};

TEST_P(ProcessEnd, TheTraceEndsAsTheProcessDid) {
  const EndCase& expected = GetParam();
#if defined(__SANITIZE_ADDRESS__)
  if (expected.signal == SIGSEGV) {
    GTEST_SKIP() << "AddressSanitizer handles SIGSEGV itself (and exits instead of dying of it)";
  }
#endif
  kcap::test::TempDir dir("kcap-record");
  const std::string path = dir.file(std::string(expected.name) + ".kcap");
  std::map<std::string, std::string> env = expected.env;
  env["KCAP_OUTPUT"] = path;
  if (expected.likePlain) {
    expectRecordedLikePlain(scenarioProgram(), {expected.scenario}, path, env);
  } else {
    const Outcome shimmed = recorded(scenarioProgram(), {expected.scenario}, env);
    if (expected.signal != 0) {
      EXPECT_EQ(shimmed.signal, expected.signal) << shimmed.describe();  // the signal still ends the program
    } else {
      EXPECT_EQ(shimmed.exitCode, expected.exitCode) << shimmed.describe();
    }
    if (expected.quiet) {
      EXPECT_EQ(shimmed.err, "");
    }
    if (expected.closed) {
      expectChecks(path);
    } else {
      expectReadableButNotClosed(path);
    }
  }
  Trace trace(path);
  EXPECT_EQ(trace.reader().closed(), expected.closed);
  if (expected.minLaunches == expected.maxLaunches) {
    EXPECT_EQ(trace.launches().size(), expected.minLaunches);
  } else {
    EXPECT_GE(trace.launches().size(), expected.minLaunches);
    EXPECT_LE(trace.launches().size(), expected.maxLaunches);
  }
  if (expected.launchEnds) {
    EXPECT_EQ(trace.launchEnds().size(), *expected.launchEnds);
  }
  if (expected.endReason) {
    const auto end = trace.all().back();
    ASSERT_EQ(end.which(), Event::TRACE_END);
    EXPECT_EQ(end.getTraceEnd().getReason(), *expected.endReason);
    if (*expected.endReason == schema::EndReason::SIGNAL) {
      EXPECT_EQ(end.getTraceEnd().getSignal(), expected.signal);
    }
  }
  if (expected.noEnd) {
    EXPECT_TRUE(trace.of(Event::TRACE_END).empty());
  }
  if (expected.more) {
    expected.more(trace);
  }
}

INSTANTIATE_TEST_SUITE_P(Record, ProcessEnd, ::testing::ValuesIn(kEndCases),
                         [](const auto& test) { return std::string(test.param.name); });

// --flush batch: the launch does not wait for the file. Every exit path but
// SIGKILL still writes everything (the same trace as --flush launch); SIGKILL
// leaves what was written readable (ProcessEnd's batch row).
TEST(Record, FlushBatchWritesTheSameTraceBehindTheProgram) {
  kcap::test::TempDir dir("kcap-record");
  const std::string eager = dir.file("launch.kcap"), behind = dir.file("batch.kcap");
  expectClean(recorded(interposeProgram("direct_launch"), {}, {{"KCAP_OUTPUT", eager}}));
  expectClean(recorded(interposeProgram("direct_launch"), {}, {{"KCAP_OUTPUT", behind}, {"KCAP_FLUSH", "batch"}}));
  expectChecks(behind);
  Trace a(eager), b(behind);
  std::map<std::string, std::string> options;
  for (const auto option : b.all().front().getTraceBegin().getOptions()) {
    options[option.getKey().cStr()] = option.getValue().cStr();
  }
  EXPECT_EQ(options["flush"], "batch");
  ASSERT_EQ(a.launches().size(), b.launches().size());
  for (size_t i = 0; i < a.launches().size(); ++i) {
    const auto x = a.launches()[i], y = b.launches()[i];
    EXPECT_EQ(x.getParams().size(), y.getParams().size()) << i;  // (addresses differ from run to run)
    ASSERT_EQ(x.getPre().size(), y.getPre().size()) << i;
    for (unsigned r = 0; r < x.getPre().size(); ++r) {
      EXPECT_EQ(a.bytes(x.getPre()[r].getContent()), b.bytes(y.getPre()[r].getContent()))
          << "launch " << i << " range " << r;
    }
  }
}

// A range larger than two staging buffers goes out a buffer at a time
// (copied from the device while the one before is stored), with the smallest
// and a large --buffer: the trace holds the bytes exactly, pieces repeated
// within and across launches stored once. Hashed on the device first (the
// default), only the pieces the trace lacks are copied, once each; with
// --hash host every byte is. KCAP_STATS_FILE's snapshot profile accounts
// for it.
// The large buffer of record_scenarios' `large` as the first launch
// reads it, and as the second does (piece 1 changed between them).
struct LargeScenario {
  static constexpr size_t kPiece = 1u << 20, kBytes = 80 * kPiece + 4096;
  std::vector<uint8_t> first, second;
  LargeScenario() : first(kBytes) {
    for (size_t i = 0; i < kBytes / 4; ++i) {
      const size_t piece = i / (kPiece / 4);
      const uint32_t value = piece == 80 ? 0xabcdef01u  // record_scenarios_memory.cpp large(), largeWord()
                                         : static_cast<uint32_t>((piece == 70 ? 3 : piece) * 2654435761u);
      std::memcpy(first.data() + 4 * i, &value, 4);
    }
    second = first;
    for (size_t i = 0; i < 1024; ++i) {
      const uint32_t value = 0x5a5a5a5au;
      std::memcpy(second.data() + kPiece + 4 * i, &value, 4);
    }
  }

  // The trace of the scenario holds exactly these bytes: before and after
  // the first launch, before the second.
  void expectIn(const std::string& path) const {
    Trace trace(path);
    const auto launches = trace.launches();
    ASSERT_EQ(launches.size(), 2u) << path;
    const uint64_t big = launches[0].getPointers()[0].getValue();  // x: the large buffer
    const auto ends = trace.launchEnds();
    ASSERT_EQ(ends.size(), 2u) << path;
    const auto before = rangeAt(launches[0].getPre(), big), after = rangeAt(ends[0].getPost(), big),
               then = rangeAt(launches[1].getPre(), big);
    ASSERT_TRUE(before.has_value() && after.has_value() && then.has_value()) << path;
    EXPECT_TRUE(trace.bytes(before->getContent()) == first) << path;
    EXPECT_TRUE(trace.bytes(after->getContent()) == first) << path;
    EXPECT_TRUE(trace.bytes(then->getContent()) == second) << path;
  }
};

// `program ARGS` recorded with `env`, collecting what the shim counted
// (Outcome::shimStats, its KCAP_STATS_FILE).
Outcome recordedWithStats(const std::string& program, const std::vector<std::string>& args,
                          std::map<std::string, std::string> env) {
  RunSpec spec{program, args, std::move(env), true};
  spec.shimStats = true;
  return run(spec);
}

// KCAP_STATS_FILE's lines as kind -> key -> value.
std::map<std::string, std::map<std::string, uint64_t>> readStats(const std::string& text) {
  std::map<std::string, std::map<std::string, uint64_t>> stats;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string kind, key;
    uint64_t value = 0;
    words >> kind;
    while (words >> key >> value) {
      stats[kind][key] = value;
    }
  }
  return stats;
}

struct LargeConfig {
  const char* name;  // the test's name
  const char* buffer;
  const char* hash;
  bool pageLocking;  // the driver page-locks the writer's direct memory
};

void PrintTo(const LargeConfig& config, std::ostream* out) { *out << config.name; }

class LargeRanges : public ::testing::TestWithParam<LargeConfig> {};

TEST_P(LargeRanges, AreStoredExactlyAndProfiled) {
  kcap::test::TempDir dir("kcap-record");
  constexpr size_t kPiece = LargeScenario::kPiece, kBytes = LargeScenario::kBytes;
  const LargeScenario large;
  const Outcome plain = plainRun(scenarioProgram(), {"large"});
  expectClean(plain);
  const auto& [configName, buffer, hash, pageLocking] = GetParam();
  const std::string name = std::string(buffer) + hash + (pageLocking ? "" : "-unlocked");
  const std::string path = dir.file("large-" + name + ".kcap");
  const Outcome shimmed = recordedWithStats(scenarioProgram(), {"large"},
                                            {{"KCAP_OUTPUT", path},
                                             {"KCAP_BUFFER", buffer},
                                             {"KCAP_HASH", hash},
                                             {"KCAP_DOUBLE_HOST_REGISTER", pageLocking ? "" : "refuse"}});
  expectClean(shimmed);
  auto profile = readStats(shimmed.shimStats);
  // The snapshot profile: four snapshots of the large range (before
  // and after each launch), the small ones.
  const uint64_t bytes = profile["snapshot"]["bytes"], deviceHashed = profile["snapshot"]["device_hashed"];
  EXPECT_GE(bytes, 4 * kBytes) << buffer << hash;
  EXPECT_LT(bytes, 4 * kBytes + (1u << 20)) << buffer << hash;
  EXPECT_GE(profile["snapshot"]["ranges"], 4u) << buffer << hash;
  EXPECT_GT(profile["snapshot_ns"]["store"], 0u) << buffer << hash;
  EXPECT_GT(profile["snapshot_ns"]["copy_wait"], 0u) << buffer << hash;
  EXPECT_EQ(profile["snapshot_ns"]["buffers_made"], 2u) << buffer << hash << " (one thread snapshots: two buffers)";
  if (std::string(hash) == "device") {
    // The large range on the device, every time; of it copied: 79
    // distinct pieces (70 is 3) and the tail, then piece 1 changed.
    EXPECT_EQ(deviceHashed, 4 * kBytes) << buffer;
    EXPECT_EQ(profile["snapshot"]["copied"] - (bytes - deviceHashed), 80 * kPiece + 4096) << buffer;
    EXPECT_GT(profile["snapshot_ns"]["device_hash"], 0u) << buffer;
    // Those copies land in the writer's page-locked direct blocks: all
    // of them within a large bound; with the smallest, those it has
    // room for (a segment it has not goes through a staging buffer).
    const uint64_t direct = profile["snapshot"]["direct"], locked = profile["writer"]["page_locked"];
    if (!pageLocking) {
      EXPECT_EQ(direct, 0u) << name;
      EXPECT_EQ(locked, 0u) << name;
    } else if (std::string(buffer) == "1G") {
      EXPECT_EQ(direct, 80 * kPiece + 4096) << name;
      EXPECT_EQ(locked, 128u << 20) << name << " (two slabs: 81 pieces)";
      EXPECT_GT(profile["writer"]["lock_ns"], 0u) << name;
    } else {
      EXPECT_GT(direct, 0u) << name;
      EXPECT_LE(locked, (64u + 4 * 32u) << 20) << name << " (--buffer and four staging buffers' worth)";
    }
  } else {
    EXPECT_EQ(deviceHashed, 0u);
    EXPECT_EQ(profile["snapshot"]["copied"], bytes);
    EXPECT_EQ(profile["snapshot"]["direct"], 0u);
    EXPECT_EQ(profile["writer"]["page_locked"], 0u);
    EXPECT_EQ(profile["snapshot_ns"]["device_hash"], 0u);
    EXPECT_GE(profile["snapshot"]["chunks"], 12u) << " (three staging buffers a large snapshot)";
  }
  // 79 distinct pieces, the tail, and piece 1 changed: new to the writer.
  EXPECT_GE(profile["writer"]["unique_bytes"], 80 * kPiece + 4096) << buffer;
  EXPECT_LT(profile["writer"]["unique_bytes"], 81 * kPiece + 4096) << buffer;
  EXPECT_EQ(shimmed.out, plain.out);
  expectChecks(path);
  large.expectIn(path);
  // 80 distinct pieces + the tail the first time, one new piece the
  // second (piece 70 is piece 3): what the file's blobs hold, once each.
  auto reader = kcap::format::TraceReader::open(path);
  uint64_t blobBytes = 0;
  for (const auto& chunk : reader->chunks()) {
    blobBytes += chunk.kind == kcap::format::ChunkKind::kBlob ? chunk.rawSize : 0;
  }
  EXPECT_GE(blobBytes, 80 * kPiece + 4096) << buffer;
  EXPECT_LT(blobBytes, 81 * kPiece + 4096 + (1u << 20)) << buffer << " (at most 1 MiB of other content)";
}

INSTANTIATE_TEST_SUITE_P(Record, LargeRanges,
                         ::testing::Values(LargeConfig{"buffer64M_hashDevice", "64M", "device", true},
                                           LargeConfig{"buffer1G_hashDevice", "1G", "device", true},
                                           LargeConfig{"buffer1G_hashDevice_unlocked", "1G", "device", false},
                                           LargeConfig{"buffer64M_hashHost", "64M", "host", true}),
                         [](const auto& test) { return std::string(test.param.name); });

// Where hashing on the device does not work, or the memory changes between
// the hashing and the copy, the snapshot is the host's, and the trace the
// same: a GPU that cannot run the kernel (said once, then every range is
// copied), a device hash that disagrees with the copied bytes (the range is
// taken again on the host, every time here), a kernel that runs once and
// then fails (its check of the first copy cannot be queued: that range is
// taken again, and the rest on the host).
struct HashFaultCase {
  const char* fault;  // KCAP_DOUBLE_CONTENT_HASH, and the test's name
  std::string err;    // what the shim says
  uint64_t deviceHashed;
};

void PrintTo(const HashFaultCase& fault, std::ostream* out) { *out << fault.fault; }

const HashFaultCase kHashFaultCases[] = {
    {"refuse",
     "kcap: hashing device memory on the GPU failed (loading the kernel: "
     "CUDA_ERROR_NO_BINARY_FOR_GPU); snapshots hash on the host\n",
     0},
    {"fail-later",
     "kcap: hashing device memory on the GPU failed (launching the kernel: "
     "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES); snapshots hash on the host\n",
     LargeScenario::kBytes},
    // Each large snapshot: the first segment copied (piece 0 in it) hashes
    // otherwise than before its copy: nothing of it stored, then all of the
    // range copied and hashed on the host.
    {"stale", "", 4 * LargeScenario::kBytes},
};

class DeviceHashing : public ::testing::TestWithParam<HashFaultCase> {};

TEST_P(DeviceHashing, FallsBackToTheHost) {
  const HashFaultCase& expected = GetParam();
  kcap::test::TempDir dir("kcap-record");
  const LargeScenario large;
  const Outcome plain = plainRun(scenarioProgram(), {"large"});
  expectClean(plain);
  const std::string path = dir.file(std::string(expected.fault) + ".kcap");
  const Outcome shimmed = recordedWithStats(scenarioProgram(), {"large"},
                                            {{"KCAP_OUTPUT", path}, {"KCAP_DOUBLE_CONTENT_HASH", expected.fault}});
  EXPECT_EQ(shimmed.exitCode, 0) << shimmed.describe();
  EXPECT_EQ(shimmed.out, plain.out);
  EXPECT_EQ(shimmed.err, expected.err) << shimmed.describe();
  auto profile = readStats(shimmed.shimStats);
  const uint64_t bytes = profile["snapshot"]["bytes"];
  EXPECT_EQ(profile["snapshot"]["device_hashed"], expected.deviceHashed);
  // Every byte copied: what was hashed on the device again after all.
  EXPECT_EQ(profile["snapshot"]["copied"] - (bytes - expected.deviceHashed), expected.deviceHashed);
  expectChecks(path);
  large.expectIn(path);
}

INSTANTIATE_TEST_SUITE_P(Record, DeviceHashing, ::testing::ValuesIn(kHashFaultCases), [](const auto& test) {
  std::string name = test.param.fault;
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
});

TEST(Record, AnInternalFailureStopsRecordingButNotTheProgram) {
  kcap::test::TempDir dir("kcap-record");
  const std::string path = dir.file("full.kcap");
  const Outcome plain = plainRun(scenarioProgram(), {"disk-full"});
  const Outcome shimmed = recorded(scenarioProgram(), {"disk-full"}, {{"KCAP_OUTPUT", path}});
  expectClean(plain);
  EXPECT_EQ(shimmed.exitCode, 0) << shimmed.describe();
  EXPECT_EQ(shimmed.out, plain.out);
  // One line, once.
  EXPECT_EQ(shimmed.err.rfind("kcap: internal error (", 0), 0u) << shimmed.err;
  EXPECT_NE(shimmed.err.find("write failed: file size limit exceeded (EFBIG)"), std::string::npos) << shimmed.err;
  EXPECT_NE(shimmed.err.find("recording stops, calls pass through unchanged\n"), std::string::npos);
  EXPECT_EQ(std::count(shimmed.err.begin(), shimmed.err.end(), '\n'), 1) << shimmed.err;
  // What was written before stays readable.
  auto reader = kcap::format::TraceReader::open(path);
  uint64_t events = 0;
  bool begins = false;
  reader->forEachEvent([&](const kcap::format::EventRef& ref) {
    begins = begins || (events == 0 && ref.event.which() == Event::TRACE_BEGIN);
    ++events;
    return true;
  });
  EXPECT_TRUE(begins);  // the rest was queued behind 1 MiB of memory that did not fit
  EXPECT_GE(events, 1u);
}

}  // namespace
}  // namespace kcap_test
