// Where traces go: `kcap record -o PATH` and KCAP_OUTPUT never delete,
// truncate or share a file they were not asked to replace, check the output
// directory before the program starts, and the summary reports the traces
// this recording's processes wrote, with what ended each one.
#include "process_runner.h"

#include "trace_files.h"
#include "trace_reader.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace kcap_test {
namespace {

using kcap::schema::Event;

Outcome kcap(const std::vector<std::string>& args) { return run({kcapBinary(), args, {}, false}); }

Outcome record(std::vector<std::string> options, const std::vector<std::string>& command) {
  options.insert(options.begin(), "record");
  options.push_back("--");
  options.insert(options.end(), command.begin(), command.end());
  return kcap(options);
}

Outcome shimmed(const std::string& output, const std::vector<std::string>& command) {
  return run({command.front(), {command.begin() + 1, command.end()}, {{"KCAP_OUTPUT", output}}, true});
}

void expectContains(const std::string& text, const std::string& what) {
  EXPECT_NE(text.find(what), std::string::npos) << "no \"" << what << "\" in:\n" << text;
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) {
    ++n;
  }
  return n;
}

std::string readText(const std::string& path) {
  const std::vector<uint8_t> bytes = kcap::test::readFileBytes(path);
  return std::string(bytes.begin(), bytes.end());
}

void writeText(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

std::vector<std::string> namesIn(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

struct Facts {
  size_t launches = 0;
  uint32_t pid = 0;
  bool closed = false;
};

Facts factsOf(const std::string& path) {
  Facts facts;
  auto reader = kcap::format::TraceReader::open(path);
  reader->forEachEvent([&](const kcap::format::EventRef& ref) {
    if (ref.event.which() == Event::TRACE_BEGIN) {
      facts.pid = ref.event.getTraceBegin().getProcessId();
    }
    facts.launches += ref.event.which() == Event::LAUNCH ? 1 : 0;
    return true;
  });
  facts.closed = reader->closed();
  return facts;
}

void expectChecks(const std::string& path) {
  const Outcome check = kcap({"check", path});
  EXPECT_EQ(check.exitCode, 0) << path << "\n" << check.describe();
}

// Waits (at most a minute) until `ready` holds.
void waitFor(const std::function<bool()>& ready, const std::string& what) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(1);
  while (!ready()) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "waited a minute for " << what;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// The trace at `path` holds the two launches `pause` makes before it waits.
bool pausedIn(const std::string& path) {
  try {
    return factsOf(path).launches >= 2;
  } catch (const std::exception&) {
    return false;  // not there yet
  }
}

// ---- kcap record -o: existing paths --------------------------------------------------------

TEST(KcapRecordOutput, AnExistingFileIsNeverReplacedWithoutForce) {
  kcap::test::TempDir dir("kcap-output");
  const std::string notes = dir.file("notes.txt");
  writeText(notes, "my notes\n");
  const Outcome refused = record({"-o", notes}, {interposeProgram("direct_launch")});
  EXPECT_EQ(refused.exitCode, 2) << refused.describe();
  EXPECT_EQ(refused.out, "") << "the program must not run";
  expectContains(refused.err, "kcap record: " + notes + " exists; not replacing it");
  expectContains(refused.err, "--force");
  EXPECT_EQ(readText(notes), "my notes\n");

  const Outcome forced = record({"--force", "-o", notes}, {interposeProgram("direct_launch")});
  EXPECT_EQ(forced.exitCode, 2) << forced.describe();
  EXPECT_EQ(forced.out, "");
  expectContains(forced.err, "kcap record: " + notes + " is not a kcap trace; not replacing it, even with --force");
  EXPECT_EQ(readText(notes), "my notes\n");
  EXPECT_EQ(namesIn(dir.path()), std::vector<std::string>{"notes.txt"});

  // A file of the system, readable, not a trace.
  const Outcome proc = record({"-o", "/proc/version"}, {"/bin/true"});
  EXPECT_EQ(proc.exitCode, 2) << proc.describe();
  expectContains(proc.err, "/proc/version exists; not replacing it");
  EXPECT_EQ(proc.err.find("cannot be read"), std::string::npos) << proc.err;
  const Outcome procForced = record({"--force", "-o", "/proc/version"}, {"/bin/true"});
  EXPECT_EQ(procForced.exitCode, 2) << procForced.describe();
  expectContains(procForced.err, "/proc/version is not a kcap trace");
}

TEST(KcapRecordOutput, ForceReplacesAKcapTrace) {
  kcap::test::TempDir dir("kcap-output");
  const std::string path = dir.file("r.kcap");
  ASSERT_EQ(record({"-q", "-o", path}, {interposeProgram("direct_launch")}).exitCode, 0);
  const Facts first = factsOf(path);
  const std::vector<uint8_t> before = kcap::test::readFileBytes(path);

  const Outcome refused = record({"-o", path}, {interposeProgram("direct_launch")});
  EXPECT_EQ(refused.exitCode, 2) << refused.describe();
  expectContains(refused.err, path + " exists; not replacing it (--force replaces a kcap trace)");
  EXPECT_TRUE(kcap::test::readFileBytes(path) == before);

  const Outcome forced = record({"--force", "-o", path}, {interposeProgram("direct_launch")});
  EXPECT_EQ(forced.exitCode, 0) << forced.describe();
  expectContains(forced.err, "kcap: recorded 53 events, 6 launches in " + path + " (");
  const Facts second = factsOf(path);
  EXPECT_NE(second.pid, first.pid);
  EXPECT_TRUE(second.closed);
  expectChecks(path);
  EXPECT_EQ(namesIn(dir.path()), std::vector<std::string>{"r.kcap"});
}

TEST(KcapRecordOutput, WhatIsNotARegularFileIsRefusedEvenWithForce) {
  kcap::test::TempDir dir("kcap-output");
  const std::string fifo = dir.file("fifo"), sub = dir.file("sub"), link = dir.file("link.kcap");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  ASSERT_EQ(::mkdir(sub.c_str(), 0700), 0);
  ASSERT_EQ(record({"-q", "-o", dir.file("t.kcap")}, {interposeProgram("direct_launch")}).exitCode, 0);
  ASSERT_EQ(::symlink(dir.file("t.kcap").c_str(), link.c_str()), 0);
  for (const bool force : {false, true}) {
    SCOPED_TRACE(force ? "--force" : "no --force");
    const std::vector<std::string> extra = force ? std::vector<std::string>{"--force"} : std::vector<std::string>{};
    const auto withOutput = [&](const std::string& path) {
      std::vector<std::string> options = extra;
      options.insert(options.end(), {"-o", path});
      return record(options, {interposeProgram("direct_launch")});
    };
    const Outcome toFifo = withOutput(fifo);
    EXPECT_EQ(toFifo.exitCode, 2) << toFifo.describe();
    expectContains(toFifo.err, fifo + " is not a regular file (a FIFO)");
    const Outcome toDir = withOutput(sub);
    EXPECT_EQ(toDir.exitCode, 2) << toDir.describe();
    expectContains(toDir.err, "kcap record: " + sub + " is a directory");
    const Outcome toLink = withOutput(link);
    EXPECT_EQ(toLink.exitCode, 2) << toLink.describe();
    expectContains(toLink.err, link + " is not a regular file (a symbolic link)");
    for (const Outcome* outcome : {&toFifo, &toDir, &toLink}) {
      EXPECT_EQ(outcome->out, "") << "the program must not run";
    }
  }
  struct stat st {};
  ASSERT_EQ(::lstat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  ASSERT_EQ(::lstat(sub.c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  ASSERT_EQ(::lstat(link.c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
  EXPECT_TRUE(namesIn(sub).empty());
  EXPECT_EQ(namesIn(dir.path()), (std::vector<std::string>{"fifo", "link.kcap", "sub", "t.kcap"}));
}

TEST(KcapRecordOutput, TheDirectoryIsCheckedBeforeTheProgramRuns) {
  kcap::test::TempDir dir("kcap-output");
  writeText(dir.file("plain"), "x");
  const Outcome missing = record({"-o", dir.file("missing/t.kcap")}, {interposeProgram("direct_launch")});
  EXPECT_EQ(missing.exitCode, 2) << missing.describe();
  EXPECT_EQ(missing.out, "");
  EXPECT_EQ(missing.err, "kcap record: cannot write " + dir.file("missing/t.kcap") + ": the directory " +
                             dir.file("missing") + " does not exist\n");
  // %p in the directory: the name the program's process would get.
  const Outcome perProcess = record({"-o", dir.file("run-%p/t.kcap")}, {interposeProgram("direct_launch")});
  EXPECT_EQ(perProcess.exitCode, 2) << perProcess.describe();
  expectContains(perProcess.err, "does not exist");
  EXPECT_EQ(perProcess.err.find("%p"), std::string::npos) << perProcess.err;
  const Outcome underFile = record({"-o", dir.file("plain/t.kcap")}, {interposeProgram("direct_launch")});
  EXPECT_EQ(underFile.exitCode, 2) << underFile.describe();
  expectContains(underFile.err, dir.file("plain") + " is not a directory");
  if (::geteuid() != 0) {
    const std::string locked = dir.file("locked");
    ASSERT_EQ(::mkdir(locked.c_str(), 0500), 0);
    const Outcome denied = record({"-o", locked + "/t.kcap"}, {interposeProgram("direct_launch")});
    EXPECT_EQ(denied.exitCode, 2) << denied.describe();
    expectContains(denied.err, "cannot write " + locked + "/t.kcap: " + locked + ": Permission denied");
    ::chmod(locked.c_str(), 0700);
  }
  EXPECT_EQ(namesIn(dir.path()), std::vector<std::string>{"plain"});
}

// ---- the shim: one file per process --------------------------------------------------------------

TEST(RecordOutput, ASecondProcessGetsItsOwnFileAndSaysSo) {
  kcap::test::TempDir dir("kcap-output");
  const std::string path = dir.file("t.kcap");
  const Outcome first = shimmed(path, {interposeProgram("direct_launch")});
  EXPECT_EQ(first.exitCode, 0) << first.describe();
  EXPECT_EQ(first.err, "");
  const std::vector<uint8_t> firstBytes = kcap::test::readFileBytes(path);
  const Outcome second = shimmed(path, {interposeProgram("direct_launch")});
  EXPECT_EQ(second.exitCode, 0) << second.describe();
  EXPECT_EQ(second.out, first.out);
  EXPECT_TRUE(kcap::test::readFileBytes(path) == firstBytes) << "the first trace was overwritten";
  const auto names = namesIn(dir.path());
  ASSERT_EQ(names.size(), 2u) << second.describe();
  const std::string other = dir.file(names[0] == "t.kcap" ? names[1] : names[0]);
  const Facts facts = factsOf(other);
  EXPECT_EQ(other, dir.file("t." + std::to_string(facts.pid) + ".kcap"));
  EXPECT_EQ(second.err, "kcap: " + path + " exists; writing " + other + "\n");
  EXPECT_EQ(facts.launches, 6u);
  expectChecks(path);
  expectChecks(other);
}

TEST(RecordOutput, TwoProcessesRecordingAtOnceNeverShareAFile) {
  kcap::test::TempDir dir("kcap-output");
  const std::string path = dir.file("c.kcap"), flag = dir.file("go");
  Outcome paused;
  std::thread first([&] { paused = shimmed(path, {scenarioProgram(), "pause", flag}); });
  waitFor([&] { return pausedIn(path); }, "the first process's two launches");
  const Outcome second = shimmed(path, {interposeProgram("direct_launch")});
  writeText(flag, "");
  first.join();
  EXPECT_EQ(paused.exitCode, 0) << paused.describe();
  EXPECT_EQ(paused.err, "");
  EXPECT_EQ(second.exitCode, 0) << second.describe();
  expectContains(second.err, "kcap: " + path + " exists; writing " + dir.file("c."));
  const Facts firstFacts = factsOf(path);
  EXPECT_EQ(firstFacts.launches, 4u);
  expectChecks(path);
  bool sawSecond = false;
  for (const std::string& name : namesIn(dir.path())) {
    if (name != "c.kcap" && name != "go") {
      sawSecond = true;
      EXPECT_EQ(factsOf(dir.file(name)).launches, 6u);
      expectChecks(dir.file(name));
    }
  }
  EXPECT_TRUE(sawSecond);
}

TEST(RecordOutput, APathThatIsNotARegularFileIsNeverWrittenThrough) {
  kcap::test::TempDir dir("kcap-output");
  const std::string fifo = dir.file("fifo"), sub = dir.file("sub");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  ASSERT_EQ(::mkdir(sub.c_str(), 0700), 0);
  for (const std::string& path : {fifo, sub}) {
    SCOPED_TRACE(path);
    const Outcome run = kcap_test::run(
        {interposeProgram("direct_launch"), {}, {{"KCAP_OUTPUT", path}}, true, std::chrono::seconds(30)});
    EXPECT_FALSE(run.timedOut) << "blocked opening " << path;
    EXPECT_EQ(run.exitCode, 0) << run.describe();
    EXPECT_EQ(run.err, "kcap: cannot record: " + path +
                           (path == sub ? " is a directory" : " exists and is not a regular file (a FIFO)") +
                           "; calls pass through unchanged\n");
  }
  EXPECT_EQ(namesIn(dir.path()), (std::vector<std::string>{"fifo", "sub"}));
  EXPECT_TRUE(namesIn(sub).empty());
}

TEST(RecordOutput, AFailureNamesThePathGiven) {
  kcap::test::TempDir dir("kcap-output");
  const std::string path = dir.file("gone/t.kcap");
  const Outcome run = shimmed(path, {interposeProgram("direct_launch")});
  EXPECT_EQ(run.exitCode, 0) << run.describe();
  EXPECT_EQ(run.err, "kcap: cannot record: " + path +
                         ": cannot create: No such file or directory; calls pass "
                         "through unchanged\n");
}

// ---- kcap record: two recordings, one path ------------------------------------------------------

TEST(KcapRecordOutput, ASecondRecordingNeverTakesTheFirstOnesTrace) {
  kcap::test::TempDir dir("kcap-output");
  const std::string path = dir.file("same.kcap"), flag = dir.file("go");
  Outcome first;
  std::thread running([&] { first = record({"-o", path}, {scenarioProgram(), "pause", flag}); });
  waitFor([&] { return pausedIn(path); }, "the first recording's two launches");
  const Outcome second = record({"-o", path}, {interposeProgram("direct_launch")});
  const Outcome forced = record({"--force", "-o", path}, {interposeProgram("direct_launch")});
  writeText(flag, "");
  running.join();
  EXPECT_EQ(second.exitCode, 2) << second.describe();
  expectContains(second.err, path + " exists; not replacing it");
  EXPECT_EQ(forced.exitCode, 2) << forced.describe();
  expectContains(forced.err, "kcap record: " + path + " is being written by another process; not replacing it");
  EXPECT_EQ(second.out + forced.out, "") << "the second program must not run";
  EXPECT_EQ(first.exitCode, 0) << first.describe();
  EXPECT_EQ(count(first.err, "kcap: recorded "), 1u) << first.err;
  expectContains(first.err, ", 4 launches in " + path + " (");
  const Facts facts = factsOf(path);
  EXPECT_EQ(facts.launches, 4u);
  EXPECT_TRUE(facts.closed);
  expectChecks(path);
}

TEST(KcapRecordOutput, TheSummaryIsOfThisRecordingsTracesOnly) {
  kcap::test::TempDir dir("kcap-output");
  const std::string pattern = dir.file("t-%p.kcap"), flag = dir.file("go");
  Outcome first;
  std::thread running([&] { first = record({"-o", pattern}, {scenarioProgram(), "pause", flag}); });
  waitFor(
      [&] {
        for (const std::string& name : namesIn(dir.path())) {
          if (pausedIn(dir.file(name))) {
            return true;
          }
        }
        return false;
      },
      "the first recording's two launches");
  const Outcome second = record({"-o", pattern}, {interposeProgram("direct_launch")});
  writeText(flag, "");
  running.join();
  EXPECT_EQ(second.exitCode, 0) << second.describe();
  EXPECT_EQ(count(second.err, "kcap: recorded "), 1u) << second.err;
  expectContains(second.err, "kcap: recorded 53 events, 6 launches in " + dir.file("t-"));
  EXPECT_EQ(first.exitCode, 0) << first.describe();
  EXPECT_EQ(count(first.err, "kcap: recorded "), 1u) << first.err;
  expectContains(first.err, ", 4 launches in " + dir.file("t-"));
}

// ---- kcap record: what the summary says about a trace not closed -----------------------------------

// `kcap record -o TRACE -- record_scenarios SCENARIO`: its exit code, and
// what its summary says ("{trace}": the trace's path) and never says.
struct SummaryCase {
  const char* scenario;  // and the test's name, '-' as '_'
  int exitCode;
  std::vector<std::string> says;
  std::vector<std::string> neverSays = {};
  bool traceChecks = false;  // kcap check passes
};

void PrintTo(const SummaryCase& summaryCase, std::ostream* out) { *out << summaryCase.scenario; }

const SummaryCase kSummaryCases[] = {
    {"disk-full",
     0,
     {"in {trace} (", ", not closed: recording stopped: at byte ", ": write failed: file size limit exceeded (EFBIG)"},
     {"killed"}},
    // _exit or SIGKILL may stop the writer between chunks or inside one:
    // either way the summary names how the program ended.
    {"exit-now", 5, {"in {trace} (", ", not closed: the program exited (code 5) "}, {"killed"}},
    {"sigkill", 128 + SIGKILL, {"in {trace} (", ", not closed: the program was killed by signal 9 (SIGKILL)"}},
    {"sighup", 128 + SIGHUP, {"kcap: recorded "}, {"not closed"}, /*traceChecks=*/true},
};

class RecordSummary : public ::testing::TestWithParam<SummaryCase> {};

TEST_P(RecordSummary, SaysWhyATraceWasNotClosed) {
  const SummaryCase& expected = GetParam();
  kcap::test::TempDir dir("kcap-output");
  const std::string trace = dir.file(std::string(expected.scenario) + ".kcap");
  const Outcome run = record({"-o", trace}, {scenarioProgram(), expected.scenario});
  EXPECT_EQ(run.exitCode, expected.exitCode) << run.describe();
  for (std::string said : expected.says) {
    const size_t at = said.find("{trace}");
    if (at != std::string::npos) {
      said.replace(at, 7, trace);
    }
    expectContains(run.err, said);
  }
  for (const std::string& unsaid : expected.neverSays) {
    EXPECT_EQ(run.err.find(unsaid), std::string::npos) << run.err;
  }
  if (expected.traceChecks) {
    expectChecks(trace);
  }
}

INSTANTIATE_TEST_SUITE_P(KcapRecordOutput, RecordSummary, ::testing::ValuesIn(kSummaryCases), [](const auto& test) {
  std::string name = test.param.scenario;
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
});

}  // namespace
}  // namespace kcap_test
