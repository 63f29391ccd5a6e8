// Integration tests of libkcap_interpose.so: test programs (programs/) run
// under the shim against the driver double (tests/driver_double), no GPU.
//
// For each program: it runs correctly with and without the shim and prints
// the same results (the shim changes nothing); the shim reports nothing on
// stderr; and every hooked entry point was seen as often as the program says
// it called it, every kernel launched as often as the program launched it.
// The programs that take that one path are a table (ShimCase); the rest,
// which run another way, are plain tests.
#include "process_runner.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace kcap_test {
namespace {

using Counts = std::map<std::string, std::uint64_t>;

// The shim's hooked symbols, from the same list the shim is generated from.
const std::vector<std::string>& hookedSymbols() {
  static const std::vector<std::string> symbols = {
#define KCAP_HOOK(api, symbol, version, per_thread, pfn) #symbol,
#include "driver_hooks.def"
#undef KCAP_HOOK
  };
  return symbols;
}

// "<prefix> <name> <count>" lines, summed by name.
Counts countsIn(const std::string& text, const std::string& prefix) {
  Counts counts;
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
  return counts;
}

std::uint64_t countOf(const Counts& counts, const std::string& name) {
  const auto it = counts.find(name);
  return it != counts.end() ? it->second : 0;
}

// A run and what it counted: the shim in its KCAP_STATS_FILE, the program
// on stdout ("made call/kernel" lines).
struct ShimRun {
  Outcome outcome;
  bool hasStats = false;
  Counts callsSeen;
  Counts kernelsSeen;
  Counts callsMade;
  Counts kernelsMade;
};

// `program` (a file name in tests/interpose/programs) with LD_LIBRARY_PATH
// `libraryPath` (empty: unset), extra environment `env`.
ShimRun runProgram(const std::string& program, bool withShim, const std::string& libraryPath,
                   std::map<std::string, std::string> env = {}) {
  RunSpec spec{interposeProgram(program), {}, std::move(env), withShim};
  spec.libraryPath = libraryPath;
  spec.shimStats = withShim;
  ShimRun run;
  run.outcome = kcap_test::run(spec);
  run.hasStats = run.outcome.shimStats.rfind("kcap-stats 1\n", 0) == 0;
  run.callsSeen = countsIn(run.outcome.shimStats, "call");
  run.kernelsSeen = countsIn(run.outcome.shimStats, "kernel");
  run.callsMade = countsIn(run.outcome.out, "made call");
  run.kernelsMade = countsIn(run.outcome.out, "made kernel");
  return run;
}

void expectClean(const Outcome& run) {
  EXPECT_FALSE(run.timedOut) << run.describe();
  EXPECT_EQ(run.exitCode, 0) << run.describe();
  EXPECT_EQ(run.err, "") << run.describe();
}

// Seen == made, exactly, for every hooked symbol and every kernel.
void expectCountsMatch(const ShimRun& run) {
  ASSERT_TRUE(run.hasStats) << "no KCAP_STATS_FILE written\n" << run.outcome.describe();
  for (const std::string& symbol : hookedSymbols()) {
    EXPECT_EQ(countOf(run.callsSeen, symbol), countOf(run.callsMade, symbol)) << "calls of " << symbol;
  }
  for (const auto& [symbol, count] : run.callsSeen) {
    EXPECT_NE(count, 0u) << symbol;
  }
  EXPECT_EQ(run.kernelsSeen, run.kernelsMade);
}

// ---- one program against one driver, without and with the shim -----------------------------

enum class Driver { kPlain, kSymbolic };

std::string driverDir(Driver driver) { return driver == Driver::kPlain ? doubleDir() : symbolicDoubleDir(); }

struct ShimCase {
  const char* name;  // the test's name
  const char* program;
  Driver driver;
  std::optional<Counts> kernels;             // kernels seen, exactly
  Counts calls = {};                         // hooked calls seen, exactly (0: never)
  Counts callsMoreThan = {};                 // hooked calls seen more often than this
  std::vector<std::string> seenAsMade = {};  // seen as often as made, and at least once
};

void PrintTo(const ShimCase& shimCase, std::ostream* out) { *out << shimCase.name; }

const Counts kDirectKernels = {{"axpy", 3}, {"poly_eval", 1}, {"reduce_sum", 1}, {"scale_struct", 1}};
const Counts kProcAddressKernels = {{"axpy", 4}, {"reduce_sum", 2}, {"scale_struct", 1}};
const Counts kProcAddressCalls = {{"cuLaunchKernel", 5}, {"cuLaunchKernel_ptsz", 2}, {"cuGetProcAddress", 2}};
constexpr std::uint64_t kThreadLaunches = 16u * 4u * 1000u;

// cudart's route (proc_address_launch): one dlsym of cuGetProcAddress_v2,
// everything else through cuGetProcAddress. Against both builds of the
// double: one whose lookups return its own functions (like the real driver),
// one whose lookups return the shim's exports (its references to its own
// symbols are preemptible). canonical_address: the driver's answer is the
// program's PLT stub, which leads back into the shim: it must not become a
// wrapper's target.
const ShimCase kShimCases[] = {
    {"DirectLaunchThroughExportedSymbols",
     "direct_launch",
     Driver::kPlain,
     kDirectKernels,
     {{"cuLaunchKernel", 6},
      {"cuLaunchKernel_ptsz", 0},
      {"cuModuleLoad", 1},
      {"cuModuleLoadData", 1},
      {"cuModuleLoadDataEx", 1},
      {"cuModuleLoadFatBinary", 1}}},
    {"DirectLaunchPerThreadDefaultStream",
     "direct_launch_ptsz",
     Driver::kPlain,
     kDirectKernels,
     {{"cuLaunchKernel_ptsz", 6}, {"cuLaunchKernel", 0}, {"cuMemcpyHtoDAsync_v2_ptsz", 1}},
     {},
     {"cuMemcpyHtoD_v2_ptds"}},
    {"ProcAddressLikeCudart",
     "proc_address_launch",
     Driver::kSymbolic,
     kProcAddressKernels,
     kProcAddressCalls,
     {{"cuGetProcAddress_v2", 20}}},
    {"ProcAddressLikeCudartWithPreemptibleDriver",
     "proc_address_launch",
     Driver::kPlain,
     kProcAddressKernels,
     kProcAddressCalls,
     {{"cuGetProcAddress_v2", 20}}},
    {"ProcAddressAnsweredWithTheProgramsPltStub",
     "canonical_address",
     Driver::kPlain,
     Counts{{"axpy", 2}},
     {{"cuLaunchKernel", 2}}},
    {"ProcAddressAnsweredWithTheProgramsPltStubBySymbolicDriver",
     "canonical_address",
     Driver::kSymbolic,
     Counts{{"axpy", 2}},
     {{"cuLaunchKernel", 2}}},
    {"DlsymLaunchKernelEx",
     "dlsym_launch_ex",
     Driver::kPlain,
     Counts{{"axpy", 3}},
     {{"cuLaunchKernelEx", 2}, {"cuLaunchKernelEx_ptsz", 1}, {"cuFuncSetAttribute", 1}}},
    {"DlsymLaunchKernelExWithSymbolicDriver", "dlsym_launch_ex", Driver::kSymbolic, Counts{{"axpy", 3}}},
    // One cooperative launch is refused by the driver.
    {"CooperativeLaunch",
     "cooperative_launch",
     Driver::kPlain,
     Counts{{"reduce_sum", 4}},
     {{"cuLaunchCooperativeKernel", 3}, {"cuLaunchKernelEx", 1}}},
    {"CooperativeLaunchPerThreadDefaultStream",
     "cooperative_launch_ptsz",
     Driver::kPlain,
     std::nullopt,
     {{"cuLaunchCooperativeKernel_ptsz", 3}, {"cuLaunchKernelEx_ptsz", 1}, {"cuLaunchCooperativeKernel", 0}}},
    {"SixteenThreadsFourStreamsThousandLaunches",
     "threads_launch",
     Driver::kPlain,
     Counts{{"axpy", kThreadLaunches}},
     {{"cuLaunchKernel", kThreadLaunches}}},
};

class ShimmedProgram : public ::testing::TestWithParam<ShimCase> {};

TEST_P(ShimmedProgram, RunsUnchangedAndEveryCallIsSeen) {
  const ShimCase& expected = GetParam();
  const std::string library = driverDir(expected.driver);
  const ShimRun plain = runProgram(expected.program, false, library);
  expectClean(plain.outcome);
  const ShimRun run = runProgram(expected.program, true, library);
  expectClean(run.outcome);
  EXPECT_EQ(run.outcome.out, plain.outcome.out) << "the shim changed what the program computed or did";
  expectCountsMatch(run);

  for (const auto& [symbol, count] : expected.calls) {
    EXPECT_EQ(countOf(run.callsSeen, symbol), count) << "calls of " << symbol;
  }
  for (const auto& [symbol, count] : expected.callsMoreThan) {
    EXPECT_GT(countOf(run.callsSeen, symbol), count) << "calls of " << symbol;
  }
  for (const std::string& symbol : expected.seenAsMade) {
    EXPECT_EQ(countOf(run.callsSeen, symbol), countOf(run.callsMade, symbol)) << "calls of " << symbol;
    EXPECT_GT(countOf(run.callsSeen, symbol), 0u) << "calls of " << symbol;
  }
  if (expected.kernels) {
    EXPECT_EQ(run.kernelsSeen, *expected.kernels);
  }
}

INSTANTIATE_TEST_SUITE_P(Interpose, ShimmedProgram, ::testing::ValuesIn(kShimCases),
                         [](const auto& test) { return std::string(test.param.name); });

// ---- programs run otherwise ------------------------------------------------------------------

// KCAP_REAL_LIBCUDA instead of the library path: the shim loads that driver
// first, and the program's dlopen("libcuda.so.1") gets it by soname.
TEST(Interpose, RealLibcudaFromEnvironment) {
  const ShimRun run =
      runProgram("proc_address_launch", true, "", {{"KCAP_REAL_LIBCUDA", symbolicDoubleDir() + "/libcuda.so.1"}});
  expectClean(run.outcome);
  expectCountsMatch(run);
  EXPECT_EQ(countOf(run.callsSeen, "cuLaunchKernel"), 5u);
}

TEST(Interpose, DlsymKeepsTheCallerOfRtldNext) {
  const ShimRun run = runProgram("rtld_next_probe", true, "");
  expectClean(run.outcome);
  EXPECT_NE(run.outcome.out.find("result next 2\n"), std::string::npos) << run.outcome.describe();
}

TEST(Interpose, InertInAProgramWithoutCuda) {
  const ShimRun run = runProgram("rtld_next_probe", true, "");
  expectClean(run.outcome);
  ASSERT_TRUE(run.hasStats) << run.outcome.describe();
  EXPECT_TRUE(run.callsSeen.empty());
  EXPECT_TRUE(run.kernelsSeen.empty());
}

TEST(Interpose, MissingDriverFunctionFailsCleanlyAndIsReportedOnce) {
  const ShimRun run = runProgram("missing_function", true, doubleDir());
  EXPECT_EQ(run.outcome.exitCode, 0) << run.outcome.describe();
  EXPECT_EQ(run.outcome.err, "kcap: the CUDA driver has no cuMemAllocFromPoolAsync; returning CUDA_ERROR_NOT_FOUND\n");
  expectCountsMatch(run);
}

}  // namespace
}  // namespace kcap_test
