// Shared by the GPU benchmarks (launch_overhead.cpp, capture_throughput.cpp)
// and tests/gpu/programs/content_hash_check.cpp:
// driver-API setup, kernel loading, timing. Driver API only, so that the
// shim's cost is measured on the shortest path to the driver.
#pragma once

#include <cuda.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace bench {

[[noreturn]] inline void die(const char* what, CUresult result) {
  const char* name = nullptr;
  cuGetErrorName(result, &name);
  std::fprintf(stderr, "FAILED: %s: %s (%d)\n", what, name != nullptr ? name : "?", static_cast<int>(result));
  std::exit(1);
}

inline void check(const char* what, CUresult result) {
  if (result != CUDA_SUCCESS) {
    die(what, result);
  }
}
#define BENCH_CHECK(call) ::bench::check(#call, call)

// Device 0's primary context, current on the calling thread.
inline CUcontext primaryContext() {
  BENCH_CHECK(cuInit(0));
  CUdevice device = 0;
  BENCH_CHECK(cuDeviceGet(&device, 0));
  CUcontext context = nullptr;
  BENCH_CHECK(cuDevicePrimaryCtxRetain(&context, device));
  BENCH_CHECK(cuCtxSetCurrent(context));
  return context;
}

inline std::string deviceName() {
  char name[256] = {};
  CUdevice device = 0;
  BENCH_CHECK(cuCtxGetDevice(&device));
  BENCH_CHECK(cuDeviceGetName(name, sizeof name, device));
  return name;
}

// <kernels dir>/<file>: KCAP_KERNELS_DIR in the environment, else the build's.
inline CUfunction loadKernel(const char* file, const char* name) {
  const char* dir = std::getenv("KCAP_KERNELS_DIR");
  const std::string path = std::string(dir != nullptr && dir[0] != '\0' ? dir : KCAP_KERNELS_DIR) + "/" + file;
  CUmodule module = nullptr;
  if (const CUresult r = cuModuleLoad(&module, path.c_str()); r != CUDA_SUCCESS) {
    die(path.c_str(), r);
  }
  CUfunction function = nullptr;
  BENCH_CHECK(cuModuleGetFunction(&function, module, name));
  return function;
}

inline double nowNs() {
  return static_cast<double>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

inline double median(std::vector<double> values) {
  if (values.empty()) {
    return 0;
  }
  std::sort(values.begin(), values.end());
  const size_t middle = values.size() / 2;
  return values.size() % 2 == 1 ? values[middle] : (values[middle - 1] + values[middle]) / 2;
}

inline double minimum(const std::vector<double>& values) {
  return values.empty() ? 0 : *std::min_element(values.begin(), values.end());
}

// Strict unsigned parsing for the benchmarks' flags.
inline unsigned long long number(const char* flag, const char* text) {
  char* end = nullptr;
  const unsigned long long value = std::strtoull(text, &end, 0);
  if (text[0] == '\0' || text[0] == '-' || *end != '\0') {
    std::fprintf(stderr, "%s: not a number: %s\n", flag, text);
    std::exit(2);
  }
  return value;
}

}  // namespace bench
