// Runs a test program in a child process, with or without the shim preloaded
// and against a chosen libcuda, and collects what it printed and what the
// shim counted (KCAP_STATS_FILE).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>

namespace kcap_test {

using Counts = std::map<std::string, std::uint64_t>;

struct RunOptions {
  bool with_shim = true;
  std::string library_path;  // LD_LIBRARY_PATH (a driver double's directory); empty: unset
  std::string real_libcuda;  // KCAP_REAL_LIBCUDA; empty: unset
  std::chrono::seconds timeout{120};
};

struct RunResult {
  int exit_code = -1;  // -1 if the program did not exit normally
  int signal = 0;      // the signal that ended it, if any
  bool timed_out = false;
  std::string out;
  std::string err;

  // What the shim counted (KCAP_STATS_FILE), runs with the shim only.
  bool has_stats = false;
  Counts calls_seen;
  Counts kernels_seen;
  // What the program says it did ("made call/kernel" lines on stdout).
  Counts calls_made;
  Counts kernels_made;

  std::string describe() const;  // for failure messages
};

// `program` is a file name in the test programs' directory.
RunResult run_program(const std::string& program, const RunOptions& options);

std::string shim_path();
std::string driver_double_dir();           // plain ELF semantics
std::string symbolic_driver_double_dir();  // -Bsymbolic-functions, like a real driver

}  // namespace kcap_test
