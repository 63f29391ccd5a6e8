// Restores and comparisons by difference (replay/piece_hashes.h): a pool
// every launch reaches, recorded with 4 KiB pieces (replay_scenarios pool),
// replayed with the double running the shim's hashing kernel on the host.
// Only the pieces that differ travel: a launch's restore copies the pieces
// the launch before left differently, its comparison reads back the pieces
// whose hashes differ, and what it reports about them is what comparing
// every byte would report.
#include "process_runner.h"
#include "recorded_traces.h"
#include "trace_files.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace kcap_test {
namespace {

using nlohmann::json;

constexpr int kExitOk = 0, kExitDiffers = 3;
constexpr uint64_t kPiece = 4096;        // the recording's piece size
constexpr uint64_t kPool = 16 * kPiece;  // the pool: 16 pieces
constexpr uint64_t kX = kPiece;          // x: one piece, compared on the host

class PieceHashes : public RecordedTraces<PieceHashes> {
 protected:
  static std::string pool() {
    const std::string path = file("pool.kcap");
    if (access(path.c_str(), F_OK) != 0) {
      recordWithKcap(path, KCAP_TEST_REPLAY_PROGRAM, {"pool"}, {{"KCAP_PIECE_SIZE", std::to_string(kPiece)}});
    }
    return path;
  }
  static json replayJson(std::vector<std::string> args, int exitCode) {
    args.insert(args.begin(), "replay");
    args.push_back("--json");
    const Outcome run = kcapOnDouble(args);
    EXPECT_EQ(run.exitCode, exitCode) << run.describe();
    json report = json::parse(run.out, nullptr, false);
    EXPECT_TRUE(report.is_object()) << run.out;
    return report;
  }
};

const json& launchOf(const json& report, uint64_t index) {
  static const json none;
  if (!report.contains("launches")) return none;
  for (const json& launch : report["launches"]) {
    if (launch.value("launchIndex", uint64_t{99}) == index) return launch;
  }
  return none;
}

const json& poolBuffer(const json& launch) {
  static const json none;
  if (!launch.contains("buffers")) return none;
  for (const json& buffer : launch["buffers"]) {
    if (buffer.value("size", uint64_t{0}) == kPool) return buffer;
  }
  return none;
}

TEST_F(PieceHashes, EachLaunchCopiesOnlyWhatTheDeviceLacksAndReadsBackOnlyWhatDiffers) {
  for (const std::vector<std::string>& extra : {std::vector<std::string>{}, {"--no-fixed-va"}}) {
    std::vector<std::string> args = {pool()};
    args.insert(args.end(), extra.begin(), extra.end());
    const json report = replayJson(args, kExitOk);
    for (uint64_t i = 0; i < 3; ++i) {
      const json& launch = launchOf(report, i);
      ASSERT_TRUE(launch.is_object()) << report.dump();
      EXPECT_EQ(launch["verdict"], "REPRODUCED") << launch.dump();
      EXPECT_EQ(launch["restoredBytes"], kPool + kX) << launch.dump();
      // The pool compared by hashes, all equal: only x (one piece) read back.
      EXPECT_EQ(launch["readBackBytes"], kX) << launch.dump();
      ASSERT_TRUE(poolBuffer(launch).is_object()) << launch.dump();
      EXPECT_EQ(poolBuffer(launch)["differingBytes"], 0) << launch.dump();
    }
    // The first launch fills fresh memory; the next ones find the pool as the
    // launch before left it, which is their recorded pre-state: only x (on
    // the host path) is copied again.
    EXPECT_EQ(launchOf(report, 0)["uploadedBytes"], kPool + kX) << report.dump();
    EXPECT_EQ(launchOf(report, 1)["uploadedBytes"], kX) << report.dump();
    EXPECT_EQ(launchOf(report, 2)["uploadedBytes"], kX) << report.dump();
  }
}

TEST_F(PieceHashes, AChangedBuildDiffersWhereEveryByteComparedWouldSayAndThePieceIsRestoredAfter) {
  const json report =
      replayJson({pool(), "--override", "axpy=" + kernelFile("axpy_changed.fatbin"), "--dtype", "f32"}, kExitDiffers);
  // axpy_changed gets element 100 of y wrong: byte 400 from where y points.
  const uint64_t offsets[] = {400, 8 * kPiece + 400, 400};
  for (uint64_t i = 0; i < 3; ++i) {
    const json& launch = launchOf(report, i);
    ASSERT_TRUE(launch.is_object()) << report.dump();
    EXPECT_EQ(launch["verdict"], "DIFFERS") << launch.dump();
    const json& buffer = poolBuffer(launch);
    ASSERT_TRUE(buffer.is_object()) << launch.dump();
    EXPECT_EQ(buffer["differingBytes"], 1) << buffer.dump();
    EXPECT_EQ(buffer["firstDifferingOffset"], offsets[i]) << buffer.dump();
    ASSERT_TRUE(buffer.contains("stats")) << buffer.dump();
    EXPECT_EQ(buffer["stats"]["elements"], kPool / 4) << buffer.dump();
    EXPECT_EQ(buffer["stats"]["mismatches"], 1) << buffer.dump();
    // x and the one pool piece whose hash differs.
    EXPECT_EQ(launch["readBackBytes"], kX + kPiece) << launch.dump();
  }
  // Launch 0 left piece 0 different from launch 1's pre-state: restored.
  // Launch 1 left piece 8 different, and launch 2 starts from launch 1's
  // recorded post-state: piece 8 restored (piece 0 was already).
  EXPECT_EQ(launchOf(report, 1)["uploadedBytes"], kX + kPiece) << report.dump();
  EXPECT_EQ(launchOf(report, 2)["uploadedBytes"], kX + kPiece) << report.dump();
}

TEST_F(PieceHashes, TheTextReportNamesTheWorstElementAcrossThePool) {
  const Outcome run = kcapOnDouble(
      {"replay", pool(), "--launch", "1", "--override", "axpy=" + kernelFile("axpy_changed.fatbin"), "--dtype", "f32"});
  EXPECT_EQ(run.exitCode, kExitDiffers) << run.describe();
  EXPECT_NE(run.out.find("1 of 65,536 bytes differ, first at offset 33,168 (0x8190)"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("worst at element 8292"), std::string::npos) << run.out;
}

}  // namespace
}  // namespace kcap_test
