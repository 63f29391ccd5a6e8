// Integration tests of libkcap_interpose.so: test programs (programs/) run
// under the shim against the driver double (tests/driver_double), no GPU.
//
// For each program: it runs correctly with and without the shim and prints
// the same results (the shim changes nothing); the shim reports nothing on
// stderr; and every hooked entry point was seen as often as the program says
// it called it, every kernel launched as often as the program launched it.
#include "program_runner.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace kcap_test {
namespace {

// The shim's hooked symbols, from the same list the shim is generated from.
const std::vector<std::string>& hooked_symbols() {
  static const std::vector<std::string> symbols = {
#define KCAP_HOOK(api, symbol, version, per_thread, pfn) #symbol,
#include "driver_hooks.def"
#undef KCAP_HOOK
  };
  return symbols;
}

std::uint64_t count_of(const Counts& counts, const std::string& name) {
  const auto it = counts.find(name);
  return it != counts.end() ? it->second : 0;
}

void expect_clean(const RunResult& run) {
  EXPECT_FALSE(run.timed_out) << run.describe();
  EXPECT_EQ(run.exit_code, 0) << run.describe();
  EXPECT_EQ(run.err, "") << run.describe();
}

// Seen == made, exactly, for every hooked symbol and every kernel.
void expect_counts_match(const RunResult& run) {
  ASSERT_TRUE(run.has_stats) << "no KCAP_STATS_FILE written\n" << run.describe();
  for (const std::string& symbol : hooked_symbols()) {
    EXPECT_EQ(count_of(run.calls_seen, symbol), count_of(run.calls_made, symbol)) << "calls of " << symbol;
  }
  for (const auto& [symbol, count] : run.calls_seen) {
    EXPECT_NE(count, 0u) << symbol;
  }
  EXPECT_EQ(run.kernels_seen, run.kernels_made);
}

// Runs `program` against `driver_dir` without and with the shim, checks both
// runs and returns the one with the shim.
RunResult run_both_ways(const std::string& program, const std::string& driver_dir) {
  RunOptions options;
  options.library_path = driver_dir;
  options.with_shim = false;
  const RunResult plain = run_program(program, options);
  expect_clean(plain);
  options.with_shim = true;
  RunResult shimmed = run_program(program, options);
  expect_clean(shimmed);
  EXPECT_EQ(shimmed.out, plain.out) << "the shim changed what the program computed or did";
  expect_counts_match(shimmed);
  return shimmed;
}

TEST(Interpose, DirectLaunchThroughExportedSymbols) {
  const RunResult run = run_both_ways("direct_launch", driver_double_dir());
  EXPECT_EQ(count_of(run.calls_seen, "cuLaunchKernel"), 6u);
  EXPECT_EQ(count_of(run.calls_seen, "cuLaunchKernel_ptsz"), 0u);
  EXPECT_EQ(count_of(run.calls_seen, "cuModuleLoad"), 1u);
  EXPECT_EQ(count_of(run.calls_seen, "cuModuleLoadData"), 1u);
  EXPECT_EQ(count_of(run.calls_seen, "cuModuleLoadDataEx"), 1u);
  EXPECT_EQ(count_of(run.calls_seen, "cuModuleLoadFatBinary"), 1u);
  EXPECT_EQ(run.kernels_seen, (Counts{{"axpy", 3}, {"poly_eval", 1}, {"reduce_sum", 1}, {"scale_struct", 1}}));
}

TEST(Interpose, DirectLaunchPerThreadDefaultStream) {
  const RunResult run = run_both_ways("direct_launch_ptsz", driver_double_dir());
  EXPECT_EQ(count_of(run.calls_seen, "cuLaunchKernel_ptsz"), 6u);
  EXPECT_EQ(count_of(run.calls_seen, "cuLaunchKernel"), 0u);
  EXPECT_EQ(count_of(run.calls_seen, "cuMemcpyHtoD_v2_ptds"), count_of(run.calls_made, "cuMemcpyHtoD_v2_ptds"));
  EXPECT_GT(count_of(run.calls_seen, "cuMemcpyHtoD_v2_ptds"), 0u);
  EXPECT_EQ(count_of(run.calls_seen, "cuMemcpyHtoDAsync_v2_ptsz"), 1u);
  EXPECT_EQ(run.kernels_seen, (Counts{{"axpy", 3}, {"poly_eval", 1}, {"reduce_sum", 1}, {"scale_struct", 1}}));
}

// cudart's route: one dlsym of cuGetProcAddress_v2, everything else through
// cuGetProcAddress. Against both builds of the double: one whose lookups
// return its own functions (like the real driver), one whose lookups return
// the shim's exports (its references to its own symbols are preemptible).
void check_proc_address_program(const std::string& driver_dir) {
  const RunResult run = run_both_ways("proc_address_launch", driver_dir);
  EXPECT_EQ(count_of(run.calls_seen, "cuLaunchKernel"), 5u);
  EXPECT_EQ(count_of(run.calls_seen, "cuLaunchKernel_ptsz"), 2u);
  EXPECT_EQ(count_of(run.calls_seen, "cuGetProcAddress"), 2u);
  EXPECT_GT(count_of(run.calls_seen, "cuGetProcAddress_v2"), 20u);
  EXPECT_EQ(run.kernels_seen, (Counts{{"axpy", 4}, {"reduce_sum", 2}, {"scale_struct", 1}}));
}

TEST(Interpose, ProcAddressLikeCudart) { check_proc_address_program(symbolic_driver_double_dir()); }

TEST(Interpose, ProcAddressLikeCudartWithPreemptibleDriver) { check_proc_address_program(driver_double_dir()); }

// KCAP_REAL_LIBCUDA instead of the library path: the shim loads that driver
// first, and the program's dlopen("libcuda.so.1") gets it by soname.
TEST(Interpose, RealLibcudaFromEnvironment) {
  RunOptions options;
  options.real_libcuda = symbolic_driver_double_dir() + "/libcuda.so.1";
  const RunResult run = run_program("proc_address_launch", options);
  expect_clean(run);
  expect_counts_match(run);
  EXPECT_EQ(count_of(run.calls_seen, "cuLaunchKernel"), 5u);
}

// The driver's answer is the program's PLT stub, which leads back into the
// shim: it must not become a wrapper's target.
TEST(Interpose, ProcAddressAnsweredWithTheProgramsPltStub) {
  for (const std::string& driver : {driver_double_dir(), symbolic_driver_double_dir()}) {
    const RunResult run = run_both_ways("canonical_address", driver);
    EXPECT_EQ(count_of(run.calls_seen, "cuLaunchKernel"), 2u);
    EXPECT_EQ(run.kernels_seen, (Counts{{"axpy", 2}}));
  }
}

TEST(Interpose, DlsymLaunchKernelEx) {
  const RunResult run = run_both_ways("dlsym_launch_ex", driver_double_dir());
  EXPECT_EQ(count_of(run.calls_seen, "cuLaunchKernelEx"), 2u);
  EXPECT_EQ(count_of(run.calls_seen, "cuLaunchKernelEx_ptsz"), 1u);
  EXPECT_EQ(count_of(run.calls_seen, "cuFuncSetAttribute"), 1u);
  EXPECT_EQ(run.kernels_seen, (Counts{{"axpy", 3}}));
}

TEST(Interpose, DlsymLaunchKernelExWithSymbolicDriver) {
  const RunResult run = run_both_ways("dlsym_launch_ex", symbolic_driver_double_dir());
  EXPECT_EQ(run.kernels_seen, (Counts{{"axpy", 3}}));
}

TEST(Interpose, CooperativeLaunch) {
  const RunResult run = run_both_ways("cooperative_launch", driver_double_dir());
  EXPECT_EQ(count_of(run.calls_seen, "cuLaunchCooperativeKernel"), 3u);  // one refused by the driver
  EXPECT_EQ(count_of(run.calls_seen, "cuLaunchKernelEx"), 1u);
  EXPECT_EQ(run.kernels_seen, (Counts{{"reduce_sum", 4}}));
}

TEST(Interpose, CooperativeLaunchPerThreadDefaultStream) {
  const RunResult run = run_both_ways("cooperative_launch_ptsz", driver_double_dir());
  EXPECT_EQ(count_of(run.calls_seen, "cuLaunchCooperativeKernel_ptsz"), 3u);
  EXPECT_EQ(count_of(run.calls_seen, "cuLaunchKernelEx_ptsz"), 1u);
  EXPECT_EQ(count_of(run.calls_seen, "cuLaunchCooperativeKernel"), 0u);
}

TEST(Interpose, SixteenThreadsFourStreamsThousandLaunches) {
  const RunResult run = run_both_ways("threads_launch", driver_double_dir());
  EXPECT_EQ(count_of(run.calls_seen, "cuLaunchKernel"), 16u * 4u * 1000u);
  EXPECT_EQ(run.kernels_seen, (Counts{{"axpy", 16u * 4u * 1000u}}));
}

TEST(Interpose, DlsymKeepsTheCallerOfRtldNext) {
  RunOptions options;
  const RunResult run = run_program("rtld_next_probe", options);
  expect_clean(run);
  EXPECT_NE(run.out.find("result next 2\n"), std::string::npos) << run.describe();
}

TEST(Interpose, InertInAProgramWithoutCuda) {
  RunOptions options;
  const RunResult run = run_program("rtld_next_probe", options);
  expect_clean(run);
  ASSERT_TRUE(run.has_stats) << run.describe();
  EXPECT_TRUE(run.calls_seen.empty());
  EXPECT_TRUE(run.kernels_seen.empty());
}

TEST(Interpose, MissingDriverFunctionFailsCleanlyAndIsReportedOnce) {
  RunOptions options;
  options.library_path = driver_double_dir();
  const RunResult run = run_program("missing_function", options);
  EXPECT_EQ(run.exit_code, 0) << run.describe();
  EXPECT_EQ(run.err, "kcap: the CUDA driver has no cuMemAllocManaged; returning CUDA_ERROR_NOT_FOUND\n");
  expect_counts_match(run);
}

}  // namespace
}  // namespace kcap_test
