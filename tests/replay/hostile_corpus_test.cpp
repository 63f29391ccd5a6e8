// Every command that reads a trace (ranks on each file alone), and replay against the driver double,
// over the hostile-trace corpus (tests/support/hostile_traces.h), each run
// under a memory limit (1 GiB: address space, or under AddressSanitizer its
// resident-memory and allocation limits) and a time limit. For every file:
// no signal, no sanitizer report, no limit hit; exit 0 or 1, and an exit 1
// says what is wrong naming the file and where (a byte offset or an event).
// The double holds 256 MiB of device memory, as a GPU holds a finite amount:
// a trace that claims more meets the driver's out-of-memory error.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "hostile_traces.h"
#include "recorded_traces.h"

namespace kcap_test {
namespace {

constexpr uint64_t kMemoryLimit = uint64_t{1} << 30;
constexpr std::chrono::seconds kTimeLimit{60};

class HostileCorpus : public RecordedTraces<HostileCorpus> {
 protected:
  // The corpus, written on first use (each test runs in its own process).
  static const std::vector<kcap::test::HostileTrace>& corpus() {
    static const std::vector<kcap::test::HostileTrace> cases = [] {
      const std::string source = directLaunch();
      return kcap::test::writeHostileTraces(directory(), source);
    }();
    return cases;
  }

  static Outcome kcapLimited(const std::vector<std::string>& args) {
    RunSpec spec{kcapBinary(), args, {}, false, kTimeLimit, kMemoryLimit};
    spec.env["KCAP_LIBCUDA"] = doubleDir() + "/libcuda.so.1";
    spec.env["KCAP_DOUBLE_DEVICE_MEMORY"] = std::to_string(256u << 20);
    return run(spec);
  }

  // Runs `kcap COMMAND FILE EXTRA...` on every file of the corpus and
  // checks how each run ended; `expected` gives the exit code a case must
  // have, or -1 for "0 or 1".
  static void overCorpus(const std::string& command, const std::vector<std::string>& extra,
                         const std::function<int(const kcap::test::HostileTrace&)>& expected) {
    ASSERT_GE(corpus().size(), 15u);
    for (const auto& c : corpus()) {
      SCOPED_TRACE(c.name + " (" + c.what + ")");
      std::vector<std::string> args = {command, file(c.name)};
      args.insert(args.end(), extra.begin(), extra.end());
      const Outcome run = kcapLimited(args);
      const std::string all = run.out + run.err;
      EXPECT_FALSE(run.timedOut) << run.describe();
      EXPECT_EQ(run.signal, 0) << run.describe();
      EXPECT_EQ(all.find("Sanitizer"), std::string::npos) << run.describe();
      EXPECT_EQ(all.find("runtime error:"), std::string::npos) << run.describe();
      EXPECT_EQ(all.find("std::bad_alloc"), std::string::npos) << run.describe();
      const int want = expected(c);
      if (want >= 0) {
        EXPECT_EQ(run.exitCode, want) << run.describe();
      } else {
        EXPECT_TRUE(run.exitCode == 0 || run.exitCode == 1) << run.describe();
      }
      if (run.exitCode == 1) {
        EXPECT_NE(all.find(c.name), std::string::npos) << "the message does not name the file\n" << run.describe();
        const bool where = all.find("byte ") != std::string::npos || all.find("event #") != std::string::npos ||
                           all.find("launch ") != std::string::npos || all.find("\"offset\":") != std::string::npos;
        EXPECT_TRUE(where) << "the message says neither offset nor event\n" << run.describe();
      }
      // Nothing from a trace reaches the terminal raw: no C0 (but
      // newline and tab), no C1, no bidirectional override.
      for (const char* raw : {"\x1b", "\x07", "\xc2\x9b", "\xc2\x9d", "\xe2\x80\xae"}) {
        EXPECT_EQ(all.find(raw), std::string::npos) << run.describe();
      }
    }
  }
};

const auto anyOf01 = [](const kcap::test::HostileTrace&) { return -1; };

TEST_F(HostileCorpus, Info) { overCorpus("info", {}, anyOf01); }
TEST_F(HostileCorpus, InfoJson) { overCorpus("info", {"--json"}, anyOf01); }
TEST_F(HostileCorpus, Dump) { overCorpus("dump", {}, anyOf01); }
TEST_F(HostileCorpus, DumpJson) { overCorpus("dump", {"--json"}, anyOf01); }
TEST_F(HostileCorpus, Ranks) { overCorpus("ranks", {}, anyOf01); }
TEST_F(HostileCorpus, RanksJson) { overCorpus("ranks", {"--json"}, anyOf01); }
TEST_F(HostileCorpus, ExportPerfetto) {
  overCorpus("export", {"--perfetto", file("hostile-timeline.json"), "--force"}, anyOf01);
}
// doctor's 3 says the recorded environment differs from this one in what
// can change results: for a 16 GiB pre-state, that the device is smaller
// than the launch's working set.
TEST_F(HostileCorpus, Doctor) {
  overCorpus("doctor", {}, [](const kcap::test::HostileTrace& c) { return c.name == "huge-pre-state.kcap" ? 3 : -1; });
}

// check finds every hostile case, and passes the valid ones.
TEST_F(HostileCorpus, Check) {
  overCorpus("check", {}, [](const kcap::test::HostileTrace& c) { return c.checkExit; });
}

// Replay refuses what is wrong as a trace problem (never as a launch that
// differs or faults) and reproduces the valid ones.
TEST_F(HostileCorpus, ReplayAll) {
  overCorpus("replay", {"--all"}, [](const kcap::test::HostileTrace& c) { return c.replayExit; });
}

}  // namespace
}  // namespace kcap_test
