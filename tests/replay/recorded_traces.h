// The traces the replay-side tests (replay, bisect, extract, doctor) run
// kcap on: recorded with `kcap record` against the driver double the first
// time a test of the suite asks for one, so that a failing recording fails
// that test (in SetUpTestSuite it would show as every test skipped), and
// kept in a temporary directory as long as the suite runs.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <map>
#include <string>
#include <vector>

#include "process_runner.h"
#include "trace_files.h"

namespace kcap_test {

// `kcap record -o path -- program args...`: it must succeed and say so.
inline void recordWithKcap(const std::string& path, const std::string& program,
                           const std::vector<std::string>& args = {}, std::map<std::string, std::string> env = {}) {
  const Outcome run = kcapRecord(path, program, args, std::move(env));
  ASSERT_EQ(run.exitCode, 0) << run.describe();
  ASSERT_NE(run.err.find("kcap: recorded "), std::string::npos) << run.describe();
}

// Base of a fixture (CRTP: each suite gets its own directory).
template <class Suite>
class RecordedTraces : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { dir_ = new kcap::test::TempDir("kcap-traces"); }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static const std::string& directory() { return dir_->path(); }
  static std::string file(const std::string& name) { return dir_->file(name); }

  // NAME, recorded from PROGRAM ARGS unless a test of the suite did already.
  static std::string recorded(const std::string& name, const std::string& program,
                              const std::vector<std::string>& args = {}) {
    const std::string path = file(name);
    if (access(path.c_str(), F_OK) != 0) {
      recordWithKcap(path, program, args);
    }
    return path;
  }
  // tests/interpose/programs/direct_launch: 6 independent launches (axpy
  // x3, reduce_sum, scale_struct, poly_eval) from four modules.
  static std::string directLaunch() { return recorded("direct.kcap", interposeProgram("direct_launch")); }
  // tests/replay/programs/replay_scenarios SCENARIO (its header says what
  // each scenario launches).
  static std::string scenario(const std::string& name) {
    return recorded(name + ".kcap", KCAP_TEST_REPLAY_PROGRAM, {name});
  }

 private:
  inline static kcap::test::TempDir* dir_ = nullptr;
};

}  // namespace kcap_test
