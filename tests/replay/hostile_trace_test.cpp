// Traces with valid checksums and hostile contents, given to the commands that
// read them (replay, info, dump, doctor) against the driver double: each must
// refuse what is wrong with a message naming the event, never read or write
// outside its buffers, and never pass a terminal control from the trace to
// the terminal.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "recorded_traces.h"

namespace kcap_test {
namespace {

constexpr int kExitTrace = 1;

class HostileTrace : public RecordedTraces<HostileTrace> {
 protected:
  // late_allocation `args` recorded in checkpoint mode (a checkpoint at
  // every launch, the double's memory handed out dirty) into `name`.
  static std::string recordLateAllocation(const std::string& name, const std::vector<std::string>& args) {
    const std::string source = file(name);
    const Outcome recorded = kcapRecord(
        source, lateAllocationProgram(), args,
        {{"KCAP_MODE", "checkpoint"}, {"KCAP_CHECKPOINT_EVERY", "1launches"}, {"KCAP_DOUBLE_DIRTY_ALLOCATIONS", "1"}});
    EXPECT_EQ(recorded.exitCode, 0) << recorded.describe();
    return source;
  }
};

Outcome kcap(const std::vector<std::string>& args) { return kcapOnDouble(args); }

// The first launch of `source`, edited by `change`, written to `path`.
// Returns the launch event's seq.
uint64_t withFirstLaunch(const std::string& source, const std::string& path,
                         const std::function<void(kcap::schema::Launch::Builder)>& change) {
  bool done = false;
  const uint64_t seq = kcap::test::rewriteEvents(source, path, [&](kcap::schema::Event::Builder e) {
    if (done || !e.isLaunch()) return false;
    done = true;
    change(e.getLaunch());
    return true;
  });
  EXPECT_NE(seq, 0u) << "no launch in " << source;
  return seq;
}

// A pointer word's offset plus 8 wraps in 32 bits to a value the check
// passed: replay then wrote 8 bytes about 4 GiB past its parameter buffer.
// Relocated (--no-fixed-va), so that the word is rewritten at all.
TEST_F(HostileTrace, APointerWordOffsetThatWrapsIsATraceErrorNamingTheEvent) {
  const std::string path = file("pointer-wraps.kcap");
  const uint64_t seq = withFirstLaunch(directLaunch(), path, [](kcap::schema::Launch::Builder l) {
    ASSERT_GT(l.getPointers().size(), 0u);
    l.getPointers()[0].setOffset(0xFFFFFFF8u);
  });
  const Outcome run = kcap({"replay", path, "--launch", "0", "--no-fixed-va"});
  EXPECT_EQ(run.signal, 0) << run.describe();
  EXPECT_EQ(run.exitCode, kExitTrace) << run.describe();
  EXPECT_NE(run.out.find("ERROR"), std::string::npos) << run.describe();
  EXPECT_NE(run.out.find("the trace is malformed at event #" + std::to_string(seq) +
                         ": pointer word 0 at byte 4294967288 (8 bytes) lies outside the"),
            std::string::npos)
      << run.describe();
}

// A parameter layout entry whose offset + size wraps in 32 bits: replay
// handed the driver a pointer far past its buffer and reported the kernel as
// faulting, blaming the kernel for its own bug.
TEST_F(HostileTrace, AParameterLayoutEntryThatWrapsIsATraceErrorNotAFault) {
  const std::string path = file("layout-wraps.kcap");
  const uint64_t seq = withFirstLaunch(directLaunch(), path, [](kcap::schema::Launch::Builder l) {
    ASSERT_GT(l.getParamLayout().size(), 0u);
    l.getParamLayout()[0].setOffset(0xFFFFFFF0u);
    l.getParamLayout()[0].setSize(0x20u);
  });
  const Outcome run = kcap({"replay", path, "--launch", "0"});
  EXPECT_EQ(run.signal, 0) << run.describe();
  EXPECT_EQ(run.exitCode, kExitTrace) << run.describe();
  EXPECT_EQ(run.out.find("FAULT"), std::string::npos) << run.describe();
  EXPECT_NE(run.out.find("the trace is malformed at event #" + std::to_string(seq) +
                         ": parameter 0 at byte 4294967280 (32 bytes) lies outside the"),
            std::string::npos)
      << run.describe();
}

// kcap check reports both: the checksums are valid, the launch is not.
TEST_F(HostileTrace, CheckReportsParameterOffsetsOutsideTheBuffer) {
  const std::string path = file("check-wraps.kcap");
  const uint64_t seq = withFirstLaunch(directLaunch(), path, [](kcap::schema::Launch::Builder l) {
    ASSERT_GT(l.getPointers().size(), 0u);
    l.getPointers()[0].setOffset(0xFFFFFFF8u);
    ASSERT_GT(l.getParamLayout().size(), 0u);
    l.getParamLayout()[0].setOffset(0xFFFFFFF0u);
    l.getParamLayout()[0].setSize(0x20u);
  });
  const Outcome run = kcap({"check", path});
  EXPECT_EQ(run.signal, 0) << run.describe();
  EXPECT_EQ(run.exitCode, kExitTrace) << run.describe();
  EXPECT_NE(run.out.find("event #" + std::to_string(seq) +
                         " (launch): parameter 0 at byte 4294967280 (32 bytes) lies outside the"),
            std::string::npos)
      << run.describe();
  // The first problem of a launch is the one named; the clean original passes.
  EXPECT_EQ(kcap({"check", directLaunch()}).exitCode, 0);
}

// C1 controls are valid UTF-8 (U+009B is CSI to a terminal, U+009D OSC) and
// a bidirectional override reorders what is shown: all are escaped, in every
// command that prints names, as ESC and BEL are.
TEST_F(HostileTrace, TerminalControlsInNamesAreEscapedEverywhere) {
  const std::string csi = "\xc2\x9b", osc = "\xc2\x9d", override = "\xe2\x80\xae";
  const std::string name = "k" + csi + "31m" + osc + "0;title" + override + "x";
  const std::string path = file("c1-names.kcap");
  kcap::test::rewriteEvents(directLaunch(), path, [&](kcap::schema::Event::Builder e) {
    if (e.isLaunch()) {
      e.getLaunch().setKernelName(name);
      return true;
    }
    if (e.isFunctionBind()) {
      e.getFunctionBind().setName(name);
      return true;
    }
    return false;
  });
  const std::vector<std::vector<std::string>> commands = {{"info", path},
                                                          {"info", path, "--json"},
                                                          {"dump", path},
                                                          {"dump", path, "--json"},
                                                          {"doctor", path},
                                                          {"replay", path, "--launch", "0"},
                                                          {"replay", path, "--launch", "0", "--json"}};
  for (const auto& args : commands) {
    const Outcome run = kcap(args);
    const std::string all = run.out + run.err;
    SCOPED_TRACE(args[0] + (args.size() > 2 ? " " + args[2] : std::string()));
    EXPECT_EQ(run.signal, 0) << run.describe();
    EXPECT_EQ(all.find(csi), std::string::npos) << run.describe();
    EXPECT_EQ(all.find(osc), std::string::npos) << run.describe();
    EXPECT_EQ(all.find(override), std::string::npos) << run.describe();
    EXPECT_NE(all.find("\\u009b31m\\u009d0;title\\u202ex"), std::string::npos) << run.describe();
  }
}

// `kcap replay path` names an interval not re-executable, saying `why`.
void expectNotReexecutable(const std::string& path, const std::string& why) {
  const Outcome run = kcap({"replay", path});
  EXPECT_EQ(run.signal, 0) << run.describe();
  EXPECT_NE(run.exitCode, 0) << run.describe();
  EXPECT_NE(run.out.find("NOT RE-EXECUTABLE"), std::string::npos) << run.describe();
  EXPECT_NE(run.out.find(why), std::string::npos) << why << "\n" << run.describe();
}

// A checkpoint trace's allocation whose logged first content lies partly
// outside it: re-execution wrote it whole, over whatever replay placed
// next. The interval is named not re-executable, with the event.
TEST_F(HostileTrace, AnAllocationsFirstContentOutsideItIsATraceErrorNamingTheEvent) {
  const std::string source = recordLateAllocation("late-allocation.kcap", {});
  const std::string path = file("initial-outside.kcap");
  const uint64_t seq = kcap::test::rewriteEvents(source, path, [](kcap::schema::Event::Builder e) {
    if (!e.isAlloc() || e.getAlloc().getInitial().size() == 0) return false;
    auto initial = e.getAlloc().getInitial()[0];
    initial.setAddress(initial.getAddress() + 8);  // its 4 KiB now end 8 bytes past the allocation
    return true;
  });
  ASSERT_NE(seq, 0u) << "no allocation logged its first content";
  expectNotReexecutable(
      path, "the trace is malformed at event #" + std::to_string(seq) + ": the first content (4096 bytes at ");
  expectNotReexecutable(path, ") lies outside the allocation (4096 bytes at ");
  EXPECT_EQ(kcap({"replay", source}).exitCode, 0) << "the trace as recorded reproduces";
}

// A stream-ordered allocation's first content arrives in a WrittenData:
// one that claims more bytes than the allocation holds (here the Alloc
// shrunk to 8 bytes) must not be written past it, and one that holds no
// bytes leaves its interval not re-executable, with the event named.
TEST_F(HostileTrace, AStreamOrderedAllocationsFirstContentIsBoundedAndMissingOneIsNamed) {
  const std::string source = recordLateAllocation("pool.kcap", {"pool"});
  const std::string shrunk = file("pool-shrunk.kcap");
  const uint64_t seq = kcap::test::rewriteEvents(source, shrunk, [](kcap::schema::Event::Builder e) {
    if (!e.isAlloc() || !e.getAlloc().getInitialDeferred()) return false;
    e.getAlloc().setSize(8);
    return true;
  });
  ASSERT_NE(seq, 0u) << "no stream-ordered allocation deferred its first content";
  expectNotReexecutable(
      shrunk, "the trace is malformed at event #" + std::to_string(seq) + ": the first content (4096 bytes at ");
  const std::string missing = file("pool-missing.kcap");
  uint64_t of = 0;
  ASSERT_NE(kcap::test::rewriteEvents(source, missing,
                                      [&](kcap::schema::Event::Builder e) {
                                        if (of != 0 || !e.isWrittenData()) return false;
                                        of = e.getWrittenData().getOf();
                                        e.getWrittenData().disownData();
                                        e.getWrittenData().setMissing("the copy back failed");
                                        return true;
                                      }),
            0u);
  expectNotReexecutable(missing, "the first content of the stream-ordered allocation at event #" + std::to_string(of) +
                                     " was not read back");
  EXPECT_EQ(kcap({"replay", source}).exitCode, 0) << "the trace as recorded reproduces";
}

// A checkpoint trace's memset (of a buffer allocated after the first
// checkpoint) that claims 4 TiB: re-execution must not set memory past the
// buffer, nor hand the driver a range it refuses and call that the
// program's error. The interval is named not re-executable, with the event.
TEST_F(HostileTrace, AMemsetPastItsMemoryIsNamedNotReexecutable) {
  const std::string source = file("late-alloc-memset.kcap");
  const Outcome recorded = kcapRecord(source, scenarioProgram(), {"flight", "late-alloc"},
                                      {{"KCAP_MODE", "checkpoint"}, {"KCAP_CHECKPOINT_EVERY", "2launches"}});
  ASSERT_EQ(recorded.exitCode, 0) << recorded.describe();
  const std::string path = file("memset-past.kcap");
  const uint64_t seq = kcap::test::rewriteEvents(source, path, [](kcap::schema::Event::Builder e) {
    if (!e.isMemset()) return false;
    e.getMemset().setCount(uint64_t{1} << 40);
    return true;
  });
  ASSERT_NE(seq, 0u) << "no memset in " << source;
  const Outcome run = kcap({"replay", path});
  EXPECT_EQ(run.signal, 0) << run.describe();
  EXPECT_NE(run.exitCode, 0) << run.describe();
  EXPECT_NE(run.out.find("NOT RE-EXECUTABLE"), std::string::npos) << run.describe();
  EXPECT_NE(run.out.find("the memset at event #" + std::to_string(seq) + " reaches "), std::string::npos)
      << run.describe();
  EXPECT_NE(run.out.find(" + 4398046511104 bytes, past the recorded device memory"), std::string::npos)
      << run.describe();
  EXPECT_EQ(kcap({"replay", source}).exitCode, 0) << "the trace as recorded reproduces";
}

}  // namespace
}  // namespace kcap_test
