// `kcap record`: the program run under the shim, its options and exit code,
// descendants' traces, and --timing where CUPTI cannot work.
#include "record_trace.h"

#include <cuda.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace kcap_test {
namespace {

using namespace kcap_test::record;  // the recording tests' shared helpers (record_trace.h)

// ---- kcap record --------------------------------------------------------------------------------

TEST(KcapRecord, RunsTheProgramUnderTheShimAndSummarizes) {
  kcap::test::TempDir dir("kcap-record");
  const std::string path = dir.file("r.kcap");
  const Outcome plain = plainRun(interposeProgram("direct_launch"));
  const Outcome run = kcap({"record", "-o", path, "--", interposeProgram("direct_launch")});
  EXPECT_EQ(run.exitCode, 0) << run.describe();
  EXPECT_EQ(run.out, plain.out);
  EXPECT_NE(run.err.find("kcap: recorded 53 events, 6 launches in " + path + " ("), std::string::npos) << run.err;
  expectChecks(path);
}

TEST(KcapRecord, OptionsBecomeTheShimsSettings) {
  kcap::test::TempDir dir("kcap-record");
  const std::string path = dir.file("r.kcap");
  cpu_set_t own;
  CPU_ZERO(&own);
  ASSERT_EQ(sched_getaffinity(0, sizeof own, &own), 0);
  unsigned cpu = 0;
  while (!CPU_ISSET(cpu, &own)) ++cpu;
  const Outcome run = kcap({"record",
                            "--quiet",
                            "--mode",
                            "metadata",
                            "--include",
                            "axpy",
                            "--max-launches",
                            "2",
                            "--level",
                            "1",
                            "--piece-size",
                            "64K",
                            "--buffer",
                            "128M",
                            "--flush",
                            "batch",
                            "--writer-cpus",
                            std::to_string(cpu),
                            "-o",
                            path,
                            "--",
                            interposeProgram("direct_launch")});
  EXPECT_EQ(run.exitCode, 0) << run.describe();
  EXPECT_EQ(run.err, "");
  Trace trace(path);
  EXPECT_EQ(trace.all().front().getTraceBegin().getCaptureMode(), schema::CaptureMode::METADATA);
  EXPECT_EQ(trace.launches().size(), 2u);
  EXPECT_EQ(trace.of(Event::MODULE_LOAD)[0].getModuleLoad().getImage().getPieceSize(), 64u << 10);
  std::map<std::string, std::string> options;
  for (const auto option : trace.all().front().getTraceBegin().getOptions()) {
    options[option.getKey().cStr()] = option.getValue().cStr();
  }
  EXPECT_EQ(options["buffer"], std::to_string(128u << 20));
  EXPECT_EQ(options["flush"], "batch");
  EXPECT_EQ(options["writerCpus"], std::to_string(cpu));
}

// `kcap record ARGS` passes the program's exit on (a signal as 128 + its
// number) and refuses what it cannot use with exit code 2 before running
// anything. "{dir}/NAME": a file in the test's directory; "{scenarios}":
// record_scenarios.
struct RecordExitCase {
  const char* name;  // the test's name
  std::vector<std::string> args;
  std::map<std::string, std::string> env;
  int exitCode;
  std::string errContains;  // empty: not checked
  std::string traceChecks;  // a trace that kcap check passes ("{dir}/NAME"); empty: none
};

void PrintTo(const RecordExitCase& exitCase, std::ostream* out) { *out << exitCase.name; }

const RecordExitCase kRecordExitCases[] = {
    {"ProgramExitCode", {"-q", "-o", "{dir}/a.kcap", "--", "/bin/sh", "-c", "exit 5"}, {}, 5, "", ""},
    {"ProgramKilledBySignal",
     {"-q", "-o", "{dir}/b.kcap", "--", "{scenarios}", "sigterm"},
     {},
     128 + SIGTERM,
     "",
     "{dir}/b.kcap"},
    {"UnknownMode", {"--mode", "sometimes", "--", "/bin/true"}, {}, 2, "--mode \"sometimes\"", ""},
    {"BufferTooSmall", {"--buffer", "1M", "--", "/bin/true"}, {}, 2, "--buffer \"1M\"", ""},
    {"UnknownFlush", {"--flush", "never", "--", "/bin/true"}, {}, 2, "--flush \"never\"", ""},
    {"WriterCpusNotARange", {"--writer-cpus", "1-0", "--", "/bin/true"}, {}, 2, "--writer-cpus \"1-0\"", ""},
    {"NoProgram", {"--"}, {}, 2, "", ""},
    {"MissingShim", {"--shim", "{dir}/nothing.so", "--", "/bin/true"}, {}, 2, "", ""},
    {"MissingProgram", {"-q", "--", "{dir}/no-such-program"}, {}, 127, "", ""},
    // KCAP_TIMING other than 0 or 1.
    {"TimingVariableNotABoolean", {"--", "/bin/true"}, {{"KCAP_TIMING", "yes"}}, 2, "--timing \"yes\"", ""},
};

class KcapRecordExit : public ::testing::TestWithParam<RecordExitCase> {};

TEST_P(KcapRecordExit, ExitCodeAndUsageError) {
  const RecordExitCase& expected = GetParam();
  kcap::test::TempDir dir("kcap-record");
  const auto resolve = [&](const std::string& arg) {
    if (arg == "{scenarios}") {
      return scenarioProgram();
    }
    return arg.rfind("{dir}/", 0) == 0 ? dir.file(arg.substr(6)) : arg;
  };
  std::vector<std::string> args = {"record"};
  for (const std::string& arg : expected.args) {
    args.push_back(resolve(arg));
  }
  const Outcome run = kcap(args, expected.env);
  EXPECT_EQ(run.exitCode, expected.exitCode) << run.describe();
  if (!expected.errContains.empty()) {
    EXPECT_NE(run.err.find(expected.errContains), std::string::npos) << run.err;
  }
  if (!expected.traceChecks.empty()) {
    expectChecks(resolve(expected.traceChecks));
  }
}

INSTANTIATE_TEST_SUITE_P(KcapRecord, KcapRecordExit, ::testing::ValuesIn(kRecordExitCases),
                         [](const auto& test) { return std::string(test.param.name); });

TEST(KcapRecord, SummarizesTracesOfDescendants) {
  kcap::test::TempDir dir("kcap-record");
  // The shell is the program; the CUDA process is its child.
  const Outcome run =
      kcap({"record", "-o", dir.file("t-%p.kcap"), "--", "/bin/sh", "-c", scenarioProgram() + " capture; exit 4"});
  EXPECT_EQ(run.exitCode, 4) << run.describe();
  EXPECT_NE(run.err.find("kcap: recorded "), std::string::npos) << run.err;
  EXPECT_NE(run.err.find(" launches in " + dir.file("t-")), std::string::npos) << run.err;
  EXPECT_EQ(run.err.find("no trace"), std::string::npos) << run.err;
}

TEST(KcapRecord, OnlyTheFirstRecordingProcessGetsThePlainName) {
  KCAP_SKIP_FORK_UNDER_ASAN();
  kcap::test::TempDir dir("kcap-record");
  const std::string path = dir.file("tree.kcap");
  const Outcome run = kcap({"record", "-q", "-o", path, "--", scenarioProgram(), "fork"});
  EXPECT_EQ(run.exitCode, 0) << run.describe();
  Trace parent(path);
  EXPECT_EQ(parent.launches().size(), 2u);
  size_t files = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    ++files;
  }
  EXPECT_EQ(files, 2u);
}

// ---- --timing where CUPTI cannot work ----------------------------------------------------------
// Under the driver double no CUPTI can time anything: either it is not
// installed, or it is and cannot attach to a driver that is not NVIDIA's.
// Either way the shim says so once and records everything else.

size_t occurrences(const std::string& text, const std::string& what) {
  size_t count = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) {
    ++count;
  }
  return count;
}

std::vector<std::string> messagesWith(const Trace& trace, const std::string& what) {
  std::vector<std::string> out;
  for (const auto& e : trace.of(Event::MESSAGE)) {
    const std::string text = e.getMessage().getText().cStr();
    if (text.find(what) != std::string::npos) {
      out.push_back(text);
    }
  }
  return out;
}

bool optionRecorded(const Trace& trace, const std::string& key, const std::string& value) {
  for (const auto option : trace.all().front().getTraceBegin().getOptions()) {
    if (option.getKey().cStr() == key && option.getValue().cStr() == value) {
      return true;
    }
  }
  return false;
}

TEST(KcapRecord, TimingWithoutAWorkingCuptiSaysSoOnceAndRecordsEverything) {
  kcap::test::TempDir dir("kcap-record");
  const std::string path = dir.file("timed.kcap");
  const Outcome plain = plainRun(interposeProgram("direct_launch"));
  const Outcome run = kcap({"record", "--timing", "-o", path, "--", interposeProgram("direct_launch")});
  EXPECT_EQ(run.exitCode, 0) << run.describe();
  EXPECT_EQ(run.out, plain.out);
  EXPECT_EQ(occurrences(run.err, "kcap: --timing: "), 1u) << run.err;
  EXPECT_NE(run.err.find("; recording without durations\n"), std::string::npos) << run.err;
  // direct_launch makes 53 events; the note is one more
  EXPECT_NE(run.err.find("kcap: recorded 54 events, 6 launches in " + path), std::string::npos) << run.err;
  expectChecks(path);
  Trace trace(path);
  EXPECT_EQ(trace.launches().size(), 6u);
  EXPECT_EQ(trace.launchEnds().size(), 6u);
  EXPECT_TRUE(trace.of(Event::KERNEL_TIMING).empty());
  const auto notes = messagesWith(trace, "--timing: ");
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(run.err.find("kcap: " + notes[0] + "\n"), std::string::npos) << notes[0];  // the same words
  EXPECT_TRUE(optionRecorded(trace, "timing", "on"));
  // Without --timing: no CUPTI, no note.
  const Outcome untimed =
      kcap({"record", "-q", "-o", dir.file("untimed.kcap"), "--", interposeProgram("direct_launch")});
  EXPECT_EQ(untimed.err, "") << untimed.describe();
  EXPECT_TRUE(optionRecorded(Trace(dir.file("untimed.kcap")), "timing", "off"));
}

TEST(Record, TimingSaysWhenCuptiCannotBeLoaded) {
  kcap::test::TempDir dir("kcap-record");
  const std::string path = dir.file("t.kcap");
  const Outcome plain = plainRun(interposeProgram("direct_launch"));
  const Outcome shimmed =
      recorded(interposeProgram("direct_launch"), {},
               {{"KCAP_OUTPUT", path}, {"KCAP_TIMING", "1"}, {"KCAP_CUPTI_LIBRARY", "/nonexistent"}});
  EXPECT_EQ(shimmed.exitCode, 0) << shimmed.describe();
  EXPECT_EQ(shimmed.out, plain.out);
  EXPECT_EQ(shimmed.err.rfind("kcap: --timing: could not load CUPTI from KCAP_CUPTI_LIBRARY=/nonexistent (", 0), 0u)
      << shimmed.err;
  EXPECT_NE(shimmed.err.find("; recording without durations\n"), std::string::npos) << shimmed.err;
  EXPECT_EQ(std::count(shimmed.err.begin(), shimmed.err.end(), '\n'), 1) << shimmed.err;
  expectChecks(path);
  Trace trace(path);
  EXPECT_EQ(trace.launches().size(), 6u);
  EXPECT_TRUE(trace.of(Event::KERNEL_TIMING).empty());
  EXPECT_EQ(messagesWith(trace, "could not load CUPTI").size(), 1u);
  // A value other than 0 or 1 is a usage error for kcap record: KcapRecordExit's TimingVariableNotABoolean.
}

}  // namespace
}  // namespace kcap_test
