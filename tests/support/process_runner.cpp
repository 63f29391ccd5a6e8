#include "process_runner.h"

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

extern char** environ;

namespace kcap_test {
namespace {

std::string readText(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// An AddressSanitizer build's programs need its runtime first in LD_PRELOAD.
std::string sanitizerRuntime() {
#if defined(__SANITIZE_ADDRESS__)
  Dl_info info{};
  if (void* symbol = dlsym(RTLD_DEFAULT, "__asan_init"); symbol != nullptr && dladdr(symbol, &info) != 0) {
    return info.dli_fname;
  }
#endif
  return {};
}

// LeakSanitizer in the child of a fork of a multithreaded process lists the
// parent's threads as "not suspended": a property of the sanitizer, not of
// the program; dropped so that "nothing on stderr" still means something.
std::string withoutSanitizerNoise(const std::string& text) {
#if defined(__SANITIZE_ADDRESS__)
  std::string out;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    end = end == std::string::npos ? text.size() : end + 1;
    const std::string line = text.substr(start, end - start);
    if (line.find("was not suspended. False leaks are possible.") == std::string::npos) {
      out += line;
    }
    start = end;
  }
  return out;
#else
  return text;
#endif
}

// Where the child's stdout, stderr and stats go; removed with what is in it.
class RunDir {
 public:
  RunDir() {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base != nullptr && base[0] != '\0' ? base : "/tmp") + "/kcap-run-XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) {
      throw std::runtime_error("mkdtemp failed");
    }
    path_ = pattern;
  }
  ~RunDir() {
    for (const char* name : {"stdout", "stderr", "stats"}) {
      std::remove(file(name).c_str());
    }
    rmdir(path_.c_str());
  }
  RunDir(const RunDir&) = delete;
  RunDir& operator=(const RunDir&) = delete;
  std::string file(const char* name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// The cleaned inherited environment, then what the spec asks for; a memory
// limit under AddressSanitizer is added to whatever ASAN_OPTIONS that leaves.
std::vector<std::string> childEnvironment(const RunSpec& spec, const std::string& runtime, const RunDir& dir) {
  std::map<std::string, std::string> variables;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string variable = *entry;
    const size_t equals = variable.find('=');
    const std::string name = variable.substr(0, equals);
    if (name != "LD_PRELOAD" && name != "LD_LIBRARY_PATH" && name.rfind("KCAP_", 0) != 0 &&
        equals != std::string::npos) {
      variables.emplace(name, variable.substr(equals + 1));
    }
  }
  if (spec.withShim) {
    variables["LD_PRELOAD"] = (runtime.empty() ? "" : runtime + ":") + shimPath();
    if (spec.shimStats) {
      variables["KCAP_STATS_FILE"] = dir.file("stats");
    }
  } else if (!runtime.empty()) {
    variables["LD_PRELOAD"] = runtime;
  }
  if (!spec.libraryPath.empty()) {
    variables["LD_LIBRARY_PATH"] = spec.libraryPath;
  }
  for (const auto& [name, value] : spec.env) {
    variables[name] = value;
  }
  if (spec.memoryLimitBytes != 0 && !runtime.empty()) {
    const std::string mb = std::to_string(spec.memoryLimitBytes >> 20);
    std::string& options = variables["ASAN_OPTIONS"];
    options += (options.empty() ? "" : ":") + std::string("hard_rss_limit_mb=") + mb + ":max_allocation_size_mb=" + mb;
  }
  std::vector<std::string> environment;
  for (const auto& [name, value] : variables) {
    environment.push_back(name + "=" + value);
  }
  return environment;
}

std::vector<char*> pointersTo(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  for (std::string& text : strings) {
    pointers.push_back(text.data());
  }
  pointers.push_back(nullptr);
  return pointers;
}

}  // namespace

std::string shimPath() { return KCAP_TEST_SHIM; }
std::string doubleDir() { return KCAP_TEST_DOUBLE_DIR; }
std::string symbolicDoubleDir() { return KCAP_TEST_SYMBOLIC_DOUBLE_DIR; }
std::string kcapBinary() { return KCAP_TEST_KCAP; }
std::string scenarioProgram() { return std::string(KCAP_TEST_RECORD_PROGRAMS_DIR) + "/record_scenarios"; }
std::string graphProgram() { return std::string(KCAP_TEST_RECORD_PROGRAMS_DIR) + "/graph_scenarios"; }
std::string ipcImportProgram() { return std::string(KCAP_TEST_RECORD_PROGRAMS_DIR) + "/ipc_import"; }
std::string peerCopyProgram() { return std::string(KCAP_TEST_RECORD_PROGRAMS_DIR) + "/peer_copy"; }
std::string managedMemoryProgram() { return std::string(KCAP_TEST_RECORD_PROGRAMS_DIR) + "/managed_memory"; }
std::string lateAllocationProgram() { return std::string(KCAP_TEST_RECORD_PROGRAMS_DIR) + "/late_allocation"; }
std::string vmmImportProgram() { return std::string(KCAP_TEST_RECORD_PROGRAMS_DIR) + "/vmm_import"; }
std::string twoDeviceProgram() { return std::string(KCAP_TEST_RECORD_PROGRAMS_DIR) + "/two_device_work"; }
std::string ncclCollectivesProgram() { return std::string(KCAP_TEST_RECORD_PROGRAMS_DIR) + "/nccl_collectives"; }
std::string threadsProgram() { return std::string(KCAP_TEST_RECORD_PROGRAMS_DIR) + "/record_threads"; }
std::string interposeProgram(const std::string& name) {
  return std::string(KCAP_TEST_INTERPOSE_PROGRAMS_DIR) + "/" + name;
}
std::string kernelFile(const std::string& name) { return std::string(KCAP_KERNELS_DIR) + "/" + name; }

std::string Outcome::describe() const {
  std::ostringstream text;
  text << "exit " << exitCode << ", signal " << signal << (timedOut ? ", TIMED OUT" : "") << "\n--- stdout\n"
       << out << "--- stderr\n"
       << err;
  return text.str();
}

Outcome run(const RunSpec& spec) {
  const RunDir dir;
  const std::string runtime = sanitizerRuntime();
  std::vector<std::string> args = {spec.program};
  args.insert(args.end(), spec.args.begin(), spec.args.end());
  if (spec.memoryLimitBytes != 0 && runtime.empty()) {
    args.insert(args.begin(), {"/bin/sh", "-c",
                               "ulimit -v " + std::to_string(spec.memoryLimitBytes >> 10) + " && exec \"$0\" \"$@\""});
  }
  std::vector<std::string> environment = childEnvironment(spec, runtime, dir);
  std::vector<char*> argv = pointersTo(args);
  std::vector<char*> envp = pointersTo(environment);

  posix_spawn_file_actions_t files;
  posix_spawn_file_actions_init(&files);
  posix_spawn_file_actions_addopen(&files, STDOUT_FILENO, dir.file("stdout").c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0600);
  posix_spawn_file_actions_addopen(&files, STDERR_FILENO, dir.file("stderr").c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0600);
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, args[0].c_str(), &files, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&files);
  if (spawned != 0) {
    throw std::runtime_error("cannot run " + spec.program + ": " + std::strerror(spawned));
  }
  Outcome result;
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + spec.timeout;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      result.timedOut = true;  // a deadlock, most likely
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (WIFEXITED(status)) {
    result.exitCode = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.signal = WTERMSIG(status);
  }
  result.out = readText(dir.file("stdout"));
  result.err = withoutSanitizerNoise(readText(dir.file("stderr")));
  if (spec.withShim && spec.shimStats) {
    result.shimStats = readText(dir.file("stats"));
  }
  return result;
}

Outcome kcapRecord(const std::string& path, const std::string& program, const std::vector<std::string>& args,
                   std::map<std::string, std::string> env) {
  std::vector<std::string> all = {"record", "-o", path, "--", program};
  all.insert(all.end(), args.begin(), args.end());
  return run({kcapBinary(), all, std::move(env), false});
}

Outcome kcapOnDouble(const std::vector<std::string>& args, std::map<std::string, std::string> env) {
  env.emplace("KCAP_LIBCUDA", doubleDir() + "/libcuda.so.1");
  return run({kcapBinary(), args, std::move(env), false});
}

}  // namespace kcap_test
