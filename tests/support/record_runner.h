// Runs a program in a child process for the recording and replay tests
// (tests/record, tests/replay): against the driver double, with or without
// the shim preloaded, with extra environment variables and arguments;
// collects its output and how it ended. Library kcap_test_runner
// (tests/support/CMakeLists.txt), which knows the build's paths.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

namespace kcap_test {

struct RunSpec {
  std::string program;  // a path
  std::vector<std::string> args;
  std::map<std::string, std::string> env;  // added to the cleaned environment
  bool withShim = true;                    // LD_PRELOAD the shim
  std::chrono::seconds timeout{120};
  // Memory the program may take, 0: no limit. Its address space (ulimit -v)
  // normally; under AddressSanitizer, which reserves terabytes of address
  // space, its resident memory and largest allocation (ASan's
  // hard_rss_limit_mb and max_allocation_size_mb, which end it with a report).
  uint64_t memoryLimitBytes = 0;
};

struct Outcome {
  int exitCode = -1;  // -1 unless it exited
  int signal = 0;     // the signal that ended it
  bool timedOut = false;
  std::string out;
  std::string err;
  std::string describe() const;
};

Outcome run(const RunSpec& spec);

// `kcap record -o PATH -- PROGRAM ARGS...`, `env` added to its environment.
Outcome kcapRecord(const std::string& path, const std::string& program, const std::vector<std::string>& args = {},
                   std::map<std::string, std::string> env = {});
// `kcap ARGS...` with the driver double as the driver replay opens
// (KCAP_LIBCUDA), unless `env` names another.
Outcome kcapOnDouble(const std::vector<std::string>& args, std::map<std::string, std::string> env = {});

// Paths of the build.
std::string shimPath();
std::string doubleDir();
std::string kcapBinary();
std::string scenarioProgram();                          // tests/record/programs/record_scenarios
std::string threadsProgram();                           // tests/record/programs/record_threads
std::string interposeProgram(const std::string& name);  // tests/interpose/programs/<name>
std::string kernelFile(const std::string& name);        // kernels/<name>

}  // namespace kcap_test
