// kcap replay on a checkpoint trace (--mode checkpoint): re-execution from
// checkpoints, verified at the next (replay/reexecute.h). One line per
// interval, printed as soon as it is known; --json one document at the end.
//
// Exit codes, as for launch replay: 0 every interval that could be compared
// reproduced, 3 some interval differs, 4 a fault or hang, 1 an interval
// that cannot be re-executed, a damaged trace, or nothing compared at all.
#include <cstdio>
#include <iostream>

#include "common.h"
#include "driver.h"
#include "reexecute.h"
#include "replay_report.h"

namespace kcap::tools {
namespace {

using replay::IntervalReport;
using replay::IntervalVerdict;

constexpr int kExitDiffers = 3;
constexpr int kExitFault = 4;

std::string launchesText(const IntervalReport& r) {
  if (r.firstLaunch > r.lastLaunch) return "no launches";
  if (r.firstLaunch == r.lastLaunch) return "launch " + std::to_string(r.firstLaunch);
  return "launches " + std::to_string(r.firstLaunch) + ".." + std::to_string(r.lastLaunch);
}

std::string checkpointText(const std::optional<uint64_t>& ordinal, const char* none) {
  return ordinal ? "checkpoint " + std::to_string(*ordinal) : std::string(none);
}

std::string differenceLine(const replay::RangeDifference& d) {
  std::string line = "range " + hex(d.address) + " (" + d.kind;
  if (d.allocationBase != 0 && d.allocationBase != d.address) line += " in " + hex(d.allocationBase);
  line += ", " + humanSize(d.size) + "): " + withCommas(d.differingPieces) + " of " + withCommas(d.pieces) +
          (d.pieces == 1 ? " piece differs" : " pieces differ");
  if (d.firstOffset) {
    line += ", first differing byte at offset " + withCommas(*d.firstOffset) + " (" + hex(*d.firstOffset) + ")";
  } else if (d.sameBytes) {
    line += "; the bytes equal the recorded piece: its recorded change hash is wrong";
  }
  return line;
}

std::string durationText(uint64_t ns) {
  char text[32];
  if (ns >= 10'000'000'000ull) {
    std::snprintf(text, sizeof text, "%.1f s", static_cast<double>(ns) / 1e9);
  } else if (ns >= 1'000'000) {
    std::snprintf(text, sizeof text, "%.1f ms", static_cast<double>(ns) / 1e6);
  } else {
    std::snprintf(text, sizeof text, "%.0f us", static_cast<double>(ns) / 1e3);
  }
  return text;
}

// "re-executed 5,000 launches in 41.0 ms (the program: 63.0 ms)"
std::string rateText(const IntervalReport& r) {
  std::string text = "re-executed " + withCommas(r.launchesRun) + (r.launchesRun == 1 ? " launch" : " launches") +
                     " in " + durationText(r.reexecutionNs);
  if (r.programNs != 0) text += " (the program: " + durationText(r.programNs) + ")";
  return text;
}

uint64_t perSecond(uint64_t launches, uint64_t ns) {
  return ns == 0 ? 0 : static_cast<uint64_t>(static_cast<double>(launches) * 1e9 / static_cast<double>(ns));
}

std::string intervalLine(const IntervalReport& r) {
  std::string line = "interval " + std::to_string(r.number) + " (" + launchesText(r) + ", " +
                     checkpointText(r.fromCheckpoint, "start of trace") + " -> " +
                     (r.toCheckpoint && r.fromCheckpoint ? std::to_string(*r.toCheckpoint)
                                                         : checkpointText(r.toCheckpoint, "end of trace")) +
                     "): " + replay::intervalVerdictName(r.verdict);
  switch (r.verdict) {
    case IntervalVerdict::kReproduced:
      line += " (" + humanSize(r.bytesCompared) + " in " + withCommas(r.piecesCompared) + " pieces compared)";
      if (!r.detail.empty()) line += "; " + printable(r.detail);
      break;
    case IntervalVerdict::kDiffers:
      line += " (" + withCommas(r.differingRanges) + (r.differingRanges == 1 ? " range differs" : " ranges differ") +
              "; " + humanSize(r.bytesCompared) + " in " + withCommas(r.piecesCompared) + " pieces compared)";
      break;
    case IntervalVerdict::kFault:
    case IntervalVerdict::kHang:
      if (r.faultLaunch) line += " in launch " + std::to_string(*r.faultLaunch) + " (" + printable(r.faultKernel) + ")";
      line += ": " + printable(r.detail);
      break;
    default:
      line += " (" + printable(r.detail) + ")";
      break;
  }
  const bool failed = r.verdict == IntervalVerdict::kFault || r.verdict == IntervalVerdict::kHang;
  if (r.launchesRun != 0 && !failed) line += "; " + rateText(r);
  return line;
}

Json intervalJson(const IntervalReport& r) {
  Json differences = Json::array();
  for (const auto& d : r.differences) {
    Json j = {
        {"address", d.address}, {"allocationBase", d.allocationBase},   {"kind", d.kind},          {"size", d.size},
        {"pieces", d.pieces},   {"differingPieces", d.differingPieces}, {"sameBytes", d.sameBytes}};
    if (d.firstOffset) j["firstOffset"] = *d.firstOffset;
    differences.push_back(std::move(j));
  }
  Json j = {{"interval", r.number},
            {"verdict", replay::intervalVerdictName(r.verdict)},
            {"detail", r.detail},
            {"bytesCompared", r.bytesCompared},
            {"piecesCompared", r.piecesCompared},
            {"differingRanges", r.differingRanges},
            {"differences", std::move(differences)}};
  if (!r.determinism.empty()) j["determinism"] = r.determinism;
  j["fromCheckpoint"] = r.fromCheckpoint ? Json(*r.fromCheckpoint) : Json(nullptr);
  j["toCheckpoint"] = r.toCheckpoint ? Json(*r.toCheckpoint) : Json(nullptr);
  if (r.firstLaunch <= r.lastLaunch) j["launches"] = {r.firstLaunch, r.lastLaunch};
  if (r.faultLaunch) {
    j["faultLaunch"] = *r.faultLaunch;
    j["faultKernel"] = r.faultKernel;
    j["faultFoundByRerun"] = r.foundByRerun;
  }
  if (r.faultAmong) j["faultAmong"] = {r.faultAmong->first, r.faultAmong->second};
  j["launchesRun"] = r.launchesRun;
  j["reexecutionNs"] = r.reexecutionNs;
  j["programNs"] = r.programNs;
  return j;
}

class Printer : public replay::ReexecutionListener {
 public:
  Printer(const CheckpointReplayArgs& args) : args_(args) {}
  void started(const replay::ReplayDevice& d) override {
    device_ = d;
    if (args_.json) return;
    std::cout << "Re-executing " << args_.path << " on GPU " << d.ordinal << ": " << printable(d.name) << " (sm_"
              << d.sm << "), driver " << versionText(d.driverVersion) << "\n"
              << std::flush;
  }
  void note(const std::string& text) override {
    notes_.push_back(text);
    const bool routine = text.rfind("placed ", 0) == 0 || text.rfind("restored ", 0) == 0;
    if (!args_.json && (!routine || args_.verbose)) std::cout << printable(text) << "\n" << std::flush;
  }
  void launch(const replay::LaunchOutcome& o) override {
    launch_ = o;
    if (args_.json) return;
    std::cout << "launch " << o.launchIndex << " (" << printable(o.kernel) << ", grid "
              << dim3Text(o.grid[0], o.grid[1], o.grid[2]) << ", block " << dim3Text(o.block[0], o.block[1], o.block[2])
              << (o.code.empty() ? "" : ", " + o.code) << "): " << printable(o.detail) << "\n"
              << std::flush;
  }
  void interval(const IntervalReport& r) override {
    intervals_.push_back(r);
    if (args_.json) return;
    std::cout << intervalLine(r) << "\n";
    for (const auto& d : r.differences) std::cout << "  " << differenceLine(d) << "\n";
    for (const auto& line : r.determinism) std::cout << "  determinism: " << printable(line) << "\n";
    if (r.differingRanges > r.differences.size()) {
      std::cout << "  ... and " << withCommas(r.differingRanges - r.differences.size()) << " more ranges\n";
    }
    std::cout << std::flush;
  }

  bool compared() const {
    for (const auto& r : intervals_) {
      if (r.piecesCompared != 0) return true;
    }
    return false;
  }

  int exitCode() const {
    int code = kExitOk;
    for (const auto& r : intervals_) {
      if (r.verdict == IntervalVerdict::kFault || r.verdict == IntervalVerdict::kHang) return kExitFault;
      if (r.verdict == IntervalVerdict::kDiffers) code = kExitDiffers;
      if (r.verdict == IntervalVerdict::kNotReexecutable && code == kExitOk) code = kExitTrace;
    }
    if (code == kExitOk && !compared()) code = kExitTrace;
    return code;
  }

  std::string verdict() const {
    if (!compared()) {
      return "Verdict: nothing compared: no interval ran up to an intact checkpoint, so nothing was verified.";
    }
    size_t reproduced = 0, differs = 0, failed = 0, other = 0;
    for (const auto& r : intervals_) {
      if (r.verdict == IntervalVerdict::kReproduced)
        ++reproduced;
      else if (r.verdict == IntervalVerdict::kDiffers)
        ++differs;
      else if (r.verdict == IntervalVerdict::kFault || r.verdict == IntervalVerdict::kHang)
        ++failed;
      else
        ++other;
    }
    const std::string n = std::to_string(intervals_.size());
    if (failed != 0) return "Verdict: a launch faulted or hung; the replay stopped there.";
    if (differs != 0)
      return "Verdict: " + std::to_string(differs) + " of " + n + " intervals differ from the recording.";
    if (other != 0) {
      return "Verdict: " + std::to_string(reproduced) + " of " + n + " intervals reproduced; " + std::to_string(other) +
             " could not be verified or re-executed (see above).";
    }
    return "Verdict: all " + n + " intervals reproduced as recorded.";
  }

  // The pace over every interval that ran to its end: all of them, and those
  // whose program time the trace gives (the comparison).
  struct Pace {
    uint64_t launches = 0, ns = 0;
    uint64_t comparedLaunches = 0, comparedNs = 0, programNs = 0;
  };
  Pace pace() const {
    Pace p;
    for (const auto& r : intervals_) {
      if (r.launchesRun == 0 || r.reexecutionNs == 0) continue;
      if (r.verdict == IntervalVerdict::kFault || r.verdict == IntervalVerdict::kHang) continue;
      p.launches += r.launchesRun;
      p.ns += r.reexecutionNs;
      if (r.programNs == 0) continue;
      p.comparedLaunches += r.launchesRun;
      p.comparedNs += r.reexecutionNs;
      p.programNs += r.programNs;
    }
    return p;
  }

  std::string paceLine() const {
    const Pace p = pace();
    if (p.launches == 0) return "";
    std::string line = "Re-executed " + withCommas(p.launches) + (p.launches == 1 ? " launch" : " launches") + " in " +
                       durationText(p.ns) + ": " + withCommas(perSecond(p.launches, p.ns)) + " launches/s";
    if (p.programNs == 0) return line + "; the trace does not give the program's time for them.";
    char ratio[32];
    std::snprintf(ratio, sizeof ratio, "%.2f", static_cast<double>(p.programNs) / static_cast<double>(p.comparedNs));
    return line + "; the program ran " + (p.comparedLaunches == p.launches ? "them" : "those it timed") + " at " +
           withCommas(perSecond(p.comparedLaunches, p.programNs)) + " launches/s (re-execution at " + ratio +
           "x the program's pace).";
  }

  void finish(int code) const {
    if (!args_.json) {
      if (const std::string line = paceLine(); !line.empty()) std::cout << "\n" << line;
      std::cout << "\n" << verdict() << "\n";
      return;
    }
    Json intervals = Json::array();
    for (const auto& r : intervals_) intervals.push_back(intervalJson(r));
    Json document = {{"trace", args_.path},
                     {"mode", "checkpoint"},
                     {"device",
                      {{"ordinal", static_cast<int64_t>(device_.ordinal)},
                       {"name", device_.name},
                       {"sm", static_cast<int64_t>(device_.sm)},
                       {"driverVersion", static_cast<int64_t>(device_.driverVersion)}}},
                     {"notes", notes_},
                     {"intervals", std::move(intervals)},
                     {"compared", compared()},
                     {"summary", verdict()},
                     {"pace",
                      {{"launches", pace().launches},
                       {"reexecutionNs", pace().ns},
                       {"timedLaunches", pace().comparedLaunches},
                       {"timedReexecutionNs", pace().comparedNs},
                       {"programNs", pace().programNs}}},
                     {"exitCode", static_cast<int64_t>(code)}};
    if (launch_) {
      const auto& o = *launch_;
      document["launch"] = {{"launchIndex", o.launchIndex},
                            {"kernel", o.kernel},
                            {"grid", {o.grid[0], o.grid[1], o.grid[2]}},
                            {"block", {o.block[0], o.block[1], o.block[2]}},
                            {"code", o.code},
                            {"detail", o.detail}};
    }
    std::cout << jsonText(document) << "\n";
  }

 private:
  const CheckpointReplayArgs& args_;
  replay::ReplayDevice device_;
  std::vector<std::string> notes_;
  std::vector<IntervalReport> intervals_;
  std::optional<replay::LaunchOutcome> launch_;
};

}  // namespace

int runCheckpointReplay(const replay::TraceModel& model, const CheckpointReplayArgs& args) {
  Printer printer(args);
  replay::ReexecutionRequest request;
  request.launch = args.launch;
  try {
    if (args.options.isolate) {
      replay::reexecuteIsolated(model, args.options, request, printer);
    } else {
      replay::reexecuteInProcess(model, args.options, request, printer);
    }
  } catch (const replay::ReplayError& e) {
    std::cerr << "kcap replay: " << e.what() << "\n";
    return kExitTrace;
  }
  const int code = printer.exitCode();
  printer.finish(code);
  return code;
}

}  // namespace kcap::tools
