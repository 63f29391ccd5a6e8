// --check sanitizer: compute-sanitizer's tools each run on a separate
// `kcap replay` of the launch, started by the tool (outside the replay process).
#include "checkers.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <regex>

namespace kcap::replay {
namespace {

bool executable(const std::string& path) { return !path.empty() && ::access(path.c_str(), X_OK) == 0; }

// Runs argv, stdout and stderr together; the exit status (-1: could not run).
int capture(const std::vector<std::string>& argv, std::string& output) {
  int fds[2];
  if (::pipe(fds) != 0) return -1;
  const pid_t pid = ::fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    ::dup2(fds[1], 1);
    ::dup2(fds[1], 2);
    ::close(fds[0]);
    ::close(fds[1]);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    _exit(127);
  }
  ::close(fds[1]);
  char chunk[4096];
  for (;;) {
    const ssize_t n = ::read(fds[0], chunk, sizeof chunk);
    if (n > 0) {
      output.append(chunk, static_cast<size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

}  // namespace

std::string findComputeSanitizer() {
  if (const char* forced = std::getenv("KCAP_COMPUTE_SANITIZER")) return executable(forced) ? forced : "";
  if (const char* path = std::getenv("PATH")) {
    std::string dirs = path;
    size_t start = 0;
    while (start <= dirs.size()) {
      const size_t colon = std::min(dirs.find(':', start), dirs.size());
      const std::string dir = dirs.substr(start, colon - start);
      if (!dir.empty() && executable(dir + "/compute-sanitizer")) return dir + "/compute-sanitizer";
      start = colon + 1;
    }
  }
  if (const char* home = std::getenv("CUDA_HOME")) {
    if (executable(std::string(home) + "/bin/compute-sanitizer")) return std::string(home) + "/bin/compute-sanitizer";
  }
  if (executable("/usr/local/cuda/bin/compute-sanitizer")) return "/usr/local/cuda/bin/compute-sanitizer";
  return "";
}

CheckFinding runSanitizer(const ReplayOptions& options, uint64_t launchIndex, const std::string& kcapPath) {
  CheckFinding f{"sanitizer", CheckStatus::kClean, "", {}};
  const std::string tool = findComputeSanitizer();
  if (tool.empty()) {
    f.status = CheckStatus::kNotRun;
    f.summary = "compute-sanitizer not found (PATH, $CUDA_HOME/bin, /usr/local/cuda/bin)";
    return f;
  }
  const std::regex summaryLine("ERROR SUMMARY: ([0-9]+) error");
  uint64_t errors = 0;
  std::vector<std::string> parts;
  for (const char* name : {"memcheck", "racecheck", "initcheck"}) {
    std::string output;
    const int status =
        capture({tool, "--tool", name, "--error-exitcode", "9", kcapPath, "replay", options.tracePath, "--launch",
                 std::to_string(launchIndex), "--no-isolate", "--device", std::to_string(options.device)},
                output);
    std::smatch match;
    uint64_t count = 0;
    bool summarized = false;
    std::string::const_iterator from = output.begin();
    while (std::regex_search(from, output.cend(), match, summaryLine)) {
      count = std::strtoull(match[1].str().c_str(), nullptr, 10);
      summarized = true;
      from = match[0].second;
    }
    if (status == 9 && count == 0) count = 1;
    errors += count;
    if (!summarized && status != 9 && status != 0 && status != 3) {
      f.status = f.status == CheckStatus::kFinding ? f.status : CheckStatus::kError;
      parts.push_back(std::string(name) + ": did not run (exit status " + std::to_string(status) + ")");
    } else {
      parts.push_back(std::string(name) + ": " + std::to_string(count) + " error(s)");
    }
    // Its own report lines ("========= Invalid __global__ read ...", the summary).
    size_t kept = 0;
    size_t start = 0;
    while (start < output.size() && kept < 20) {
      const size_t eol = std::min(output.find('\n', start), output.size());
      const std::string line = output.substr(start, eol - start);
      if (line.rfind("=========", 0) == 0 && line.find_first_not_of("= ") != std::string::npos) {
        f.details.push_back(std::string(name) + ": " + line.substr(line.find_first_not_of("= ")));
        ++kept;
      }
      start = eol + 1;
    }
  }
  if (errors != 0) f.status = CheckStatus::kFinding;
  f.summary = "";
  for (size_t i = 0; i < parts.size(); ++i) f.summary += (i ? "; " : "") + parts[i];
  return f;
}

}  // namespace kcap::replay
