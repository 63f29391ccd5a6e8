// Shared by the test programs that tests/interpose runs with and without the
// shim. They use the driver API only (cudart cannot run on the driver
// double), check their own results, and print to stdout:
//
//   result <what> <value>         what the kernels computed
//   made call <symbol> <count>    driver calls made, by exported symbol
//   made kernel <name> <count>    launches made, by kernel name
//
// The runner compares stdout with and without the shim (the shim must change
// nothing) and the "made" lines with what the shim counted.
#pragma once

#include <cuda.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace test {

class Tally {
 public:
  void add(const std::string& what, unsigned long long n = 1) {
    std::lock_guard lock(mutex_);
    counts_[what] += n;
  }
  void print(const char* prefix) const {
    std::lock_guard lock(mutex_);
    for (const auto& [what, n] : counts_) {
      std::printf("%s %s %llu\n", prefix, what.c_str(), n);
    }
  }

 private:
  mutable std::mutex mutex_;
  std::map<std::string, unsigned long long> counts_;
};

inline Tally& callsMade() {
  static Tally tally;
  return tally;
}

inline Tally& launchesMade() {
  static Tally tally;
  return tally;
}

inline void printMade() {
  callsMade().print("made call");
  launchesMade().print("made kernel");
  std::fflush(stdout);
}

[[noreturn]] [[gnu::format(printf, 1, 2)]] inline void fail(const char* format, ...) {
  std::va_list args;
  va_start(args, format);
  std::fputs("FAILED: ", stderr);
  std::vfprintf(stderr, format, args);
  std::fputc('\n', stderr);
  va_end(args);
  std::exit(1);
}

inline CUresult checked(const char* symbol, CUresult result, const char* file, int line) {
  callsMade().add(symbol);
  if (result != CUDA_SUCCESS) {
    fail("%s:%d: %s returned %d", file, line, symbol, static_cast<int>(result));
  }
  return result;
}

inline std::string readFile(const std::string& path) {
  std::FILE* in = std::fopen(path.c_str(), "rb");
  if (in == nullptr) {
    fail("cannot open %s", path.c_str());
  }
  std::string bytes;
  char chunk[4096];
  std::size_t n = 0;
  while ((n = std::fread(chunk, 1, sizeof chunk, in)) > 0) {
    bytes.append(chunk, n);
  }
  std::fclose(in);
  return bytes;
}

// KCAP_KERNELS_DIR in the environment overrides the build's directory, for
// running these programs on another machine (a GPU host).
inline std::string kernelPath(const char* file) {
  const char* dir = std::getenv("KCAP_KERNELS_DIR");
  return std::string(dir != nullptr && dir[0] != '\0' ? dir : KCAP_KERNELS_DIR) + "/" + file;
}
inline std::string kernelImage(const char* file) { return readFile(kernelPath(file)); }

// tma_scale(const __grid_constant__ CUtensorMap map, float* out, int n), for
// the driver double only: its PTX body does nothing; the double runs its host
// version (tests/driver_double/host_kernels.cpp), out[i] = 2 * src[i], src
// being the address the double's tensor maps hold in their first 8 bytes.
inline constexpr char kTmaScalePtx[] =
    "//\n"
    "// tma_scale: driver-double test material (no GPU semantics)\n"
    ".version 8.0\n"
    ".target sm_90\n"
    ".address_size 64\n"
    "\n"
    ".visible .entry tma_scale(\n"
    "\t.param .align 64 .b8 tma_scale_param_0[128],\n"
    "\t.param .u64 tma_scale_param_1,\n"
    "\t.param .u32 tma_scale_param_2\n"
    ")\n"
    "{\n"
    "\tret;\n"
    "}\n";

// What a real driver did where it need not behave like the double: printed
// on stderr with KCAP_TEST_REAL_DRIVER=1 only.
[[gnu::format(printf, 1, 2)]] inline void note(const char* format, ...) {
  if (std::getenv("KCAP_TEST_REAL_DRIVER") == nullptr) {
    return;
  }
  std::va_list args;
  va_start(args, format);
  std::fputs("note: ", stderr);
  std::vfprintf(stderr, format, args);
  std::fputc('\n', stderr);
  va_end(args);
}

// A driver function obtained by lookup, with the symbol it stands for.
template <class Pfn>
struct Entry {
  const char* symbol;
  Pfn fn;
};

inline void announce(const char* name) {
  static const bool tracing = std::getenv("TEST_TRACE_CALLS") != nullptr;
  if (tracing) std::fprintf(stderr, "calling %s\n", name);
}

}  // namespace test

#define TEST_STR_(x) #x
#define TEST_STR(x) TEST_STR_(x)

// Calls a driver function linked by name; records the call under the symbol
// the name binds to once cuda.h's macros have applied (cuMemAlloc ->
// cuMemAlloc_v2, cuLaunchKernel -> cuLaunchKernel_ptsz in a per-thread build)
// and exits on failure.
// With TEST_TRACE_CALLS set, each call is named on stderr before it is made,
// so a program that crashes inside the driver shows where.
#define DRIVER(fn, ...) \
  (::test::announce(TEST_STR(fn)), ::test::checked(TEST_STR(fn), fn(__VA_ARGS__), __FILE__, __LINE__))

// The same for a test::Entry.
#define CALL(entry, ...) ::test::checked((entry).symbol, (entry).fn(__VA_ARGS__), __FILE__, __LINE__)

// A property of the driver double that a real driver need not have (the
// same pointer from two lookups): checked against the double, only reported
// with KCAP_TEST_REAL_DRIVER=1.
#define CHECK_DOUBLE(condition)                                                       \
  do {                                                                                \
    if (std::getenv("KCAP_TEST_REAL_DRIVER") != nullptr)                              \
      std::fprintf(stderr, "note: %s: %s\n", #condition, (condition) ? "yes" : "no"); \
    else                                                                              \
      CHECK(condition);                                                               \
  } while (0)

#define CHECK(condition)                                                                       \
  do {                                                                                         \
    if (!(condition)) ::test::fail("%s:%d: check failed: %s", __FILE__, __LINE__, #condition); \
  } while (0)

namespace test {

// The sum of `count` floats at `device`, copied back (a program's checksum
// line).
inline double deviceSum(CUdeviceptr device, std::size_t count) {
  std::vector<float> values(count);
  DRIVER(cuMemcpyDtoH, values.data(), device, count * sizeof(float));
  double total = 0;
  for (const float v : values) total += v;
  return total;
}

// Device 0's primary context made current and axpy loaded from kernels/:
// how most test programs begin.
inline CUfunction axpyOnDeviceZero() {
  CUdevice device = 0;
  CUcontext context = nullptr;
  DRIVER(cuInit, 0);
  DRIVER(cuDeviceGet, &device, 0);
  DRIVER(cuDevicePrimaryCtxRetain, &context, device);
  DRIVER(cuCtxSetCurrent, context);
  CUmodule module = nullptr;
  CUfunction axpy = nullptr;
  const std::string image = kernelImage("axpy.fatbin");
  DRIVER(cuModuleLoadData, &module, image.data());
  DRIVER(cuModuleGetFunction, &axpy, module, "axpy");
  return axpy;
}

}  // namespace test
