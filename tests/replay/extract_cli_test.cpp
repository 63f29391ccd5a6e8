// `kcap extract` end to end, without a GPU (ctest label "extract"): programs
// recorded against the driver double, launches extracted, and the output
// checked three ways: `kcap check` accepts it; it holds only what the
// launches need (read back event by event, compared with the source); and
// `kcap replay` (KCAP_LIBCUDA naming the double) reports on it exactly what
// it reports on the source.
#include "process_runner.h"
#include "recorded_traces.h"
#include "replay_cli.h"
#include "trace_files.h"

#include <gtest/gtest.h>
#include <dirent.h>
#include <unistd.h>

#include <capnp/message.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

namespace kcap_test {
namespace {

using kcap::schema::Event;
using kcap::test::OwnedEvent;

constexpr int kExitOk = 0, kExitTrace = 1, kExitUsage = 2, kExitDiffers = 3;

Outcome kcap(const std::vector<std::string>& args) { return kcapOnDouble(args); }

// The JSON object of launch N in `kcap replay --json` output, without the
// fields that vary from run to run (restoreNs, restoreWaitNs, the addresses a refused hint got).
std::string jsonLaunch(const std::string& json, uint64_t launch) {
  const std::string object =
      std::regex_replace(replay_cli::jsonLaunch(json, launch),
                         std::regex(",\"restoreNs\":[0-9]+(,\"placeNs\":[0-9]+)?(,\"restoreWaitNs\":[0-9]+)?"), "");
  return std::regex_replace(object, std::regex(" gave 0x[0-9a-f]+, cuMemAlloc of that size 0x[0-9a-f]+"),
                            " gave ADDRESS");
}

size_t count(const std::vector<OwnedEvent>& events, Event::Which which) {
  size_t n = 0;
  for (const auto& e : events) {
    n += e.get().which() == which ? 1 : 0;
  }
  return n;
}

std::set<uint64_t> launchIndices(const std::vector<OwnedEvent>& events) {
  std::set<uint64_t> out;
  for (const auto& e : events) {
    if (e.get().isLaunch()) {
      out.insert(e.get().getLaunch().getLaunchIndex());
    }
  }
  return out;
}

// The event's bytes with seq cleared: what must survive extraction unchanged.
std::vector<uint8_t> withoutSeq(Event::Reader event) {
  capnp::MallocMessageBuilder message;
  message.setRoot(event);
  message.getRoot<Event>().setSeq(0);
  return kcap::test::eventBytes(message.getRoot<Event>().asReader());
}

// Every event of `out` but the ones extract writes itself (traceBegin,
// messages, traceEnd) is an event of `source`, byte for byte but for its seq.
void expectCopiedVerbatim(const std::vector<OwnedEvent>& out, const std::vector<OwnedEvent>& source) {
  std::set<std::vector<uint8_t>> recorded;
  for (const auto& e : source) {
    recorded.insert(withoutSeq(e.get()));
  }
  for (const auto& e : out) {
    const auto which = e.get().which();
    if (which == Event::TRACE_BEGIN || which == Event::MESSAGE || which == Event::TRACE_END) {
      continue;
    }
    EXPECT_EQ(recorded.count(withoutSeq(e.get())), 1u) << "event #" << e.get().getSeq() << " was changed";
  }
}

// The invariants of any extracted trace: seq 0.. without gaps, traceBegin
// first naming the source, traceEnd (explicit) last with the right counts.
void expectWellFormed(const std::vector<OwnedEvent>& out, const std::string& source, const std::string& selection) {
  ASSERT_GE(out.size(), 3u);
  for (size_t i = 0; i < out.size(); ++i) {
    EXPECT_EQ(out[i].get().getSeq(), i);
  }
  ASSERT_TRUE(out.front().get().isTraceBegin());
  std::map<std::string, std::string> options;
  for (const auto kv : out.front().get().getTraceBegin().getOptions()) {
    options[kv.getKey()] = kv.getValue();
  }
  EXPECT_EQ(options["extractedFrom"], source);
  EXPECT_EQ(options["extractedLaunches"], selection);
  EXPECT_EQ(options["mode"], "full");  // the recorded options stay
  ASSERT_TRUE(out.back().get().isTraceEnd());
  const auto end = out.back().get().getTraceEnd();
  EXPECT_EQ(end.getReason(), kcap::schema::EndReason::EXPLICIT);
  EXPECT_EQ(end.getEventCount(), out.size() - 1);
  EXPECT_EQ(end.getLaunchCount(), count(out, Event::LAUNCH));
}

uint64_t fileSize(const std::string& path) { return kcap::test::readFileBytes(path).size(); }

class Extract : public RecordedTraces<Extract> {
 protected:
  // replay_scenarios sequence: axpy x4, reduce_sum, with memsets and copies between.
  static std::string sequence() { return scenario("sequence"); }

  // Replays `launch` of the source and of the extract with the same
  // arguments; both reports must say the same of it.
  static void expectSameReplay(const std::string& source, const std::string& out, uint64_t launch,
                               const std::vector<std::string>& more, int exitCode, const std::string& verdict) {
    std::vector<std::string> a = {"replay", source, "--json"}, b = {"replay", out, "--json"};
    a.insert(a.end(), more.begin(), more.end());
    b.insert(b.end(), more.begin(), more.end());
    const Outcome original = kcap(a), extracted = kcap(b);
    EXPECT_EQ(original.exitCode, exitCode) << original.describe();
    EXPECT_EQ(extracted.exitCode, exitCode) << extracted.describe();
    const std::string expected = jsonLaunch(original.out, launch);
    ASSERT_FALSE(expected.empty()) << original.out;
    EXPECT_NE(expected.find("\"verdict\":\"" + verdict + "\""), std::string::npos) << expected;
    EXPECT_EQ(jsonLaunch(extracted.out, launch), expected) << extracted.out;
  }
};

TEST_F(Extract, OneLaunchKeepsOnlyItsModuleAndReplaysAsTheOriginal) {
  const std::string source = directLaunch(), out = file("reduce.kcap");
  const Outcome run = kcap({"extract", source, "--launch", "3", "-o", out});
  ASSERT_EQ(run.exitCode, kExitOk) << run.describe();
  EXPECT_TRUE(std::regex_search(run.out, std::regex("^extracted launch 3 \\(1 launch\\) of " + source +
                                                    ": [0-9]+ events, 1 module, [0-9,]+ bytes \\(was [0-9,]+ "
                                                    "bytes, [0-9.]+% of the original\\)\n$")))
      << run.out;
  EXPECT_EQ(run.err, "");

  const Outcome check = kcap({"check", out});
  EXPECT_EQ(check.exitCode, kExitOk) << check.describe();
  EXPECT_EQ(check.out.rfind("OK: ", 0), 0u) << check.out;

  const auto original = kcap::test::readAllEvents(source);
  const auto events = kcap::test::readAllEvents(out);
  expectWellFormed(events, source, "3");
  expectCopiedVerbatim(events, original);
  // much smaller: a quarter of the events and less than half the bytes
  EXPECT_LT(events.size() * 4, original.size()) << events.size() << " of " << original.size();
  EXPECT_LT(fileSize(out) * 2, fileSize(source));
  // of the four modules, reduce_sum's alone (loaded from its cubin file)
  EXPECT_EQ(count(original, Event::MODULE_LOAD), 4u);
  ASSERT_EQ(count(events, Event::MODULE_LOAD), 1u);
  for (const auto& e : events) {
    if (e.get().isModuleLoad()) {
      EXPECT_NE(std::string(e.get().getModuleLoad().getPath()).find("reduce.sm_90.cubin"), std::string::npos);
    }
    if (e.get().isFunctionBind()) {
      EXPECT_EQ(std::string(e.get().getFunctionBind().getName()), "reduce_sum");
    }
  }
  EXPECT_EQ(count(events, Event::FUNCTION_BIND), 1u);
  EXPECT_EQ(launchIndices(events), std::set<uint64_t>{3});
  EXPECT_EQ(count(events, Event::LAUNCH_END), 1u);
  // its two buffers' allocations; no copies, memsets, syncs or frees
  EXPECT_EQ(count(events, Event::ALLOC), 2u);
  EXPECT_EQ(count(events, Event::MEMCPY) + count(events, Event::MEMSET) + count(events, Event::SYNC) +
                count(events, Event::FREE),
            0u);

  expectSameReplay(source, out, 3, {"--launch", "3"}, kExitOk, "REPRODUCED");
  // the same N, also when it is the only launch: `kcap replay OUT` replays it
  const Outcome all = kcap({"replay", out, "--json"});
  EXPECT_EQ(all.exitCode, kExitOk) << all.describe();
  EXPECT_NE(all.out.find("\"summary\":\"1 launch: 1 REPRODUCED\""), std::string::npos) << all.out;
  EXPECT_NE(jsonLaunch(all.out, 3).find("\"kernel\":\"reduce_sum\""), std::string::npos) << all.out;
  // kcap info reads it, and says where it came from
  const Outcome info = kcap({"info", out});
  EXPECT_EQ(info.exitCode, kExitOk) << info.describe();
  EXPECT_NE(info.out.find("extractedFrom=" + source), std::string::npos) << info.out;
  EXPECT_NE(info.out.find("explicit"), std::string::npos) << info.out;
}

TEST_F(Extract, AnOverriddenKernelDiffersInTheExtractAsInTheOriginal) {
  const std::string source = directLaunch(), out = file("axpy.kcap");
  const Outcome run = kcap({"extract", source, "--launch", "0", "-o", out});
  ASSERT_EQ(run.exitCode, kExitOk) << run.describe();
  ASSERT_EQ(kcap({"check", out}).exitCode, kExitOk);
  const auto events = kcap::test::readAllEvents(out);
  EXPECT_EQ(count(events, Event::MODULE_LOAD), 1u);
  // axpy's cuFuncSetAttribute applies to the launch, and is kept
  EXPECT_EQ(count(events, Event::FUNCTION_ATTRIBUTE), 1u);
  expectSameReplay(source, out, 0, {"--launch", "0"}, kExitOk, "REPRODUCED");
  const std::vector<std::string> changed = {"--launch", "0", "--override", "axpy=" + kernelFile("axpy_changed.fatbin")};
  expectSameReplay(source, out, 0, changed, kExitDiffers, "DIFFERS");
  const Outcome differs =
      kcap({"replay", out, "--launch", "0", "--override", "axpy=" + kernelFile("axpy_changed.fatbin")});
  EXPECT_NE(differs.out.find("1 of 4,000 bytes differ, first at offset 400 (0x190)"), std::string::npos) << differs.out;
}

TEST_F(Extract, ARangeKeepsTheCopiesAndMemsetsBetweenAndReplaysAsASequence) {
  const std::string source = sequence(), out = file("range.kcap");
  const Outcome run = kcap({"extract", source, "--range", "1..3", "-o", out});
  ASSERT_EQ(run.exitCode, kExitOk) << run.describe();
  EXPECT_NE(run.out.find("extracted launches 1..3 (3 launches) of " + source + ": "), std::string::npos) << run.out;
  ASSERT_EQ(kcap({"check", out}).exitCode, kExitOk);
  const auto original = kcap::test::readAllEvents(source);
  const auto events = kcap::test::readAllEvents(out);
  expectWellFormed(events, source, "1..3");
  expectCopiedVerbatim(events, original);
  EXPECT_EQ(launchIndices(events), (std::set<uint64_t>{1, 2, 3}));
  EXPECT_LT(events.size(), original.size());
  EXPECT_LT(fileSize(out), fileSize(source));
  // between launches 1 and 3: the host-to-device and the device-to-device
  // copy; not the uploads before launch 0, the memsets outside the range, or
  // the downloads at the end
  std::vector<std::string> copies;
  for (const auto& e : events) {
    if (e.get().isMemcpy()) {
      copies.push_back(e.get().getMemcpy().getDirection() == kcap::schema::CopyDirection::HOST_TO_DEVICE ? "h2d"
                                                                                                         : "other");
    }
  }
  EXPECT_EQ(copies, (std::vector<std::string>{"h2d", "other"}));
  EXPECT_EQ(count(events, Event::MEMSET), 0u);
  for (const uint64_t launch : {1u, 2u, 3u}) {
    expectSameReplay(source, out, launch, {"--range", "1..3"}, kExitOk, "REPRODUCED");
  }

  // The whole sequence: every memset and copy between launch 0 and 4.
  const std::string whole = file("whole.kcap");
  ASSERT_EQ(kcap({"extract", source, "--range", "0..4", "-o", whole}).exitCode, kExitOk);
  const auto all = kcap::test::readAllEvents(whole);
  EXPECT_EQ(count(all, Event::MEMSET), 2u);
  EXPECT_EQ(count(all, Event::MEMCPY), 2u);
  EXPECT_EQ(count(all, Event::MODULE_LOAD), 2u);
  const Outcome replayed = kcap({"replay", whole, "--range", "0..4"});
  EXPECT_EQ(replayed.exitCode, kExitOk) << replayed.describe();
  EXPECT_NE(replayed.out.find("5 launches: 5 REPRODUCED"), std::string::npos) << replayed.out;
}

// A range across events a damaged record chunk lost is refused: the output
// numbers its events anew, so its sequence would replay as if nothing had
// run there. What is extracted replays without a difference the damage made.
TEST_F(Extract, ARangeAcrossEventsLostToDamageIsRefused) {
  const std::vector<uint8_t> bytes = kcap::test::readFileBytes(sequence());
  const std::string damaged = file("damaged.kcap"), out = file("out.kcap");
  size_t refused = 0;
  for (size_t k = 1; k < 100; ++k) {
    const size_t at = bytes.size() * k / 100;
    std::vector<uint8_t> copy = bytes;
    for (size_t i = at; i < std::min(at + 16, copy.size()); ++i) copy[i] ^= 0x5a;
    kcap::test::writeFileBytes(damaged, copy.data(), copy.size());
    std::remove(out.c_str());
    const Outcome run = kcap({"extract", damaged, "--range", "0..4", "-o", out});
    if (run.err.find(" are missing (the trace is damaged there): a sequence across them") != std::string::npos) {
      EXPECT_EQ(run.exitCode, kExitTrace) << at << ": " << run.describe();
      EXPECT_NE(::access(out.c_str(), F_OK), 0) << at << ": " << out << " written";
      ++refused;
    } else if (run.exitCode == kExitOk) {
      const Outcome replayed = kcap({"replay", out, "--range", "0..4"});
      EXPECT_EQ(replayed.out.find("DIFFERS"), std::string::npos) << at << ": " << replayed.out;
    }
  }
  EXPECT_NE(refused, 0u);
}

TEST_F(Extract, AnExtractOfAnExtractKeepsTheLaunchNumbers) {
  const std::string source = sequence(), middle = file("middle.kcap"), inner = file("inner.kcap");
  ASSERT_EQ(kcap({"extract", source, "--range", "1..3", "-o", middle}).exitCode, kExitOk);
  // launches 1..3 only: 0 is unknown there
  const Outcome unknown = kcap({"extract", middle, "--launch", "0", "-o", inner});
  EXPECT_EQ(unknown.exitCode, kExitUsage) << unknown.describe();
  EXPECT_NE(unknown.err.find("launch 0 is not in " + middle + " (it has 3 launches, 1..3;"), std::string::npos)
      << unknown.describe();
  const Outcome run = kcap({"extract", middle, "--launch", "3", "--launch", "1", "-o", inner});
  ASSERT_EQ(run.exitCode, kExitOk) << run.describe();
  EXPECT_NE(run.out.find("extracted launches 1,3 (2 launches) of " + middle), std::string::npos) << run.out;
  EXPECT_EQ(kcap({"check", inner}).exitCode, kExitOk);
  const auto events = kcap::test::readAllEvents(inner);
  EXPECT_EQ(launchIndices(events), (std::set<uint64_t>{1, 3}));
  EXPECT_EQ(count(events, Event::MEMCPY), 0u);  // separate launches: no copies between
  expectSameReplay(source, inner, 3, {"--launch", "3"}, kExitOk, "REPRODUCED");
  const Outcome info = kcap({"info", inner});
  EXPECT_EQ(info.exitCode, kExitOk) << info.describe();
}

TEST_F(Extract, CUkernelLaunchesKeepTheirWholeBindChainAndAttributes) {
  const std::string source = file("library.kcap"), out = file("library-1.kcap");
  recordWithKcap(source, scenarioProgram(), {"library"});
  // launch 1: a CUfunction from cuKernelGetFunction of a CUkernel from
  // cuLibraryGetKernel, with an attribute set on each
  ASSERT_EQ(kcap({"extract", source, "--launch", "1", "-o", out}).exitCode, kExitOk);
  EXPECT_EQ(kcap({"check", out}).exitCode, kExitOk);
  const auto events = kcap::test::readAllEvents(out);
  std::vector<kcap::schema::BindApi> binds;
  for (const auto& e : events) {
    if (e.get().isFunctionBind()) {
      binds.push_back(e.get().getFunctionBind().getApi());
    }
  }
  EXPECT_EQ(binds, (std::vector<kcap::schema::BindApi>{kcap::schema::BindApi::LIBRARY_GET_KERNEL,
                                                       kcap::schema::BindApi::KERNEL_GET_FUNCTION}));
  EXPECT_EQ(count(events, Event::FUNCTION_ATTRIBUTE), 2u);
  ASSERT_EQ(count(events, Event::MODULE_LOAD), 1u);
  expectSameReplay(source, out, 1, {"--launch", "1"}, kExitOk, "REPRODUCED");
}

TEST_F(Extract, ALaunchKeepsTheEncodeOfItsTensorMapAndIsReEncodedFromIt) {
  const std::string source = file("tensor-map.kcap"), out = file("tensor-map-0.kcap");
  recordWithKcap(source, scenarioProgram(), {"tensor-map"});
  ASSERT_EQ(kcap({"extract", source, "--launch", "0", "-o", out}).exitCode, kExitOk);
  EXPECT_EQ(kcap({"check", out}).exitCode, kExitOk);
  // Of the four encodes, only the one whose map the launch takes.
  const auto events = kcap::test::readAllEvents(out);
  ASSERT_EQ(count(events, Event::TENSOR_MAP_ENCODE), 1u);
  uint64_t encodeSeq = 0, launchSeq = 0;
  for (const auto& e : events) {
    if (e.get().isTensorMapEncode()) {
      encodeSeq = e.get().getSeq();
      EXPECT_EQ(e.get().getTensorMapEncode().getApi(), kcap::schema::TensorMapApi::TILED);
      EXPECT_EQ(e.get().getTensorMapEncode().getMap().size(), 128u);
    } else if (e.get().isLaunch()) {
      launchSeq = e.get().getSeq();
    }
  }
  EXPECT_LT(encodeSeq, launchSeq);
  // Replayed by a driver that refuses the recorded map: re-encoded, reproduced.
  const Outcome run = kcapOnDouble({"replay", out, "--json", "--no-fixed-va"}, {{"KCAP_DOUBLE_TENSOR_MAP_SALT", "3"}});
  EXPECT_EQ(run.exitCode, kExitOk) << run.describe();
  const std::string launch = jsonLaunch(run.out, 0);
  EXPECT_NE(launch.find("\"verdict\":\"REPRODUCED\""), std::string::npos) << run.out;
  EXPECT_NE(launch.find("1 tensor map re-encoded here (tensorMapEncode #" + std::to_string(encodeSeq) + ")"),
            std::string::npos)
      << launch;
}

// A kernel node of a graph launch, cut out as launch 0 with the graph
// launch's memory it reaches. The single node of graph_scenarios
// during-capture's first graph is the only one to reach x and y, so the
// graph's post-state is its own: the extract reproduces, with both buffers
// compared (and a changed build differs). In decode's step graph node 0
// also writes y: what node 1 alone leaves there is recorded nowhere, so
// its extract holds no post-state and its replay compares nothing.
TEST_F(Extract, AGraphKernelNodeIsExtractedAsALaunchComparedOnlyWhereTheRecordingKnows) {
  const std::string single = recorded("graph-during-capture.kcap", graphProgram(), {"during-capture"});
  const std::string out = file("node.kcap");
  const Outcome extracted = kcap({"extract", single, "--graph-launch", "0", "--node", "0", "-o", out});
  ASSERT_EQ(extracted.exitCode, kExitOk) << extracted.describe();
  EXPECT_NE(extracted.out.find("extracted graph launch 0 node 0 of " + single + " as launch 0: "), std::string::npos)
      << extracted.out;
  EXPECT_NE(extracted.out.find("its post-state is the graph launch's"), std::string::npos) << extracted.out;
  EXPECT_EQ(kcap({"check", out}).exitCode, kExitOk);
  const auto events = kcap::test::readAllEvents(out);
  EXPECT_EQ(count(events, Event::LAUNCH), 1u);
  EXPECT_EQ(count(events, Event::LAUNCH_END), 1u);
  EXPECT_EQ(count(events, Event::MODULE_LOAD), 1u);
  EXPECT_EQ(count(events, Event::GRAPH_LAUNCH) + count(events, Event::GRAPH_DEFINE), 0u);
  const Outcome replay = kcap({"replay", out, "--json"});
  EXPECT_EQ(replay.exitCode, kExitOk) << replay.describe();
  const std::string launch = jsonLaunch(replay.out, 0);
  EXPECT_NE(launch.find("\"kernel\":\"axpy\",\"verdict\":\"REPRODUCED\""), std::string::npos) << replay.out;
  EXPECT_NE(launch.find("{\"label\":\"param 1\""), std::string::npos) << launch;
  EXPECT_NE(launch.find("{\"label\":\"param 2\""), std::string::npos) << launch;
  const Outcome changed = kcap({"replay", out, "--override", "axpy=" + kernelFile("axpy_changed.fatbin")});
  EXPECT_EQ(changed.exitCode, kExitDiffers) << changed.describe();
  EXPECT_NE(changed.out.find("1 of 4,096 bytes differ, first at offset 400"), std::string::npos) << changed.out;

  const std::string decode = recorded("graph-decode.kcap", graphProgram(), {"decode"});
  const std::string second = file("second-node.kcap");
  const Outcome cut = kcap({"extract", decode, "--graph-launch", "1", "--node", "1", "-o", second});
  ASSERT_EQ(cut.exitCode, kExitOk) << cut.describe();
  EXPECT_NE(cut.out.find("no post-state: a replay of it compares nothing (the graph launch changes 0x"),
            std::string::npos)
      << cut.out;
  EXPECT_NE(cut.out.find(", which node 0 reaches too"), std::string::npos) << cut.out;
  EXPECT_EQ(count(kcap::test::readAllEvents(second), Event::LAUNCH_END), 0u);
  const Outcome nothing = kcap({"replay", second});
  EXPECT_EQ(nothing.exitCode, kExitOk) << nothing.describe();
  EXPECT_NE(nothing.out.find("RAN (not verified): nothing compared: the graph launch changes 0x"), std::string::npos)
      << nothing.out;
  EXPECT_EQ(nothing.out.find("REPRODUCED"), std::string::npos) << nothing.out;

  // What cannot be extracted, each a usage error that writes nothing.
  const std::string none = file("no-node.kcap");
  const std::string explicitGraph = recorded("graph-explicit.kcap", graphProgram(), {"explicit"});
  const std::string checkpoint = file("graph-checkpoint.kcap");
  ASSERT_EQ(
      run({graphProgram(), {"updated"}, {{"KCAP_OUTPUT", checkpoint}, {"KCAP_MODE", "checkpoint"}}, true}).exitCode, 0);
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{decode, "--graph-launch", "5", "--node", "0"}, "graph launch 5 is not in the trace (it has 2 graph launches;"},
      {{decode, "--graph-launch", "1", "--node", "7"}, "graph launch 1 has no node 7"},
      {{explicitGraph, "--graph-launch", "0", "--node", "0"}, "graph launch 0: node 0 is not a kernel node"},
      {{decode, "--graph-launch", "1"}, "--graph-launch G and --node K go together"},
      {{decode, "--graph-launch", "1", "--node", "0", "--launch", "0"}, "choose one of --launch N and --range A..B"},
      {{checkpoint, "--graph-launch", "0", "--node", "2"}, "only a trace recorded in full mode holds"},
  };
  for (const auto& [args, message] : cases) {
    std::vector<std::string> all = {"extract", "-o", none};
    all.insert(all.end(), args.begin(), args.end());
    const Outcome refused = kcap(all);
    EXPECT_EQ(refused.exitCode, kExitUsage) << refused.describe();
    EXPECT_NE(refused.err.find(message), std::string::npos) << refused.describe();
    EXPECT_NE(access(none.c_str(), F_OK), 0) << "an output was written";
  }
}

TEST_F(Extract, UnknownLaunchesAndBadSelectionsAreUsageErrorsAndWriteNothing) {
  const std::string source = directLaunch(), out = file("nothing.kcap");
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--launch", "6"}, "launch 6 is not in " + source + " (it has 6 launches, 0..5;"},
      {{"--launch", "2", "--launch", "99"}, "launch 99 is not in"},
      {{"--range", "7..9"}, "no launches in 7..9 in " + source},
      {{"--range", "3..1"}, "--range 3..1: expected A..B with A <= B"},
      {{"--range", "3"}, "--range 3: expected A..B"},
      {{}, "choose one of --launch N and --range A..B"},
      {{"--launch", "1", "--range", "1..2"}, "choose one of --launch N and --range A..B"},
  };
  for (const auto& [args, message] : cases) {
    std::vector<std::string> all = {"extract", source, "-o", out};
    all.insert(all.end(), args.begin(), args.end());
    const Outcome run = kcap(all);
    EXPECT_EQ(run.exitCode, kExitUsage) << run.describe();
    EXPECT_NE(run.err.find(message), std::string::npos) << run.describe();
    EXPECT_NE(access(out.c_str(), F_OK), 0) << "an output was written";
  }
  const Outcome noOutput = kcap({"extract", source, "--launch", "1"});
  EXPECT_EQ(noOutput.exitCode, kExitUsage) << noOutput.describe();
}

TEST_F(Extract, RefusesToOverwriteTheInputAndReplacesAnyOtherOutputWhole) {
  const std::string source = directLaunch();
  const std::vector<uint8_t> before = kcap::test::readFileBytes(source);
  const Outcome same = kcap({"extract", source, "--launch", "0", "-o", source});
  EXPECT_EQ(same.exitCode, kExitUsage) << same.describe();
  EXPECT_NE(same.err.find("is the trace being read"), std::string::npos) << same.describe();
  // the same file under another name
  const std::string link = file("link.kcap");
  ASSERT_EQ(::link(source.c_str(), link.c_str()), 0);
  const Outcome linked = kcap({"extract", source, "--launch", "0", "-o", link});
  EXPECT_EQ(linked.exitCode, kExitUsage) << linked.describe();
  EXPECT_TRUE(kcap::test::readFileBytes(source) == before) << "the input was changed";
  ::unlink(link.c_str());

  // An existing output is replaced; a failed extract leaves it as it was;
  // no temporary file is left behind either way.
  const std::string out = file("replaced.kcap");
  kcap::test::writeFileBytes(out, std::vector<uint8_t>(100, 'x'));
  const Outcome failed = kcap({"extract", source, "--launch", "42", "-o", out});
  EXPECT_EQ(failed.exitCode, kExitUsage) << failed.describe();
  EXPECT_EQ(kcap::test::readFileBytes(out), std::vector<uint8_t>(100, 'x'));
  const Outcome run = kcap({"extract", source, "--launch", "4", "-o", out});
  ASSERT_EQ(run.exitCode, kExitOk) << run.describe();
  EXPECT_EQ(kcap({"check", out}).exitCode, kExitOk);
  DIR* dir = ::opendir(directory().c_str());
  ASSERT_NE(dir, nullptr);
  while (const dirent* entry = ::readdir(dir)) {
    EXPECT_EQ(std::string(entry->d_name).find(".extract-"), std::string::npos) << entry->d_name;
  }
  ::closedir(dir);
}

TEST_F(Extract, ADamagedSourceGivesWhatIsIntactAndSaysWhatWasSkipped) {
  const std::vector<uint8_t> whole = kcap::test::readFileBytes(sequence());
  const auto layout = kcap::test::walkChunks(whole);
  // Cut inside a record chunk that holds some of the launches: its events
  // (and all after it) are lost, the launches before it are intact.
  std::vector<uint64_t> records;
  for (const auto& chunk : layout.chunks) {
    if (chunk.kind == kcap::format::ChunkKind::kRecords) {
      records.push_back(chunk.offset);
    }
  }
  const std::string cut = file("cut.kcap"), out = file("cut-extract.kcap");
  uint64_t at = 0;
  std::set<uint64_t> intact;
  for (auto it = records.rbegin(); it != records.rend() && at == 0; ++it) {
    kcap::test::writeFileBytes(cut, whole.data(), *it + 40);
    intact = launchIndices(kcap::test::readAllEvents(cut));
    if (!intact.empty() && intact.size() < 5) {
      at = *it;
    }
  }
  ASSERT_NE(at, 0u) << "no cut leaves some launches but not all";

  const Outcome run = kcap({"extract", cut, "--range", "0..4", "-o", out});
  ASSERT_EQ(run.exitCode, kExitOk) << run.describe();
  EXPECT_NE(run.err.find("kcap extract: " + cut + ": skipped: at byte " + std::to_string(at)), std::string::npos)
      << run.describe();
  EXPECT_NE(run.out.find("(" + std::to_string(intact.size()) + (intact.size() == 1 ? " launch)" : " launches)")),
            std::string::npos)
      << run.out;
  const Outcome check = kcap({"check", out});
  EXPECT_EQ(check.exitCode, kExitOk) << check.describe();
  const auto events = kcap::test::readAllEvents(out);
  EXPECT_EQ(launchIndices(events), intact);
  bool warned = false;
  for (const auto& e : events) {
    if (e.get().isMessage() && e.get().getMessage().getLevel() == kcap::schema::Message::Level::WARNING) {
      warned = warned || std::string(e.get().getMessage().getText()).find("not extracted: at byte") == 0;
    }
  }
  EXPECT_TRUE(warned) << "the output does not say what was skipped";
  const Outcome replayed = kcap({"replay", out, "--launch", std::to_string(*intact.begin())});
  EXPECT_EQ(replayed.exitCode, kExitOk) << replayed.describe();
}

}  // namespace
}  // namespace kcap_test
