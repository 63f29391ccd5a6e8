// Runs a program in a child process for the end-to-end tests (tests/interpose,
// tests/record, tests/replay): against a driver double, with or without the
// shim preloaded, with extra environment variables and arguments, under a
// time limit and optionally a memory limit; collects what it printed, how it
// ended and, on request, what the shim counted (KCAP_STATS_FILE). Library
// kcap_test_runner (tests/support/CMakeLists.txt), which knows the build's
// paths.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace kcap_test {

// Paths of the build.
std::string shimPath();
std::string doubleDir();          // the driver double, plain ELF semantics
std::string symbolicDoubleDir();  // the double linked -Bsymbolic-functions, like a real driver
std::string kcapBinary();
std::string scenarioProgram();                          // tests/record/programs/record_scenarios
std::string threadsProgram();                           // tests/record/programs/record_threads
std::string graphProgram();                             // tests/record/programs/graph_scenarios
std::string ipcImportProgram();                         // tests/record/programs/ipc_import
std::string peerCopyProgram();                          // tests/record/programs/peer_copy
std::string twoDeviceProgram();                         // tests/record/programs/two_device_work
std::string managedMemoryProgram();                     // tests/record/programs/managed_memory
std::string vmmImportProgram();                         // tests/record/programs/vmm_import
std::string lateAllocationProgram();                    // tests/record/programs/late_allocation
std::string ncclCollectivesProgram();                   // tests/record/programs/nccl_collectives
std::string interposeProgram(const std::string& name);  // tests/interpose/programs/<name>
std::string kernelFile(const std::string& name);        // kernels/<name>

// The child's environment is the runner's without LD_PRELOAD, LD_LIBRARY_PATH
// and KCAP_* (they would change what is loaded or recorded), plus what the
// spec sets. Under AddressSanitizer its runtime is preloaded first, ahead of
// the shim (ASan insists on being first in the library list).
struct RunSpec {
  std::string program;  // a path
  std::vector<std::string> args;
  std::map<std::string, std::string> env;  // set last: overrides what the runner sets
  bool withShim = true;                    // LD_PRELOAD the shim
  std::chrono::seconds timeout{120};       // then SIGKILL, and Outcome::timedOut
  // Memory the program may take, 0: no limit. Its address space (ulimit -v)
  // normally; under AddressSanitizer, which reserves terabytes of address
  // space, its resident memory and largest allocation (ASan's
  // hard_rss_limit_mb and max_allocation_size_mb, which end it with a report).
  uint64_t memoryLimitBytes = 0;
  std::string libraryPath = doubleDir();  // LD_LIBRARY_PATH, where libcuda.so.1 is found; empty: unset
  bool shimStats = false;                 // collect KCAP_STATS_FILE in Outcome::shimStats (with the shim)
};

struct Outcome {
  int exitCode = -1;  // -1 unless it exited
  int signal = 0;     // the signal that ended it
  bool timedOut = false;
  std::string out;
  std::string err;               // without sanitizer noise that says nothing of the program
  std::string shimStats;         // the KCAP_STATS_FILE the shim wrote, when RunSpec::shimStats
  std::string describe() const;  // for failure messages
};

Outcome run(const RunSpec& spec);

// `kcap record -o PATH -- PROGRAM ARGS...`, `env` added to its environment.
Outcome kcapRecord(const std::string& path, const std::string& program, const std::vector<std::string>& args = {},
                   std::map<std::string, std::string> env = {});
// `kcap ARGS...` with the driver double as the driver replay opens
// (KCAP_LIBCUDA), unless `env` names another.
Outcome kcapOnDouble(const std::vector<std::string>& args, std::map<std::string, std::string> env = {});

}  // namespace kcap_test
