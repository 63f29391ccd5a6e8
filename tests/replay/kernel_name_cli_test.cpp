// Kernel-name patterns on names a trace controls: `kcap replay --kernel`,
// `--override KERNEL=`, `kcap bisect --kernel` and `kcap record --include`.
// A trace's kernel names are untrusted: a pattern is searched in time linear
// in the name, without recursion on it, so a name of 60,000 characters
// neither overflows the stack nor takes seconds. Invalid patterns are usage
// errors (exit 2) that say what is wrong before anything runs.
#include "process_runner.h"
#include "sample_trace.h"
#include "trace_files.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace kcap_test {
namespace {

constexpr int kExitTrace = 1, kExitUsage = 2;

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// 'a', then 60,000 'x', then 'b': what a backtracking engine recurses on
// once per character for 'a.*b'.
const std::string& longName() {
  static const std::string name = "a" + std::string(60000, 'x') + "b";
  return name;
}

class KernelNames : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new kcap::test::TempDir("kcap-names");
    kcap::test::SampleOptions options;
    options.axpyName = longName();
    kcap::test::writeSampleTrace(trace(), options);
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  // The sample trace (tests/support/sample_trace.h) with axpy renamed to longName().
  static std::string trace() { return dir_->file("long-name.kcap"); }
  static std::string file(const std::string& name) { return dir_->file(name); }

  // Runs kcap against the double and requires that it ended by itself,
  // within seconds.
  static Outcome kcapTimed(const std::vector<std::string>& args) {
    const auto start = std::chrono::steady_clock::now();
    Outcome run = kcapOnDouble(args);
    const auto seconds =
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - start).count();
    EXPECT_EQ(run.signal, 0) << run.describe();
    EXPECT_FALSE(run.timedOut) << run.describe();
    EXPECT_LT(seconds, 30) << run.describe();
    return run;
  }

 private:
  static kcap::test::TempDir* dir_;
};

kcap::test::TempDir* KernelNames::dir_ = nullptr;

TEST_F(KernelNames, ReplayKernelSelectsALongNameWithoutASignal) {
  const Outcome run = kcapTimed({"replay", trace(), "--kernel", "a.*b"});
  // The sample's three axpy launches are selected (not the capturing one,
  // not poly_eval) and replayed; the double has no kernel of that name.
  EXPECT_EQ(run.exitCode, kExitTrace) << run.describe();
  EXPECT_TRUE(has(run.out, "3 launches: 3 ERROR")) << run.describe();
  EXPECT_TRUE(
      has(run.out, "launch 2 (" + longName() + "): ERROR: kernel " + longName() + " not found in the recorded image"))
      << run.describe();
  EXPECT_FALSE(has(run.out, "killed by signal")) << run.describe();

  const Outcome none = kcapTimed({"replay", trace(), "--kernel", "a.*c$"});
  EXPECT_EQ(none.exitCode, kExitUsage) << none.describe();
  EXPECT_TRUE(has(none.err, "no launch of a kernel matching a.*c$")) << none.describe();
}

// The override's pattern is searched in the name in the replaying process
// (isolated: a crash there shows as a launch that "ended ... killed by signal").
TEST_F(KernelNames, ReplayOverrideSearchesALongNameWithoutASignal) {
  const std::string image = kernelFile("axpy.fatbin");
  const Outcome run = kcapTimed({"replay", trace(), "--launch", "0", "--override", "(a|x)*b=" + image});
  EXPECT_EQ(run.exitCode, kExitTrace) << run.describe();
  EXPECT_TRUE(
      has(run.out, "launch 0 (" + longName() + "): ERROR: kernel " + longName() + " not found in override " + image))
      << run.describe();
  EXPECT_FALSE(has(run.out, "killed by signal")) << run.describe();
}

TEST_F(KernelNames, BisectKernelSelectsALongNameWithoutASignal) {
  const Outcome run = kcapTimed({"bisect", trace(), "--kernel", "a.*b"});
  EXPECT_NE(run.exitCode, kExitUsage) << run.describe();
  EXPECT_TRUE(has(run.out, ": 3 launches, each from its recorded pre-state")) << run.describe();
}

TEST_F(KernelNames, InvalidPatternsAreUsageErrorsWithTheEnginesReason) {
  const Outcome kernel = kcapTimed({"replay", trace(), "--kernel", "(unclosed"});
  EXPECT_EQ(kernel.exitCode, kExitUsage) << kernel.describe();
  EXPECT_TRUE(has(kernel.err, "--kernel (unclosed: not a valid regular expression (missing ): (unclosed)"))
      << kernel.describe();

  const Outcome override = kcapTimed({"replay", trace(), "--override", "a[z-a]=x.cubin"});
  EXPECT_EQ(override.exitCode, kExitUsage) << override.describe();
  EXPECT_TRUE(has(override.err, "a[z-a] is not a valid regular expression (invalid character class range: z-a)"))
      << override.describe();

  const Outcome bisect = kcapTimed({"bisect", trace(), "--kernel", "a**"});
  EXPECT_EQ(bisect.exitCode, kExitUsage) << bisect.describe();
  EXPECT_TRUE(has(bisect.err, "--kernel a**: not a valid regular expression (bad repetition operator: **)"))
      << bisect.describe();
}

// The shim's filters are checked by `kcap record` with the shim's own
// parser, before the program starts: a construct the shim's matcher does not
// have (lookahead here) is refused there, not when the first kernel launches.
TEST_F(KernelNames, RecordRefusesAFilterTheShimCannotMatchBeforeTheProgramRuns) {
  const std::string out = file("never.kcap");
  const std::string marker = file("ran");
  const Outcome run =
      kcapTimed({"record", "--include", "gemm(?=_sm90)", "-o", out, "--", "/bin/sh", "-c", "touch " + marker});
  EXPECT_EQ(run.exitCode, kExitUsage) << run.describe();
  EXPECT_TRUE(has(run.err, "--include \"gemm(?=_sm90)\": not a valid regular expression (at position 4: "))
      << run.describe();
  EXPECT_NE(access(marker.c_str(), F_OK), 0) << "the program ran";
  EXPECT_NE(access(out.c_str(), F_OK), 0) << "a trace was written";

  const Outcome exclude = kcapTimed({"record", "--exclude", "x{2,1}", "-o", out, "--", "/bin/true"});
  EXPECT_EQ(exclude.exitCode, kExitUsage) << exclude.describe();
  EXPECT_TRUE(has(exclude.err, "--exclude \"x{2,1}\": not a valid regular expression (at position 1: "))
      << exclude.describe();
}

}  // namespace
}  // namespace kcap_test
