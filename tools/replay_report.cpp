#include "replay_report.h"

#include <unistd.h>

#include <algorithm>
#include <iostream>
#include <map>
#include <utility>

#include "checkers.h"

namespace kcap::tools {

std::string bufferLine(const replay::BufferReport& b, const char* expected, const char* actual) {
  std::string line = b.label + " (" + hex(b.address) + ", " + humanSize(b.size) + "): ";
  if (b.differingBytes == 0) return line + "identical";
  line += withCommas(b.differingBytes) + " of " + withCommas(b.size) + " bytes differ, first at offset " +
          withCommas(b.firstOffset.value_or(0)) + " (" + hex(b.firstOffset.value_or(0)) + ")";
  if (b.stats) {
    const auto& s = *b.stats;
    const auto n = [](uint64_t v) { return static_cast<unsigned long long>(v); };
    line +=
        strf("; as %s: %llu of %llu elements differ, max abs %.4g, max rel %.4g, max ulp %.0f",
             replay::dtypeName(s.type).c_str(), n(s.mismatches), n(s.elements), s.maxAbsError, s.maxRelError, s.maxUlp);
    if (s.nanExpected || s.nanActual)
      line += strf(", NaN %llu %s / %llu %s", n(s.nanExpected), expected, n(s.nanActual), actual);
    if (s.infExpected || s.infActual)
      line += strf(", Inf %llu %s / %llu %s", n(s.infExpected), expected, n(s.infActual), actual);
    if (s.worstElement) line += strf(", worst at element %llu", n(*s.worstElement));
    if (b.withinTolerance) line += " (within --tolerance)";
  }
  return line;
}

Json buffersJson(const std::vector<replay::BufferReport>& buffers) {
  Json list = Json::array();
  for (const auto& b : buffers) {
    Json buffer;
    buffer["label"] = b.label;
    buffer["address"] = b.address;
    buffer["size"] = b.size;
    buffer["differingBytes"] = b.differingBytes;
    buffer["firstDifferingOffset"] = b.firstOffset ? Json(*b.firstOffset) : Json();
    if (b.stats) {
      const auto& s = *b.stats;
      buffer["stats"] = {{"dtype", replay::dtypeName(s.type)},  {"elements", s.elements},
                         {"mismatches", s.mismatches},          {"maxAbsError", s.maxAbsError},
                         {"maxRelError", s.maxRelError},        {"maxUlp", s.maxUlp},
                         {"nanRecorded", s.nanExpected},        {"nanReplayed", s.nanActual},
                         {"infRecorded", s.infExpected},        {"infReplayed", s.infActual},
                         {"withinTolerance", b.withinTolerance}};
    }
    list.push_back(std::move(buffer));
  }
  return list;
}

std::string graphLaunchLine(const replay::LaunchOutcome& o) {
  std::string line = "graph launch " + std::to_string(o.launchIndex) + " (" + printable(o.kernel) +
                     "): " + replay::verdictName(o.verdict);
  if (o.verdict == replay::Verdict::kReproduced || o.verdict == replay::Verdict::kDiffers) {
    size_t differing = 0;
    for (const auto& b : o.buffers) differing += b.differingBytes != 0 ? 1 : 0;
    line += ", " + std::to_string(o.buffers.size()) + (o.buffers.size() == 1 ? " range" : " ranges") + " compared";
    if (differing != 0) line += ", " + std::to_string(differing) + " differ";
  }
  if (!o.detail.empty()) line += ": " + printable(o.detail);
  return line;
}

Json graphLaunchesJson(const std::vector<replay::LaunchOutcome>& outcomes) {
  Json list = Json::array();
  for (const auto& o : outcomes) {
    if (!o.graph) continue;
    list.push_back({{"graphLaunchIndex", o.launchIndex},
                    {"graph", o.kernel},
                    {"verdict", replay::verdictName(o.verdict)},
                    {"detail", o.detail},
                    {"memory", replay::memoryPathName(o.memory)},
                    {"code", o.code},
                    {"nodes", o.nodeLines},
                    {"buffers", buffersJson(o.buffers)},
                    {"restoredBytes", o.restoredBytes},
                    {"uploadedBytes", o.uploadedBytes},
                    {"readBackBytes", o.readBackBytes},
                    {"restoreNs", o.restoreNs},
                    {"placeNs", o.placeNs}});
  }
  return list;
}

// ---- kcap replay's report --------------------------------------------------

namespace {

using replay::LaunchOutcome;
using replay::Verdict;

constexpr int kExitDiffers = 3;
constexpr int kExitFault = 4;

// This kcap's executable, for compute-sanitizer to start.
std::string selfPath() {
  char path[4096];
  const ssize_t n = ::readlink("/proc/self/exe", path, sizeof path - 1);
  return n > 0 ? std::string(path, static_cast<size_t>(n)) : std::string("kcap");
}

std::string durationText(uint64_t ns) {
  if (ns < 10'000) return strf("%llu ns", static_cast<unsigned long long>(ns));
  if (ns < 10'000'000) return strf("%.1f us", static_cast<double>(ns) / 1e3);
  return strf("%.2f ms", static_cast<double>(ns) / 1e6);
}

struct TimingSummary {
  uint64_t median = 0, min = 0, max = 0;
};
std::optional<TimingSummary> timing(const LaunchOutcome& o) {
  if (o.timesNs.empty()) return std::nullopt;
  std::vector<uint64_t> t = o.timesNs;
  std::sort(t.begin(), t.end());
  return TimingSummary{t[t.size() / 2], t.front(), t.back()};
}

}  // namespace

ReplayReport::ReplayReport(ReportOptions options, const replay::TraceModel& model, const replay::Selection& selection)
    : opt_(std::move(options)), widths_(plannedWidths(model, selection)) {}

void ReplayReport::add(const LaunchOutcome& o) {
  outcomes_.push_back(o);
  if (opt_.json) return;
  start();
  if (o.graph) {
    printGraphLaunch(o);
  } else {
    if (!headerShown_) std::cout << table().renderHeader(widths_, "");
    headerShown_ = true;
    std::cout << table().renderRow(rowOf(o), widths_, "");
  }
  std::cout << std::flush;
}

void ReplayReport::completeChecks(const replay::ReplayOptions& options) {
  for (auto& o : outcomes_) {
    if (o.graph) continue;  // the checkers replay one kernel launch
    for (const std::string& name : options.checks) {
      const bool present = std::any_of(o.checks.begin(), o.checks.end(), [&](const auto& c) { return c.name == name; });
      if (present) continue;
      if (name == "sanitizer") {
        o.checks.push_back(replay::runSanitizer(options, o.launchIndex, selfPath()));
      } else {
        o.checks.push_back({name,
                            replay::CheckStatus::kNotRun,
                            "the launch did not replay cleanly (" + std::string(replay::verdictName(o.verdict)) + ")",
                            {}});
      }
    }
  }
}

int ReplayReport::exitCode() const {
  int code = kExitOk;
  for (const auto& o : outcomes_) {
    if (o.verdict == Verdict::kFault || o.verdict == Verdict::kHang) return kExitFault;
    if (o.verdict == Verdict::kDiffers) code = kExitDiffers;
    if (o.verdict == Verdict::kError && code == kExitOk) code = kExitTrace;
    for (const auto& c : o.checks) {
      if (c.status == replay::CheckStatus::kFinding) code = kExitDiffers;
    }
  }
  return code;
}

void ReplayReport::printText() {
  start();
  for (const auto& o : outcomes_) {
    if (o.graph) continue;
    const bool interesting = o.verdict != Verdict::kReproduced || opt_.verbose || !o.checks.empty();
    if (!interesting) continue;
    std::cout << "\nlaunch " << o.launchIndex << " (" << printable(o.kernel) << "): " << replay::verdictName(o.verdict);
    if (!o.detail.empty()) std::cout << ": " << printable(o.detail);
    std::cout << "\n";
    for (const auto& b : o.buffers) {
      if (b.differingBytes != 0 || opt_.verbose) std::cout << "  " << bufferLine(b) << "\n";
    }
    for (const auto& c : o.checks) {
      std::cout << "  check " << c.name << ": " << replay::checkStatusName(c.status);
      if (!c.summary.empty()) std::cout << ": " << printable(c.summary);
      std::cout << "\n";
      for (const auto& d : c.details) std::cout << "    " << printable(d) << "\n";
    }
    if (o.verdict == Verdict::kDiffers || o.verdict == Verdict::kFault || o.verdict == Verdict::kHang) {
      std::cout << "  alone: kcap replay " << word(opt_.path) << " --launch " << o.launchIndex << "\n";
    }
  }
  std::cout << "\n" << summary() << "\n" << verdict() << "\n";
}

std::string ReplayReport::verdict() const {
  size_t reproduced = 0, tolerated = 0, differs = 0, failed = 0, other = 0;
  for (const auto& o : outcomes_) {
    switch (o.verdict) {
      case Verdict::kReproduced: {
        const bool loose =
            std::any_of(o.buffers.begin(), o.buffers.end(), [](const auto& b) { return b.differingBytes != 0; });
        ++(loose ? tolerated : reproduced);
        break;
      }
      case Verdict::kDiffers:
        ++differs;
        break;
      case Verdict::kFault:
      case Verdict::kHang:
        ++failed;
        break;
      default:
        ++other;
        break;
    }
  }
  const size_t n = outcomes_.size();
  const size_t graphs =
      static_cast<size_t>(std::count_if(outcomes_.begin(), outcomes_.end(), [](const auto& o) { return o.graph; }));
  // "launches", "graph launches", or both counted together.
  const std::string noun = graphs == 0   ? "launches"
                           : graphs == n ? "graph launches"
                                         : "launches (graph launches included)";
  if (failed != 0)
    return "Verdict: " + std::to_string(failed) + " of " + std::to_string(n) + " " + noun + " faulted or hung here.";
  if (differs != 0)
    return "Verdict: " + std::to_string(differs) + " of " + std::to_string(n) + " " + noun +
           " differ from the recording.";
  if (other != 0)
    return "Verdict: " + std::to_string(n - other) + " of " + std::to_string(n) + " " + noun + " ran as recorded; " +
           std::to_string(other) + " could not be verified or replayed (see above).";
  if (tolerated != 0)
    return "Verdict: all " + std::to_string(n) + " " + noun + " reproduced, " + std::to_string(tolerated) +
           " within --tolerance.";
  if (n == 1)
    return graphs == 1 ? "Verdict: the graph launch reproduced bit-exactly as recorded."
                       : "Verdict: the launch reproduced bit-exactly as recorded.";
  return "Verdict: all " + std::to_string(n) + " " + noun + " reproduced bit-exactly as recorded.";
}

void ReplayReport::printJson() const {
  Json launches = Json::array();
  for (const auto& o : outcomes_) {
    if (o.graph) continue;
    Json launch = {{"launchIndex", o.launchIndex},
                   {"kernel", o.kernel},
                   {"verdict", replay::verdictName(o.verdict)},
                   {"detail", o.detail},
                   {"memory", replay::memoryPathName(o.memory)},
                   {"code", o.code},
                   {"grid", {o.grid[0], o.grid[1], o.grid[2]}},
                   {"block", {o.block[0], o.block[1], o.block[2]}},
                   {"sharedMemBytes", o.sharedMemBytes},
                   {"buffers", buffersJson(o.buffers)}};
    if (const auto t = timing(o)) {
      launch["timeNs"] = {{"median", t->median},
                          {"min", t->min},
                          {"max", t->max},
                          {"repeats", static_cast<uint64_t>(o.timesNs.size())}};
    }
    if (o.recordedDurationNs) launch["recordedDurationNs"] = *o.recordedDurationNs;
    launch["restoredBytes"] = o.restoredBytes;
    launch["uploadedBytes"] = o.uploadedBytes;
    launch["readBackBytes"] = o.readBackBytes;
    launch["restoreNs"] = o.restoreNs;
    launch["placeNs"] = o.placeNs;
    launch["restoreWaitNs"] = o.restoreWaitNs;
    if (!o.checks.empty()) {
      Json checks = Json::array();
      for (const auto& c : o.checks) {
        checks.push_back({{"name", c.name},
                          {"status", replay::checkStatusName(c.status)},
                          {"summary", c.summary},
                          {"details", c.details}});
      }
      launch["checks"] = std::move(checks);
    }
    launches.push_back(std::move(launch));
  }
  const Json document = {{"trace", opt_.path},
                         {"device",
                          {{"ordinal", static_cast<int64_t>(device.ordinal)},
                           {"name", device.name},
                           {"sm", static_cast<int64_t>(device.sm)},
                           {"driverVersion", static_cast<int64_t>(device.driverVersion)}}},
                         {"launches", std::move(launches)},
                         {"graphLaunches", graphLaunchesJson(outcomes_)},
                         {"summary", summary()},
                         {"exitCode", static_cast<int64_t>(exitCode())}};
  std::cout << jsonText(document) << "\n";
}

std::string ReplayReport::summary() const {
  std::string text;
  for (const bool graph : {false, true}) {
    std::map<std::string, size_t> counts;
    size_t total = 0;
    for (const auto& o : outcomes_) {
      if (o.graph != graph) continue;
      ++counts[replay::verdictName(o.verdict)];
      ++total;
    }
    if (total == 0 && (graph || !outcomes_.empty())) continue;
    const std::string noun = graph ? " graph launch" : " launch";
    text += (text.empty() ? "" : "; ") + std::to_string(total) + noun + (total == 1 ? "" : "es") + ":";
    bool first = true;
    for (const auto& [name, n] : counts) {
      text += (first ? " " : ", ") + std::to_string(n) + " " + name;
      first = false;
    }
  }
  return text;
}

void ReplayReport::start() {
  if (started_) return;
  started_ = true;
  if (!device.name.empty()) {
    std::cout << "Replaying " << opt_.path << " on GPU " << device.ordinal << ": " << printable(device.name) << " (sm_"
              << device.sm << "), driver " << versionText(device.driverVersion) << "\n\n";
  }
}

Table ReplayReport::table() { return Table({"launch", "kernel", "grid", "block", "memory", "code", "result"}, "r"); }

std::vector<size_t> ReplayReport::plannedWidths(const replay::TraceModel& model, const replay::Selection& selection) {
  Table sizing = table();
  for (const uint64_t index : selection.launchIndices) {
    const replay::LaunchRecord* l = model.launch(index);
    if (l == nullptr) continue;
    const auto e = l->event();
    const auto name = e.getKernelName();
    sizing.row({std::to_string(index), printable(std::string_view(name.cStr(), name.size())),
                dim3Text(e.getGridX(), e.getGridY(), e.getGridZ()),
                dim3Text(e.getBlockX(), e.getBlockY(), e.getBlockZ())});
  }
  using replay::MemoryPath;
  for (const MemoryPath path : {MemoryPath::kNone, MemoryPath::kFixed, MemoryPath::kRelocated, MemoryPath::kMixed}) {
    sizing.row({"", "", "", "", replay::memoryPathName(path)});
  }
  sizing.row({"", "", "", "", "", "SASS sm_100a"});
  return sizing.widths();
}

std::vector<std::string> ReplayReport::rowOf(const LaunchOutcome& o) {
  std::string result = replay::verdictName(o.verdict);
  if (const auto t = timing(o)) {
    result += "  " + durationText(t->median) + " median of " + std::to_string(o.timesNs.size()) + " (min " +
              durationText(t->min) + ", max " + durationText(t->max) + ")";
    if (o.recordedDurationNs) result += ", recorded " + durationText(*o.recordedDurationNs);
  } else if (o.recordedDurationNs) {
    result += "  recorded " + durationText(*o.recordedDurationNs);
  }
  return {std::to_string(o.launchIndex),
          printable(o.kernel),
          dim3Text(o.grid[0], o.grid[1], o.grid[2]),
          dim3Text(o.block[0], o.block[1], o.block[2]),
          replay::memoryPathName(o.memory),
          o.code.empty() ? "-" : o.code,
          result};
}

void ReplayReport::printGraphLaunch(const LaunchOutcome& o) const {
  std::cout << "\n" << graphLaunchLine(o) << "\n";
  for (const auto& line : o.nodeLines) std::cout << "  " << printable(line) << "\n";
  for (const auto& b : o.buffers) {
    if (b.differingBytes != 0 || opt_.verbose) std::cout << "  " << bufferLine(b) << "\n";
  }
  if (o.verdict == Verdict::kDiffers || o.verdict == Verdict::kFault || o.verdict == Verdict::kHang) {
    std::cout << "  alone: kcap replay " << word(opt_.path) << " --graph-launch " << o.launchIndex << "\n";
  }
}

}  // namespace kcap::tools
