// `kcap replay --check`: the replay-time checkers (determinism, unwritten
// outputs, uninitialised reads, aliasing, overruns, compute-sanitizer) on
// the replay_scenarios checks program, recorded against the driver double.
#include "replay_cli.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <sys/stat.h>

#include <cstring>
#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <vector>

namespace kcap_test {
namespace {

using namespace kcap_test::replay_cli;  // the replay tests' shared helpers (replay_cli.h)

class Checks : public RecordedTraces<Checks> {
 protected:
  static std::string trace() { return scenario("checks"); }
  // `kcap replay --launch N --check NAME --json`: the check's JSON object.
  static std::string check(uint64_t launch, const std::string& name, int expectedExit,
                           std::vector<std::string> extra = {}, std::map<std::string, std::string> env = {}) {
    std::vector<std::string> args = {trace(), "--launch", std::to_string(launch), "--check", name, "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    const Outcome run = replay(args, std::move(env));
    EXPECT_EQ(run.exitCode, expectedExit) << run.describe();
    EXPECT_TRUE(balancedJson(run.out)) << run.out;
    const std::string object = jsonLaunch(run.out, launch);
    const size_t at = object.find("{\"name\":\"" + name + "\"");
    EXPECT_NE(at, std::string::npos) << run.out;
    return at == std::string::npos ? std::string() : object.substr(at);
  }
};

bool has(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

TEST_F(Checks, DeterminismFlagsTheRacySumAndNotAxpy) {
  const std::string racy = check(1, "determinism", kExitDiffers, {"--runs", "4"});
  EXPECT_TRUE(has(racy, "\"status\":\"finding\"")) << racy;
  EXPECT_TRUE(has(racy, "over 4 runs")) << racy;
  // sum is param 1, 4 bytes; the float's low byte varies, first at offset 0
  EXPECT_TRUE(std::regex_search(racy, std::regex("param 1 \\(0x[0-9a-f]+, 4 bytes\\): [1-4] bytes vary between runs, "
                                                 "first at offset [0-3]")))
      << racy;
  const std::string clean = check(0, "determinism", kExitOk);
  EXPECT_TRUE(has(clean, "\"status\":\"clean\"")) << clean;
  EXPECT_TRUE(has(clean, "5 runs from the same pre-state gave identical outputs")) << clean;
}

TEST_F(Checks, UnwrittenFindsTheOutputsFillEmptyLeavesAtThePoison) {
  // z's first half (512 floats) changed from 0 to x[i] = 1 + i/8: the bytes of
  // those floats that are not zero.
  uint64_t changed = 0;
  for (int i = 0; i < 512; ++i) {
    const float v = 1.0f + static_cast<float>(i) / 8.0f;
    unsigned char bytes[4];
    std::memcpy(bytes, &v, 4);
    for (const unsigned char b : bytes) {
      changed += b != 0;
    }
  }
  const std::string found = check(2, "unwritten", kExitDiffers);
  EXPECT_TRUE(has(found, "\"status\":\"finding\"")) << found;
  EXPECT_TRUE(has(found, "param 1 (0x")) << found;
  EXPECT_TRUE(has(found, ", 4096 bytes): " + std::to_string(changed) +
                             " bytes the recorded launch changed were left unwritten, first at offset 2"))
      << found;
  EXPECT_TRUE(has(found, "; 0 bytes written that the recording left unchanged")) << found;
  const std::string clean = check(0, "unwritten", kExitOk);
  EXPECT_TRUE(has(clean, "\"status\":\"clean\"")) << clean;
  EXPECT_TRUE(has(clean, "\"summary\":\"0 bytes the recorded launch changed were not written")) << clean;
}

TEST_F(Checks, UnwrittenFindsTheHolesSkipRowsLeaves) {
  // 1024 floats in rows of 8, elements 6 and 7 of each never written: 127
  // holes of 8 bytes before the last written element (the last row's tail
  // is past it, as a slice's would be).
  const std::string found = check(7, "unwritten", kExitDiffers);
  EXPECT_TRUE(has(found, "\"status\":\"finding\"")) << found;
  EXPECT_TRUE(has(found,
                  ", 4096 bytes): 1016 bytes never written by the launch, between bytes it writes (holes in "
                  "its output), first at offset 24"))
      << found;
  EXPECT_TRUE(has(found, "; 1016 bytes never written between bytes it writes; ")) << found;
}

TEST_F(Checks, UninitPoisonsThePaddingNobodyWrote) {
  const std::string found = check(3, "uninit", kExitDiffers);
  EXPECT_TRUE(has(found, "\"status\":\"finding\"")) << found;
  EXPECT_TRUE(has(found, "when 4096 never-written bytes were poisoned")) << found;
  EXPECT_TRUE(has(found, "poisoned param 0 (0x")) << found;
  EXPECT_TRUE(has(found, ", 8192 bytes): 4096 never-written bytes, first at offset 4096")) << found;
  EXPECT_TRUE(std::regex_search(found, std::regex("param 1 \\(0x[0-9a-f]+, 4096 bytes\\): [0-9]+ bytes of output "
                                                  "changed with 0xFF \\(NaN\\), first at offset 0")))
      << found;
  // 0 * NaN is NaN, 0 * a large finite value is 0: NaN changes it, the
  // large values do not (random bytes may, when they make a NaN or an infinity).
  EXPECT_TRUE(has(found, "(changed with 0xFF (NaN)")) << found;
  EXPECT_FALSE(has(found, "0x7B (large positive)")) << found;
  // axpy's x and y were copied in whole: nothing to poison
  const std::string clean = check(0, "uninit", kExitOk);
  EXPECT_TRUE(has(clean, "every byte of the pre-state was written before the launch")) << clean;
}

// A max ignores a NaN: the padding it reads shows with large finite values.
TEST_F(Checks, UninitFindsThePaddingAMaxReadsWhereNaNAloneWouldNot) {
  const std::string found = check(8, "uninit", kExitDiffers);
  EXPECT_TRUE(has(found, "\"status\":\"finding\"")) << found;
  EXPECT_TRUE(has(found, "when 4096 never-written bytes were poisoned")) << found;
  EXPECT_FALSE(has(found, "changed with 0xFF (NaN)")) << found;
  EXPECT_TRUE(has(found, "0x7B (large positive)")) << found;
  EXPECT_TRUE(std::regex_search(found, std::regex("param 1 \\(0x[0-9a-f]+, 4096 bytes\\): [0-9]+ bytes of output "
                                                  "changed with 0x7B \\(large positive\\), first at offset 0")))
      << found;
}

TEST_F(Checks, AliasFindsAddFirstInPlaceButNotAxpyInPlace) {
  const std::string found = check(4, "alias", kExitDiffers);
  EXPECT_TRUE(has(found, "\"status\":\"finding\"")) << found;
  EXPECT_TRUE(has(found, "params 0 (+0) 1 (+0) point into one written range")) << found;
  EXPECT_TRUE(has(found, "with param 0 given a separate copy: param 0 (0x")) << found;
  EXPECT_TRUE(has(found, "of output differ, first at offset")) << found;
  const std::string safe = check(5, "alias", kExitOk);
  EXPECT_TRUE(has(safe, "\"status\":\"clean\"")) << safe;
  EXPECT_TRUE(has(safe, "1 aliased range(s); the outputs do not change when the parameters are separated")) << safe;
  const std::string none = check(0, "alias", kExitOk);
  EXPECT_TRUE(has(none, "no two pointer parameters point into one range the launch writes")) << none;
}

TEST_F(Checks, OverrunFaultsAgainstTheGuardForSumNextOnly) {
  const std::string found = check(6, "overrun", kExitDiffers);
  EXPECT_TRUE(has(found, "\"status\":\"finding\"")) << found;
  EXPECT_TRUE(has(found, "access past the end of an allocation")) << found;
  EXPECT_TRUE(has(found, "CUDA_ERROR_ILLEGAL_ADDRESS")) << found;
  EXPECT_TRUE(has(found, "candidate: param 0 -> 0x")) << found;
  EXPECT_TRUE(has(found, ", 4096 bytes (+0), 0 bytes of slack before the guard")) << found;
  const std::string clean = check(0, "overrun", kExitOk);
  EXPECT_TRUE(has(clean, "\"status\":\"clean\"")) << clean;
  EXPECT_TRUE(has(clean, "no fault with 2 range(s) ending against unmapped memory")) << clean;
}

// Overruns too small for the guard (a 4000-byte buffer ends 96 bytes before
// it): the slack filled with two patterns tells a read, a changed slack a write.
TEST_F(Checks, OverrunFindsAReadAndAWriteInsideTheSlack) {
  const std::string read = check(9, "overrun", kExitDiffers);
  EXPECT_TRUE(has(read, "\"status\":\"finding\"")) << read;
  EXPECT_TRUE(has(read, "inside the 96 bytes of slack before the guard at most")) << read;
  EXPECT_TRUE(has(read, "the outputs differ when the slack holds 0xFF or 0x7B (a read past the end)")) << read;
  EXPECT_TRUE(std::regex_search(read, std::regex("param 1 \\(0x[0-9a-f]+, 4000 bytes\\): [1-4] bytes of output differ "
                                                 "between the two fills, first at offset 399[6-9]")))
      << read;
  EXPECT_FALSE(has(read, "written past the end")) << read;
  const std::string written = check(10, "overrun", kExitDiffers);
  EXPECT_TRUE(has(written, "\"status\":\"finding\"")) << written;
  EXPECT_TRUE(has(written, "the slack was written (a write past the end)")) << written;
  EXPECT_TRUE(has(written, "4 bytes written past the end of 0x")) << written;
  EXPECT_TRUE(has(written, " (4000 bytes), the first 0 bytes past it")) << written;
  EXPECT_FALSE(has(written, "a read past the end")) << written;
  // axpy's 4096-byte ranges leave no slack; pad_scale's 8192-byte x neither.
  const std::string clean = check(3, "overrun", kExitOk);
  EXPECT_TRUE(has(clean, "\"status\":\"clean\"")) << clean;
}

TEST_F(Checks, SanitizerNotFoundIsNotRunAndItsSummaryIsRead) {
  const std::string missing = check(0, "sanitizer", kExitOk, {}, {{"KCAP_COMPUTE_SANITIZER", "/nonexistent"}});
  EXPECT_TRUE(has(missing, "\"status\":\"not-run\"")) << missing;
  EXPECT_TRUE(has(missing, "compute-sanitizer not found")) << missing;
  const std::string fake = file("compute-sanitizer");
  {
    std::ofstream script(fake);
    script << "#!/bin/sh\n"
              "case \"$2\" in memcheck) echo '========= Invalid __global__ read of size 4 bytes';"
              " echo '========= ERROR SUMMARY: 2 errors'; exit 9;;\n"
              "*) echo '========= ERROR SUMMARY: 0 errors'; exit 0;; esac\n";
  }
  ASSERT_EQ(::chmod(fake.c_str(), 0755), 0);
  const std::string found = check(0, "sanitizer", kExitDiffers, {}, {{"KCAP_COMPUTE_SANITIZER", fake}});
  EXPECT_TRUE(has(found, "\"status\":\"finding\"")) << found;
  EXPECT_TRUE(has(found, "memcheck: 2 error(s); racecheck: 0 error(s); initcheck: 0 error(s)")) << found;
  EXPECT_TRUE(has(found, "memcheck: Invalid __global__ read of size 4 bytes")) << found;
}

TEST_F(Checks, UsageErrors) {
  const Outcome unknown = replay({trace(), "--check", "everything"});
  EXPECT_EQ(unknown.exitCode, kExitUsage) << unknown.describe();
  EXPECT_TRUE(has(unknown.err, "--check everything: unknown checker")) << unknown.err;
  const Outcome range = replay({trace(), "--range", "0..2", "--check", "unwritten"});
  EXPECT_EQ(range.exitCode, kExitUsage) << range.describe();
  EXPECT_TRUE(has(range.err, "--check unwritten replays each launch again from its own pre-state")) << range.err;
  EXPECT_TRUE(has(range.err, "with --range only --check determinism")) << range.err;
}

TEST_F(Checks, DeterminismOverARangeReplaysTheWholeSequenceAndFlagsTheRacyLaunch) {
  // Launches 0..2 of the checks scenario: axpy, racy_sum, fill_empty, as a
  // sequence replayed 4 times.
  const Outcome run = replay({trace(), "--range", "0..2", "--check", "determinism", "--runs", "4", "--json"});
  EXPECT_EQ(run.exitCode, kExitDiffers) << run.describe();
  EXPECT_TRUE(balancedJson(run.out)) << run.out;
  const std::string racy = jsonLaunch(run.out, 1);
  EXPECT_TRUE(has(racy, "\"name\":\"determinism\",\"status\":\"finding\"")) << racy;
  EXPECT_TRUE(has(racy, "vary over 4 runs of the 3-launch sequence")) << racy;
  EXPECT_TRUE(std::regex_search(racy, std::regex("param 1 \\(0x[0-9a-f]+, 4 bytes\\): [1-4] bytes vary between runs, "
                                                 "first at offset [0-3]")))
      << racy;
  for (const uint64_t clean : {0u, 2u}) {
    const std::string launch = jsonLaunch(run.out, clean);
    EXPECT_TRUE(has(launch, "\"name\":\"determinism\",\"status\":\"clean\"")) << launch;
    EXPECT_TRUE(has(launch, "4 runs of the 3-launch sequence gave identical outputs")) << launch;
  }
}

}  // namespace
}  // namespace kcap_test
