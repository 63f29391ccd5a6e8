#include "program_runner.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <vector>

extern char** environ;

namespace kcap_test {
namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// "<prefix> <name> <count>" lines.
void parse_counts(const std::string& text, const std::string& prefix, Counts& counts) {
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind(prefix + " ", 0) != 0) {
      continue;
    }
    std::istringstream fields(line.substr(prefix.size() + 1));
    std::string name;
    std::uint64_t count = 0;
    if (fields >> name >> count) {
      counts[name] += count;
    }
  }
}

// An AddressSanitizer build's programs need the runtime ahead of the shim in
// LD_PRELOAD (ASan insists on being first in the library list).
std::string sanitizer_runtime() {
#if defined(__SANITIZE_ADDRESS__)
  Dl_info info{};
  if (void* symbol = dlsym(RTLD_DEFAULT, "__asan_init"); symbol != nullptr && dladdr(symbol, &info) != 0) {
    return info.dli_fname;
  }
#endif
  return {};
}

class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base != nullptr && base[0] != '\0' ? base : "/tmp") + "/kcap-interpose-XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) {
      throw std::runtime_error("mkdtemp failed");
    }
    path_ = pattern;
  }
  ~TempDir() {
    for (const char* file : {"/stdout", "/stderr", "/stats"}) {
      std::remove((path_ + file).c_str());
    }
    rmdir(path_.c_str());
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const char* name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace

std::string shim_path() { return KCAP_TEST_SHIM; }
std::string driver_double_dir() { return KCAP_TEST_DOUBLE_DIR; }
std::string symbolic_driver_double_dir() { return KCAP_TEST_SYMBOLIC_DOUBLE_DIR; }

std::string RunResult::describe() const {
  std::ostringstream text;
  text << "exit " << exit_code << ", signal " << signal << (timed_out ? ", TIMED OUT" : "") << "\n--- stdout\n"
       << out << "--- stderr\n"
       << err;
  return text.str();
}

RunResult run_program(const std::string& program, const RunOptions& options) {
  const TempDir temp;
  const std::string path = std::string(KCAP_TEST_PROGRAMS_DIR) + "/" + program;

  // The runner's environment, minus anything that would change what is
  // loaded, plus the run's own settings.
  std::vector<std::string> environment;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string variable = *entry;
    if (variable.rfind("LD_PRELOAD=", 0) != 0 && variable.rfind("LD_LIBRARY_PATH=", 0) != 0 &&
        variable.rfind("KCAP_", 0) != 0) {
      environment.push_back(variable);
    }
  }
  if (options.with_shim) {
    const std::string runtime = sanitizer_runtime();
    environment.push_back("LD_PRELOAD=" + (runtime.empty() ? "" : runtime + ":") + shim_path());
    environment.push_back("KCAP_STATS_FILE=" + temp.file("stats"));
  }
  if (!options.library_path.empty()) {
    environment.push_back("LD_LIBRARY_PATH=" + options.library_path);
  }
  if (!options.real_libcuda.empty()) {
    environment.push_back("KCAP_REAL_LIBCUDA=" + options.real_libcuda);
  }
  std::vector<char*> envp;
  for (std::string& variable : environment) {
    envp.push_back(variable.data());
  }
  envp.push_back(nullptr);

  posix_spawn_file_actions_t files;
  posix_spawn_file_actions_init(&files);
  posix_spawn_file_actions_addopen(&files, STDOUT_FILENO, temp.file("stdout").c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0600);
  posix_spawn_file_actions_addopen(&files, STDERR_FILENO, temp.file("stderr").c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0600);
  std::string argv0 = path;
  char* argv[] = {argv0.data(), nullptr};
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, path.c_str(), &files, nullptr, argv, envp.data());
  posix_spawn_file_actions_destroy(&files);
  if (spawned != 0) {
    throw std::runtime_error("cannot run " + path + ": " + std::strerror(spawned));
  }

  RunResult result;
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + options.timeout;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      result.timed_out = true;  // a deadlock, most likely
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.signal = WTERMSIG(status);
  }
  result.out = read_text(temp.file("stdout"));
  result.err = read_text(temp.file("stderr"));
  parse_counts(result.out, "made call", result.calls_made);
  parse_counts(result.out, "made kernel", result.kernels_made);
  if (options.with_shim) {
    const std::string stats = read_text(temp.file("stats"));
    result.has_stats = stats.rfind("kcap-stats 1\n", 0) == 0;
    parse_counts(stats, "call", result.calls_seen);
    parse_counts(stats, "kernel", result.kernels_seen);
  }
  return result;
}

}  // namespace kcap_test
