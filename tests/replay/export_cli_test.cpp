// `kcap export --perfetto` end to end, without a GPU (ctest label "export"):
// a program recorded against the driver double and the sample trace (which
// has kernel timings) exported, and the JSON checked as a trace-event viewer
// reads it: every event has the fields its phase needs, one kernel slice per
// recorded launch under the kernel's name, every track named, flows from
// timed launch calls to their executions; a truncated trace still exports
// its intact events; an existing output is never replaced without --force.
#include "process_runner.h"
#include "recorded_traces.h"
#include "sample_trace.h"
#include "trace_files.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace kcap_test {
namespace {

using nlohmann::json;

constexpr int kExitOk = 0, kExitTrace = 1, kExitUsage = 2;

Outcome kcap(const std::vector<std::string>& args) { return kcapOnDouble(args); }

std::string readText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

json readJson(const std::string& path) { return json::parse(readText(path)); }

// Every event carries what its phase needs (the trace-event format's
// required fields); returns what is missing, "" when nothing is.
std::string missingFields(const json& e) {
  for (const char* key : {"name", "ph", "ts", "pid", "tid"}) {
    if (!e.contains(key)) return std::string("no ") + key + " in " + e.dump();
  }
  if (!e["ts"].is_number() || !e["pid"].is_number_integer() || !e["tid"].is_number_integer()) {
    return "ts, pid or tid not a number in " + e.dump();
  }
  const std::string ph = e["ph"];
  if (ph == "X" && !(e.contains("dur") && e["dur"].is_number() && e["dur"].get<double>() >= 0)) {
    return "a complete event without dur in " + e.dump();
  }
  if ((ph == "s" || ph == "f") && !e.contains("id")) return "a flow event without id in " + e.dump();
  if (ph == "f" && e.value("bp", "") != "e") return "a flow end not bound to its enclosing slice in " + e.dump();
  if (ph == "i" && !(e.contains("s") && std::string("tpg").find(e["s"].get<std::string>()) != std::string::npos)) {
    return "an instant without a scope in " + e.dump();
  }
  if (ph == "M" && !(e.contains("args") && e["args"].contains("name"))) return "metadata without a name in " + e.dump();
  if (std::string("XisfM").find(ph) == std::string::npos || ph.size() != 1) return "unexpected phase in " + e.dump();
  return {};
}

struct Timeline {
  json doc;
  std::vector<json> kernels;  // device-side slices (cat "kernel"), file order
  std::vector<json> calls;    // host-side launch slices (cat "launch")
  std::map<std::string, int> instants;
  std::vector<json> flows;
  std::set<std::pair<int64_t, int64_t>> named;  // (pid, tid) with a thread_name
  std::set<int64_t> namedProcesses;
  std::set<std::pair<int64_t, int64_t>> used;  // (pid, tid) of every other event
};

Timeline parse(const std::string& path) {
  Timeline t;
  t.doc = readJson(path);
  EXPECT_TRUE(t.doc.is_object());
  EXPECT_TRUE(t.doc.contains("displayTimeUnit"));
  EXPECT_TRUE(t.doc["traceEvents"].is_array());
  for (const json& e : t.doc["traceEvents"]) {
    const std::string missing = missingFields(e);
    EXPECT_EQ(missing, "");
    if (!missing.empty()) continue;
    const std::string ph = e["ph"];
    const auto track = std::make_pair(e["pid"].get<int64_t>(), e["tid"].get<int64_t>());
    if (ph == "M") {
      if (e["name"] == "thread_name") t.named.insert(track);
      if (e["name"] == "process_name") t.namedProcesses.insert(track.first);
      continue;
    }
    t.used.insert(track);
    if (ph == "X" && e.value("cat", "") == "kernel") t.kernels.push_back(e);
    if (ph == "X" && e.value("cat", "") == "launch") t.calls.push_back(e);
    if (ph == "i") ++t.instants[e.value("cat", "")];
    if (ph == "s" || ph == "f") t.flows.push_back(e);
  }
  return t;
}

void expectTracksNamed(const Timeline& t) {
  for (const auto& track : t.used) {
    EXPECT_TRUE(t.named.count(track)) << "track pid " << track.first << " tid " << track.second << " has no name";
    EXPECT_TRUE(t.namedProcesses.count(track.first)) << "process " << track.first << " has no name";
  }
}

class ExportCli : public RecordedTraces<ExportCli> {};

TEST_F(ExportCli, RecordedProgramBecomesATimeline) {
  const std::string trace = directLaunch();
  const std::string out = file("direct.json");
  const Outcome run = kcap({"export", "--perfetto", out, trace});
  ASSERT_EQ(run.exitCode, kExitOk) << run.describe();
  EXPECT_NE(run.out.find("exported 6 launches"), std::string::npos) << run.describe();

  const Timeline t = parse(out);
  std::vector<std::string> names;
  for (const json& k : t.kernels) names.push_back(k["name"]);
  const std::vector<std::string> want = {"axpy", "axpy", "axpy", "reduce_sum", "scale_struct", "poly_eval"};
  EXPECT_EQ(names, want);
  ASSERT_EQ(t.calls.size(), want.size());
  for (size_t i = 0; i < t.kernels.size(); ++i) {
    EXPECT_EQ(t.kernels[i]["args"]["launchIndex"], i);
    // Without --timing the execution is shown at the host call's times.
    EXPECT_EQ(t.kernels[i]["ts"], t.calls[i]["ts"]);
    EXPECT_EQ(t.kernels[i]["dur"], t.calls[i]["dur"]);
    EXPECT_NE(t.kernels[i]["pid"], t.calls[i]["pid"]) << "device and host tracks are separate processes";
  }
  // scale_struct ran on a stream of its own, the others on the default stream.
  EXPECT_NE(t.kernels[4]["tid"], t.kernels[0]["tid"]);
  EXPECT_EQ(t.kernels[5]["tid"], t.kernels[0]["tid"]);
  EXPECT_TRUE(t.flows.empty()) << "no timings: no execution to point a flow at";
  // 6 host-to-device copies before, 2 device-to-host and 1 device-to-device
  // after the launches, and more; two memsets; the stream's create, sync, destroy.
  EXPECT_GE(t.instants.at("memcpy"), 9);
  EXPECT_EQ(t.instants.at("memset"), 2);
  EXPECT_GE(t.instants.at("sync"), 3);
  EXPECT_EQ(t.instants.at("module"), 4);
  expectTracksNamed(t);
}

TEST_F(ExportCli, TimedLaunchesShowGpuDurationsAndFlows) {
  const std::string trace = file("timed.kcap");
  kcap::test::SampleOptions options;
  options.axpyLaunches = 5;
  kcap::test::writeSampleTrace(trace, options);
  const std::string out = file("timed.json");
  const Outcome run = kcap({"export", "--perfetto", out, trace});
  ASSERT_EQ(run.exitCode, kExitOk) << run.describe();
  const Timeline t = parse(out);

  // Timings and launches as the trace holds them, read independently.
  std::map<uint64_t, std::pair<uint64_t, uint64_t>> timing;  // launchIndex -> GPU (start, end)
  std::map<uint64_t, uint64_t> callNs;
  size_t launches = 0, captured = 0;
  for (const auto& owned : kcap::test::readAllEvents(trace)) {
    const auto e = owned.get();
    if (e.isKernelTiming()) {
      timing[e.getKernelTiming().getLaunchIndex()] = {e.getKernelTiming().getStartNs(), e.getKernelTiming().getEndNs()};
    }
    if (e.isLaunch()) {
      ++launches;
      captured += e.getLaunch().getCapturing() ? 1 : 0;
      callNs[e.getLaunch().getLaunchIndex()] = e.getTimeNs();
    }
  }
  ASSERT_EQ(timing.size(), options.axpyLaunches + 1);
  EXPECT_EQ(t.calls.size(), launches);
  EXPECT_EQ(t.kernels.size(), launches - captured) << "a launch captured into a graph did not run";

  double smallestLead = 1e30;
  for (const json& k : t.kernels) {
    const uint64_t index = k["args"]["launchIndex"];
    ASSERT_TRUE(timing.count(index));
    const auto [start, end] = timing[index];
    EXPECT_DOUBLE_EQ(k["dur"].get<double>(), static_cast<double>(end - start) / 1e3);
    const double lead = k["ts"].get<double>() - static_cast<double>(callNs[index]) / 1e3;
    EXPECT_GE(lead, -1e-6) << "a kernel placed before the call that launched it";
    smallestLead = std::min(smallestLead, lead);
  }
  EXPECT_NEAR(smallestLead, 0.0, 1e-6) << "the GPU clock is shifted by the least that keeps causality";

  // One flow per timed launch: its start on the call's track, its end on the
  // kernel's, at the kernel's start.
  std::map<uint64_t, std::vector<json>> byId;
  for (const json& f : t.flows) byId[f["id"].get<uint64_t>()].push_back(f);
  EXPECT_EQ(byId.size(), timing.size());
  for (const auto& entry : byId) {
    const std::vector<json>& pair = entry.second;
    ASSERT_EQ(pair.size(), 2u) << "flow " << entry.first;
    EXPECT_EQ(pair[0]["ph"], "s");
    EXPECT_EQ(pair[1]["ph"], "f");
    const bool endsOnAKernel = std::any_of(t.kernels.begin(), t.kernels.end(), [&](const json& k) {
      return k["pid"] == pair[1]["pid"] && k["tid"] == pair[1]["tid"] && k["ts"] == pair[1]["ts"];
    });
    EXPECT_TRUE(endsOnAKernel) << pair[1].dump();
  }
  EXPECT_EQ(t.instants.at("graph"), 1);
  EXPECT_EQ(t.instants.at("error"), 1);
  expectTracksNamed(t);
  // The recorded device's name labels its process.
  EXPECT_NE(readText(out).find(kcap::test::kSampleDevice0), std::string::npos);
}

// The sample's two messages rewritten as a checkpoint and a trigger.
TEST_F(ExportCli, CheckpointsAndTriggersAreInstants) {
  const std::string sample = file("plain.kcap");
  kcap::test::writeSampleTrace(sample, kcap::test::SampleOptions{});
  const std::string trace = file("flight.kcap");
  int changed = 0;
  kcap::test::rewriteEvents(sample, trace, [&](kcap::schema::Event::Builder e) {
    if (!e.isMessage()) return false;
    if (changed++ == 0) {
      auto c = e.initCheckpoint();
      c.setOrdinal(7);
      c.setReason(kcap::schema::CheckpointReason::INTERVAL);
    } else {
      auto t = e.initTrigger();
      t.setKind(kcap::schema::TriggerKind::API);
      t.setReason("the program asked");
    }
    return true;
  });
  ASSERT_EQ(changed, 2);
  const std::string out = file("flight.json");
  const Outcome run = kcap({"export", "--perfetto", out, trace});
  ASSERT_EQ(run.exitCode, kExitOk) << run.describe();
  const Timeline t = parse(out);
  std::vector<json> checkpoints, triggers;
  for (const json& e : t.doc["traceEvents"]) {
    if (e.value("cat", "") == "checkpoint") checkpoints.push_back(e);
    if (e.value("cat", "") == "trigger") triggers.push_back(e);
  }
  ASSERT_EQ(checkpoints.size(), 1u);
  EXPECT_EQ(checkpoints[0]["name"], "checkpoint #7");
  EXPECT_EQ(checkpoints[0]["ph"], "i");
  EXPECT_EQ(checkpoints[0]["s"], "p");
  EXPECT_EQ(checkpoints[0]["args"]["reason"], "interval");
  ASSERT_EQ(triggers.size(), 1u);
  EXPECT_EQ(triggers[0]["s"], "g");
  EXPECT_EQ(triggers[0]["args"]["kind"], "api");
  EXPECT_EQ(triggers[0]["args"]["reason"], "the program asked");
  expectTracksNamed(t);
}

TEST_F(ExportCli, TruncatedTraceExportsItsIntactEvents) {
  const std::string whole = file("whole.kcap");
  kcap::test::SampleOptions options;
  options.axpyLaunches = 40;
  kcap::test::writeSampleTrace(whole, options);
  std::vector<uint8_t> bytes = kcap::test::readFileBytes(whole);
  bytes.resize(bytes.size() / 2);
  const std::string cut = file("cut.kcap");
  kcap::test::writeFileBytes(cut, bytes);
  size_t intactLaunches = 0;
  for (const auto& owned : kcap::test::readAllEvents(cut)) intactLaunches += owned.get().isLaunch() ? 1 : 0;
  ASSERT_GT(intactLaunches, 0u);
  ASSERT_LT(intactLaunches, options.axpyLaunches);

  const std::string out = file("cut.json");
  const Outcome run = kcap({"export", "--perfetto", out, cut});
  EXPECT_EQ(run.exitCode, kExitTrace) << run.describe();
  EXPECT_NE(run.err.find(cut + ": at byte "), std::string::npos) << run.describe();
  EXPECT_NE(run.err.find("every intact event was exported"), std::string::npos) << run.describe();
  const Timeline t = parse(out);
  EXPECT_EQ(t.calls.size(), intactLaunches);
  EXPECT_EQ(t.kernels.size(), intactLaunches);
}

TEST_F(ExportCli, NeverReplacesAnOutputUnlessForced) {
  const std::string trace = directLaunch();
  const std::string out = file("kept.json");
  kcap::test::writeFileBytes(out, "mine\n", 5);
  const Outcome refused = kcap({"export", "--perfetto", out, trace});
  EXPECT_EQ(refused.exitCode, kExitUsage) << refused.describe();
  EXPECT_NE(refused.err.find("exists; not replacing it"), std::string::npos) << refused.describe();
  EXPECT_EQ(readText(out), "mine\n");

  const Outcome self = kcap({"export", "--perfetto", trace, trace, "--force"});
  EXPECT_EQ(self.exitCode, kExitUsage) << self.describe();
  EXPECT_NE(self.err.find("is the trace being read"), std::string::npos) << self.describe();
  EXPECT_EQ(kcap({"check", trace}).exitCode, kExitOk);

  const Outcome forced = kcap({"export", "--perfetto", out, trace, "--force"});
  ASSERT_EQ(forced.exitCode, kExitOk) << forced.describe();
  EXPECT_TRUE(readJson(out)["traceEvents"].is_array());

  const Outcome missing = kcap({"export", "--perfetto", file("none.json"), file("absent.kcap")});
  EXPECT_EQ(missing.exitCode, kExitTrace) << missing.describe();
  EXPECT_NE(access(file("none.json").c_str(), F_OK), 0) << "nothing is written for a trace that cannot be read";
}

}  // namespace
}  // namespace kcap_test
