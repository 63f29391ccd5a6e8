// Shared by the runtime-API test programs of tests/gpu (nvcc, cudart static or
// shared). Like tests/interpose/programs/driver_program.h, a program checks its
// own results and prints, on stdout, what run_under_shim.py compares and checks:
//
//   result <what> <value>           what the kernels computed
//   made kernel <name> <count>      launches made, by kernel name
//   made call <symbol> <count>      driver entry point cudart must have used
//   made launches <count>           all launches made (nothing else launched)
//
// Kernel names are what the driver knows them by: extern "C" kernels keep
// their own names, others are mangled.
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

namespace test {

[[noreturn]] inline void fail(const char* file, int line, const char* what, const char* why) {
  std::fprintf(stderr, "FAILED: %s:%d: %s: %s\n", file, line, what, why);
  std::exit(1);
}

class Made {
 public:
  void launch(const std::string& kernel, int count = 1) {
    kernels_[kernel] += count;
    total_ += count;
  }
  void call(const std::string& symbol, int count) { calls_[symbol] += count; }
  void print() const {
    for (const auto& [name, n] : kernels_) {
      std::printf("made kernel %s %d\n", name.c_str(), n);
    }
    for (const auto& [symbol, n] : calls_) {
      std::printf("made call %s %d\n", symbol.c_str(), n);
    }
    std::printf("made launches %d\n", total_);
    std::fflush(stdout);
  }

 private:
  std::map<std::string, int> kernels_;
  std::map<std::string, int> calls_;
  int total_ = 0;
};

}  // namespace test

// Exits with the error's name when a runtime call fails.
#define CUDA_CHECK(call)                                                              \
  do {                                                                                \
    const cudaError_t cuda_check_error_ = (call);                                     \
    if (cuda_check_error_ != cudaSuccess)                                             \
      ::test::fail(__FILE__, __LINE__, #call, cudaGetErrorString(cuda_check_error_)); \
  } while (0)

// Checks a <<<>>> launch (which returns nothing) right after it was made.
#define LAUNCH_CHECK() CUDA_CHECK(cudaGetLastError())

#define CHECK(condition)                                                            \
  do {                                                                              \
    if (!(condition)) ::test::fail(__FILE__, __LINE__, #condition, "check failed"); \
  } while (0)
