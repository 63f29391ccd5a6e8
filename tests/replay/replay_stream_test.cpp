// `kcap replay` prints each launch's row as its outcome arrives, aligned by
// widths fixed before the replay (Table's preset-width rendering), and, when
// stderr is not a terminal, a progress line at most every five seconds. The
// replays run against the driver double with stdout a pipe read as it fills.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "common.h"
#include "process_runner.h"
#include "recorded_traces.h"

extern char** environ;

namespace kcap_test {
namespace {

using kcap::tools::Table;

// ---- Table: preset widths -------------------------------------------------------------------

TEST(TablePresetWidths, RenderIsTheHeaderAndEachRowAtTheTablesOwnWidths) {
  Table table({"launch", "kernel", "result"}, "r");
  table.row({"0", "axpy", "REPRODUCED"});
  table.row({"12", "reduce_sum", "DIFFERS"});
  const std::vector<size_t> widths = table.widths();
  EXPECT_EQ(widths, (std::vector<size_t>{6, 10, 10}));
  EXPECT_EQ(table.render(""), table.renderHeader(widths, "") +
                                  table.renderRow({"0", "axpy", "REPRODUCED"}, widths, "") +
                                  table.renderRow({"12", "reduce_sum", "DIFFERS"}, widths, ""));
  EXPECT_EQ(table.render(""),
            "launch  kernel      result\n"
            "     0  axpy        REPRODUCED\n"
            "    12  reduce_sum  DIFFERS\n");
}

TEST(TablePresetWidths, ARowTakesTheGivenWidthsAndALongCellOverflowsItsColumn) {
  const Table table({"launch", "kernel", "grid", "result"}, "r");
  const std::vector<size_t> widths = {6, 8, 7, 0};
  EXPECT_EQ(table.renderHeader(widths, ""), "launch  kernel    grid     result\n");
  EXPECT_EQ(table.renderRow({"3", "axpy", "(4,1,1)", "OK"}, widths, ""), "     3  axpy      (4,1,1)  OK\n");
  // only the cells after the long one move right
  EXPECT_EQ(table.renderRow({"3", "a_long_kernel_name", "(4,1,1)", "OK"}, widths, ""),
            "     3  a_long_kernel_name  (4,1,1)  OK\n");
  EXPECT_EQ(table.renderRow({"1234567", "axpy", "(4,1,1)", "OK"}, widths, ""), "1234567  axpy      (4,1,1)  OK\n");
  // missing cells are empty, trailing spaces trimmed, the indent kept
  EXPECT_EQ(table.renderRow({"3", "axpy"}, widths, "  "), "       3  axpy\n");
}

TEST(TablePresetWidths, AHeaderOfEmptyStringsIsNotPrinted) {
  const Table table({"", ""});
  EXPECT_EQ(table.renderHeader({4, 4}), "");
  EXPECT_EQ(table.renderRow({"a", "b"}, {4, 4}), "  a     b\n");
}

// ---- kcap replay, stdout a pipe -------------------------------------------------------------

class ReplayStream : public RecordedTraces<ReplayStream> {
 protected:
  // replay_scenarios hang: launch 0 ordinary, launch 1 never returns.
  static std::string hanging() {
    const std::string path = file("hang.kcap");
    if (access(path.c_str(), F_OK) != 0) {
      const Outcome recorded = kcap_test::run({KCAP_TEST_REPLAY_PROGRAM, {"hang"}, {{"KCAP_OUTPUT", path}}, true});
      EXPECT_EQ(recorded.signal, SIGKILL) << recorded.describe();  // its watchdog ended it
    }
    return path;
  }
};

// `kcap replay ARGS` on the double, its stdout a pipe read as it fills, its
// stderr a file. `onOutput` is called with all of stdout so far each time
// more arrives (`pid` is still unwaited for then).
struct Streamed {
  std::string out, err;
  int exitCode = -1;
};
Streamed replayThroughPipe(const std::vector<std::string>& args, const std::string& errPath,
                           const std::function<void(const std::string& out, pid_t pid)>& onOutput = {}) {
  std::vector<std::string> argv = {kcapBinary(), "replay"};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<std::string> env;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string variable = *entry;
    if (variable.rfind("LD_PRELOAD=", 0) != 0 && variable.rfind("KCAP_", 0) != 0) env.push_back(variable);
  }
  env.push_back("KCAP_LIBCUDA=" + doubleDir() + "/libcuda.so.1");
  const auto pointers = [](std::vector<std::string>& strings) {
    std::vector<char*> p;
    for (std::string& s : strings) p.push_back(s.data());
    p.push_back(nullptr);
    return p;
  };
  std::vector<char*> argp = pointers(argv), envp = pointers(env);

  int fds[2];
  EXPECT_EQ(::pipe(fds), 0);
  posix_spawn_file_actions_t files;
  posix_spawn_file_actions_init(&files);
  posix_spawn_file_actions_adddup2(&files, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&files, fds[0]);
  posix_spawn_file_actions_addclose(&files, fds[1]);
  posix_spawn_file_actions_addopen(&files, STDERR_FILENO, errPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, argp[0], &files, nullptr, argp.data(), envp.data());
  posix_spawn_file_actions_destroy(&files);
  ::close(fds[1]);
  Streamed result;
  if (spawned != 0) {
    ::close(fds[0]);
    ADD_FAILURE() << "cannot run kcap: " << std::strerror(spawned);
    return result;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  for (;;) {
    pollfd p{fds[0], POLLIN, 0};
    if (std::chrono::steady_clock::now() > deadline) {
      ADD_FAILURE() << "kcap replay did not finish:\n" << result.out;
      ::kill(pid, SIGKILL);
      break;
    }
    if (::poll(&p, 1, 1000) <= 0) continue;
    char chunk[4096];
    const ssize_t n = ::read(fds[0], chunk, sizeof chunk);
    if (n <= 0) break;
    result.out.append(chunk, static_cast<size_t>(n));
    if (onOutput) onOutput(result.out, pid);
  }
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (WIFEXITED(status)) result.exitCode = WEXITSTATUS(status);
  std::ifstream in(errPath);
  std::ostringstream text;
  text << in.rdbuf();
  result.err = text.str();
  return result;
}

std::vector<std::string> linesOf(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Where each header word starts, and where the first (right-aligned) one ends.
std::vector<size_t> columnStarts(const std::string& header) {
  std::vector<size_t> starts;
  for (size_t i = 0; i < header.size(); ++i) {
    if (header[i] != ' ' && (i == 0 || header[i - 1] == ' ')) starts.push_back(i);
  }
  return starts;
}

// The row's cells start where the header's columns do (two spaces before
// each), and its launch index ends where "launch" does.
void expectAlignedWith(const std::string& header, const std::string& row) {
  const std::vector<size_t> starts = columnStarts(header);
  ASSERT_EQ(starts.size(), 7u) << header;
  const size_t indexEnd = header.find("launch") + 6;
  ASSERT_GT(row.size(), indexEnd) << row;
  EXPECT_NE(row[indexEnd - 1], ' ') << row;
  EXPECT_EQ(row[indexEnd], ' ') << row;
  for (size_t c = 1; c < starts.size(); ++c) {
    ASSERT_GT(row.size(), starts[c]) << header << "\n" << row;
    EXPECT_EQ(row.substr(starts[c] - 2, 2), "  ") << c << "\n" << header << "\n" << row;
    EXPECT_NE(row[starts[c]], ' ') << c << "\n" << header << "\n" << row;
  }
}

TEST_F(ReplayStream, RowsComeInLaunchOrderAlignedWithTheHeaderAndBeforeTheVerdict) {
  const Streamed run = replayThroughPipe({directLaunch()}, file("direct.err"));
  EXPECT_EQ(run.exitCode, 0) << run.out << run.err;
  const std::vector<std::string> lines = linesOf(run.out);
  size_t header = lines.size();
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].rfind("launch  kernel", 0) == 0) header = i;
  }
  ASSERT_LT(header + 6, lines.size()) << run.out;
  for (size_t i = 0; i < 6; ++i) {
    const std::string& row = lines[header + 1 + i];
    EXPECT_EQ(row.find_first_not_of(' '), row.find(std::to_string(i) + "  ")) << i << "\n" << run.out;
    expectAlignedWith(lines[header], row);
  }
  const size_t verdict = run.out.find("\nVerdict: ");
  ASSERT_NE(verdict, std::string::npos) << run.out;
  EXPECT_LT(run.out.find(lines[header + 1]), verdict) << run.out;
  // a quick replay prints no progress
  EXPECT_EQ(run.err.find("done ("), std::string::npos) << run.err;
}

// Launch 0's row is out while launch 1 still hangs: the replay has not
// ended, and the verdict is not out yet. The hang outcome comes after the
// timeout, more than five seconds in: a progress line on stderr.
TEST_F(ReplayStream, ARowIsPrintedWhileALaterLaunchStillRunsAndProgressGoesToStderr) {
  const std::string path = hanging();
  bool sawRowEarly = false;
  const Streamed run =
      replayThroughPipe({path, "--timeout", "6", "--launch", "0", "--launch", "1"}, file("hang.err"),
                        [&](const std::string& out, pid_t pid) {
                          if (sawRowEarly || out.find("\n     0  axpy ") == std::string::npos) return;
                          siginfo_t info{};  // left to be waited for (WNOWAIT)
                          EXPECT_EQ(::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT), 0);
                          EXPECT_EQ(info.si_pid, 0) << "kcap replay ended before its first row was read\n" << out;
                          EXPECT_EQ(out.find("Verdict:"), std::string::npos) << out;
                          EXPECT_EQ(out.find("HANG"), std::string::npos) << out;
                          sawRowEarly = true;
                        });
  EXPECT_TRUE(sawRowEarly) << run.out;
  EXPECT_EQ(run.exitCode, 4) << run.out << run.err;
  EXPECT_NE(run.out.find("launch 1 (axpy): HANG"), std::string::npos) << run.out;
  EXPECT_NE(run.err.find("kcap replay: 2 of 2 done (launch 1: HANG), "), std::string::npos) << run.err;
}

TEST_F(ReplayStream, JsonKeepsStdoutOneDocumentAndStillShowsProgressOnStderr) {
  const std::string path = hanging();
  const Streamed run =
      replayThroughPipe({path, "--json", "--timeout", "6", "--launch", "0", "--launch", "1"}, file("json.err"));
  EXPECT_EQ(run.exitCode, 4) << run.out << run.err;
  EXPECT_EQ(run.out.rfind("{\"trace\":", 0), 0u) << run.out;
  EXPECT_EQ(linesOf(run.out).size(), 1u) << run.out;
  EXPECT_NE(run.err.find("kcap replay: 2 of 2 done (launch 1: HANG), "), std::string::npos) << run.err;
}

}  // namespace
}  // namespace kcap_test
