// kcap bisect on a checkpoint trace (bisect_checkpoint.h). Each side's
// re-execution runs in a child process that streams what it finds over a
// pipe, one line each: `note`, `begin` (an interval about to run, JSON),
// `start N` / `done N` around each launch, `interval` and `launch` (JSON),
// `error`. A child that dies inside a launch gives that launch FAULT on its
// side; one that does not finish a launch within the timeout, HANG.
#include "bisect_checkpoint.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

#include "hex_text.h"
#include "driver.h"
#include "reexecutor.h"

namespace kcap::replay {
namespace {

using Json = nlohmann::json;

std::string oneLine(std::string text) {
  for (char& c : text) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return text;
}

std::string jsonLine(const Json& json) { return json.dump(-1, ' ', false, Json::error_handler_t::replace); }

void writeAll(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the parent is gone
    done += static_cast<size_t>(n);
  }
}

Json encode(const SideInterval& i) {
  Json j = {{"from", i.from},
            {"to", i.to},
            {"firstLaunch", i.firstLaunch},
            {"lastLaunch", i.lastLaunch},
            {"verdict", static_cast<int>(i.verdict)},
            {"detail", i.detail},
            {"endHashes", i.endHashes}};
  if (i.faultLaunch) j["faultLaunch"] = *i.faultLaunch;
  return j;
}

SideInterval decodeInterval(const Json& j) {
  SideInterval i;
  i.from = j.at("from").get<uint64_t>();
  i.to = j.at("to").get<uint64_t>();
  i.firstLaunch = j.at("firstLaunch").get<uint64_t>();
  i.lastLaunch = j.at("lastLaunch").get<uint64_t>();
  i.verdict = static_cast<IntervalVerdict>(j.at("verdict").get<int>());
  i.detail = j.at("detail").get<std::string>();
  i.endHashes = j.at("endHashes").get<std::vector<uint64_t>>();
  if (j.contains("faultLaunch")) i.faultLaunch = j.at("faultLaunch").get<uint64_t>();
  return i;
}

Json encode(const SideLaunch& l) {
  Json ranges = Json::array();
  for (const SideRange& r : l.ranges) {
    ranges.push_back({r.address, r.kind, r.size, r.pieceSize, r.pieces});
  }
  return {{"launchIndex", l.launchIndex}, {"ranges", std::move(ranges)}, {"hashes", l.hashes}};
}

SideLaunch decodeLaunch(const Json& j) {
  SideLaunch l;
  l.launchIndex = j.at("launchIndex").get<uint64_t>();
  for (const Json& r : j.at("ranges")) {
    l.ranges.push_back({r.at(0).get<uint64_t>(), r.at(1).get<std::string>(), r.at(2).get<uint64_t>(),
                        r.at(3).get<uint64_t>(), r.at(4).get<uint64_t>()});
  }
  l.hashes = j.at("hashes").get<std::vector<uint64_t>>();
  return l;
}

// In the child: passes what the side finds to the parent as it goes.
class Streamer : public ReexecutionListener {
 public:
  Streamer(int fd, SideRun& run) : fd_(fd), run_(run) {}
  void note(const std::string& text) override { writeAll(fd_, "note " + oneLine(text) + "\n"); }
  void launchStarting(uint64_t index) override {
    flush();
    writeAll(fd_, "start " + std::to_string(index) + "\n");
  }
  void launchDone(uint64_t index) override { writeAll(fd_, "done " + std::to_string(index) + "\n"); }
  void intervalStarting(const IntervalReport& r) override {
    flush();
    writeAll(fd_, "begin " + jsonLine({r.number, r.toCheckpoint.value_or(0), r.firstLaunch, r.lastLaunch}) + "\n");
  }
  void interval(const IntervalReport& /*report*/) override {}
  void flush() {
    for (; notes_ < run_.notes.size(); ++notes_) writeAll(fd_, "note " + oneLine(run_.notes[notes_]) + "\n");
    for (; intervals_ < run_.intervals.size(); ++intervals_) {
      writeAll(fd_, "interval " + jsonLine(encode(run_.intervals[intervals_])) + "\n");
    }
    for (; launches_ < run_.launches.size(); ++launches_) {
      writeAll(fd_, "launch " + jsonLine(encode(run_.launches[launches_])) + "\n");
    }
  }

 private:
  int fd_;
  SideRun& run_;
  size_t notes_ = 0, intervals_ = 0, launches_ = 0;
};

[[noreturn]] void runChild(int fd, const TraceModel& model, const ReplayOptions& options,
                           std::optional<uint64_t> interval) {
  SideRun run;
  Streamer streamer(fd, run);
  try {
    auto reader = format::TraceReader::open(options.tracePath);
    Reexecutor reexecutor(model, *reader, options);
    reexecutor.runSide(interval, run, streamer);
  } catch (const std::exception& e) {
    streamer.flush();
    writeAll(fd, "error " + oneLine(e.what()) + "\n");
  } catch (...) {
    writeAll(fd, "error an unknown exception\n");
  }
  streamer.flush();
  ::close(fd);
  std::fflush(nullptr);
  ::_exit(0);
}

// One side, in a child process; the parent never touches the GPU.
SideRun runSideProcess(const TraceModel& model, const ReplayOptions& options, std::optional<uint64_t> interval) {
  int fds[2];
  if (::pipe(fds) != 0) throw ReplayError("cannot make a pipe for the replay process");
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    throw ReplayError("cannot start a replay process");
  }
  if (pid == 0) {
    ::close(fds[0]);
    runChild(fds[1], model, options, interval);
  }
  ::close(fds[1]);
  SideRun run;
  std::optional<uint64_t> inLaunch;
  std::optional<SideInterval> current;  // the interval running
  std::string buffer;
  bool hung = false;
  const auto handle = [&](const std::string& line) {
    const size_t space = line.find(' ');
    const std::string verb = line.substr(0, space), rest = space == std::string::npos ? "" : line.substr(space + 1);
    try {
      if (verb == "note") {
        run.notes.push_back(rest);
      } else if (verb == "error") {
        run.error = rest;
      } else if (verb == "start") {
        inLaunch = std::stoull(rest);
      } else if (verb == "done") {
        inLaunch.reset();
      } else if (verb == "begin") {
        const Json j = Json::parse(rest);
        current = SideInterval{};
        current->from = j.at(0).get<uint64_t>();
        current->to = j.at(1).get<uint64_t>();
        current->firstLaunch = j.at(2).get<uint64_t>();
        current->lastLaunch = j.at(3).get<uint64_t>();
      } else if (verb == "interval") {
        run.intervals.push_back(decodeInterval(Json::parse(rest)));
        current.reset();
      } else if (verb == "launch") {
        run.launches.push_back(decodeLaunch(Json::parse(rest)));
      }
    } catch (const std::exception& e) {
      run.error = std::string("the replay process sent what cannot be read: ") + e.what();
    }
  };
  const int timeoutMs = static_cast<int>(std::min(options.timeoutSeconds, 86400.0) * 1000);
  for (;;) {
    pollfd p{fds[0], POLLIN, 0};
    const int ready = ::poll(&p, 1, inLaunch ? timeoutMs : -1);
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) {
      hung = true;
      ::kill(pid, SIGKILL);
      break;
    }
    char chunk[65536];
    const ssize_t n = ::read(fds[0], chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    buffer.append(chunk, static_cast<size_t>(n));
    for (size_t end; (end = buffer.find('\n')) != std::string::npos;) {
      handle(buffer.substr(0, end));
      buffer.erase(0, end + 1);
    }
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  const bool died = hung || !WIFEXITED(status) || WEXITSTATUS(status) != 0;
  if (died && current) {
    // The interval the process was in when it died or hung ends there.
    current->verdict = hung ? IntervalVerdict::kHang : IntervalVerdict::kFault;
    current->faultLaunch = inLaunch;
    current->detail =
        hung ? "it did not finish within " + std::to_string(options.timeoutSeconds) + " s"
             : "the replay process died" +
                   (WIFSIGNALED(status) ? " (signal " + std::to_string(WTERMSIG(status)) + ")" : std::string());
    if (!inLaunch) current->verdict = IntervalVerdict::kNotReexecutable;
    run.intervals.push_back(std::move(*current));
  } else if (died && run.error.empty()) {
    run.error = "the replay process died before it ran any interval";
  }
  return run;
}

bool failed(IntervalVerdict v) { return v == IntervalVerdict::kFault || v == IntervalVerdict::kHang; }

std::string failsText(IntervalVerdict v) { return v == IntervalVerdict::kHang ? "it hangs" : "it faults"; }

std::string kernelOf(const TraceModel& model, uint64_t index) {
  const LaunchRecord* l = model.launch(index);
  return l != nullptr ? std::string(l->event().getKernelName().cStr()) : std::string("?");
}

IntervalReport reportOf(const SideInterval& i, IntervalVerdict verdict) {
  IntervalReport r;
  r.number = i.from;
  r.fromCheckpoint = i.from;
  r.toCheckpoint = i.to;
  r.firstLaunch = i.firstLaunch;
  r.lastLaunch = i.lastLaunch;
  r.verdict = verdict;
  return r;
}

std::string rangeLine(const RangeDifference& d) {
  std::string line = "range " + hexText(d.address) + " (" + d.kind + ", " + std::to_string(d.size) +
                     " bytes): " + std::to_string(d.differingPieces) + " of " + std::to_string(d.pieces) +
                     (d.pieces == 1 ? " piece differs" : " pieces differ");
  if (d.firstOffset) line += ", first differing byte at offset " + std::to_string(*d.firstOffset);
  if (d.sameBytes) line += "; the bytes equal the recorded piece: its recorded change hash is wrong";
  return line;
}

// Against the recording: `kcap replay`'s re-execution, its first interval
// that does not reproduce.
class Collector : public ReexecutionListener {
 public:
  void note(const std::string& text) override {
    if (text.rfind("placed ", 0) != 0 && text.rfind("restored ", 0) != 0) notes.push_back(text);
  }
  void interval(const IntervalReport& report) override { intervals.push_back(report); }
  std::vector<std::string> notes;
  std::vector<IntervalReport> intervals;
};

CheckpointBisectResult againstRecording(const TraceModel& model, const BisectOptions& options) {
  Collector collector;
  reexecuteIsolated(model, options.base, ReexecutionRequest{}, collector);
  CheckpointBisectResult result;
  result.notes = collector.notes;
  for (const IntervalReport& r : collector.intervals) {
    ++result.intervals;
    if (r.verdict == IntervalVerdict::kNotReexecutable) ++result.notComparable;
    if (r.piecesCompared != 0) ++result.compared;
    if (r.verdict != IntervalVerdict::kDiffers && !failed(r.verdict)) continue;
    CheckpointDivergence d;
    d.interval = r;
    d.verdict = r.verdict;
    const std::string flags = options.base.device != 0 ? " --device " + std::to_string(options.base.device) : "";
    if (failed(r.verdict) && r.faultLaunch) {
      d.launch = r.faultLaunch;
      d.kernel = r.faultKernel;
      d.why = failsText(r.verdict) + " when re-executed: " + r.detail;
      d.reproduce = "kcap replay " + options.base.tracePath + " --launch " + std::to_string(*r.faultLaunch) + flags;
    } else {
      d.why = "its end state differs from the recorded checkpoint " + std::to_string(r.toCheckpoint.value_or(0)) +
              "; the recording holds no per-launch outputs, so which of its launches diverges first needs a "
              "second side (--against force-ptx, --against override:KERNEL=IMAGE or --devices A,B)";
      for (const RangeDifference& diff : r.differences) d.ranges.push_back(rangeLine(diff));
      if (r.differingRanges > r.differences.size()) {
        d.ranges.push_back("... and " + std::to_string(r.differingRanges - r.differences.size()) + " more ranges");
      }
      d.reproduce = "kcap replay " + options.base.tracePath +
                    (r.firstLaunch <= r.lastLaunch ? " --launch " + std::to_string(r.firstLaunch) : "") + flags;
    }
    result.first = std::move(d);
    break;
  }
  return result;
}

// Which of the launch's ranges differ between the sides, one line each;
// empty when none does.
std::vector<std::string> differingRanges(const SideLaunch& a, const SideLaunch& b) {
  std::vector<std::string> lines;
  if (a.hashes.size() != b.hashes.size() || a.ranges.size() != b.ranges.size()) {
    lines.push_back("the sides hashed different ranges for it");
    return lines;
  }
  uint64_t at = 0;  // the range's first piece in the hashes
  for (const SideRange& r : a.ranges) {
    uint64_t differing = 0;
    std::optional<uint64_t> first;
    for (uint64_t p = 0; p < r.pieces && 2 * (at + p) + 1 < a.hashes.size(); ++p) {
      const uint64_t h = 2 * (at + p);
      if (a.hashes[h] == b.hashes[h] && a.hashes[h + 1] == b.hashes[h + 1]) continue;
      ++differing;
      if (!first) first = p;
    }
    at += r.pieces;
    if (differing == 0) continue;
    const uint64_t from = *first * r.pieceSize, to = std::min(r.size, from + r.pieceSize);
    lines.push_back("range " + hexText(r.address) + " (" + r.kind + ", " + std::to_string(r.size) +
                    " bytes): " + std::to_string(differing) + " of " + std::to_string(r.pieces) +
                    (r.pieces == 1 ? " piece differs" : " pieces differ") + ", the first at bytes " +
                    std::to_string(from) + ".." + std::to_string(to - 1));
  }
  return lines;
}

CheckpointBisectResult betweenSides(const TraceModel& model, const BisectOptions& options) {
  const ReplayOptions a = options.base, b = sideB(options);
  const std::string nameA = describeSide(options, false), nameB = describeSide(options, true);
  const SideRun runA = runSideProcess(model, a, std::nullopt);
  if (runA.intervals.empty() && !runA.error.empty()) throw ReplayError(nameA + ": " + runA.error);
  const SideRun runB = runSideProcess(model, b, std::nullopt);
  if (runB.intervals.empty() && !runB.error.empty()) throw ReplayError(nameB + ": " + runB.error);
  CheckpointBisectResult result;
  for (const std::string& note : runA.notes) {
    if (note.rfind("placed ", 0) != 0) result.notes.push_back(note);
  }
  const std::string reproduceFlags = sideBReplayFlags(options);
  const auto reproduce = [&](uint64_t launch) {
    return "kcap replay " + options.base.tracePath + " --launch " + std::to_string(launch) + reproduceFlags;
  };
  // A launch that fails on either side diverges there.
  const auto failure = [&](const SideInterval& sa, const SideInterval& sb) {
    CheckpointDivergence d;
    const bool onB = failed(sb.verdict);
    const SideInterval& f = onB ? sb : sa;
    d.interval = reportOf(f, f.verdict);
    d.verdict = f.verdict;
    d.launch = f.faultLaunch;
    if (d.launch) d.kernel = kernelOf(model, *d.launch);
    if (onB && failed(sa.verdict)) {
      d.why = "it fails on both sides: " + sa.detail;
    } else if (onB) {
      d.why = failsText(sb.verdict) + " with " + nameB + ": " + sb.detail;
    } else {
      d.why = failsText(sa.verdict) + " with " + nameA + " but not with " + nameB + ": " + sa.detail;
    }
    if (d.launch) d.reproduce = reproduce(*d.launch);
    return d;
  };
  for (size_t i = 0; i < runA.intervals.size() && i < runB.intervals.size(); ++i) {
    const SideInterval &sa = runA.intervals[i], &sb = runB.intervals[i];
    if (sa.from != sb.from || sa.to != sb.to) break;  // cannot happen: both sides plan from the same trace
    ++result.intervals;
    if (failed(sa.verdict) || failed(sb.verdict)) {
      result.first = failure(sa, sb);
      return result;
    }
    if (sa.verdict != IntervalVerdict::kReproduced || sb.verdict != IntervalVerdict::kReproduced) {
      ++result.notComparable;
      continue;
    }
    if (sa.endHashes.empty() && sb.endHashes.empty()) continue;  // the end checkpoint holds no memory
    ++result.compared;
    if (sa.endHashes == sb.endHashes) continue;

    // The end states differ: the interval again, each launch's outputs hashed.
    const SideRun launchesA = runSideProcess(model, a, sa.from);
    const SideRun launchesB = runSideProcess(model, b, sa.from);
    CheckpointDivergence d;
    d.interval = reportOf(sa, IntervalVerdict::kDiffers);
    const size_t both = std::min(launchesA.launches.size(), launchesB.launches.size());
    for (size_t k = 0; k < both; ++k) {
      const SideLaunch &la = launchesA.launches[k], &lb = launchesB.launches[k];
      ++result.launchesHashed;
      if (la.launchIndex != lb.launchIndex) break;
      std::vector<std::string> lines = differingRanges(la, lb);
      if (lines.empty()) continue;
      d.launch = la.launchIndex;
      d.kernel = kernelOf(model, la.launchIndex);
      d.why = "its outputs with " + nameB + " differ from those with " + nameA;
      d.ranges = std::move(lines);
      d.reproduce = reproduce(la.launchIndex);
      result.first = std::move(d);
      return result;
    }
    const SideInterval* againA = launchesA.intervals.empty() ? nullptr : &launchesA.intervals.front();
    const SideInterval* againB = launchesB.intervals.empty() ? nullptr : &launchesB.intervals.front();
    if (againA != nullptr && againB != nullptr && (failed(againA->verdict) || failed(againB->verdict))) {
      result.first = failure(*againA, *againB);
      return result;
    }
    d.why =
        "the end states of the sides differ, but no launch's outputs do as far as its pointer parameters "
        "reach (" +
        std::to_string(both) +
        " launches hashed): a launch writes memory its parameters do not point to (a module global?), or "
        "a side is not deterministic";
    if (sa.firstLaunch <= sa.lastLaunch) d.reproduce = reproduce(sa.firstLaunch);
    result.first = std::move(d);
    return result;
  }
  if (!runB.error.empty()) result.notes.push_back(nameB + ": " + runB.error);
  if (!runA.error.empty()) result.notes.push_back(nameA + ": " + runA.error);
  return result;
}

}  // namespace

CheckpointBisectResult bisectCheckpoints(const TraceModel& model, const BisectOptions& options) {
  if (options.perf || options.sequence) {
    throw ReplayError("--perf and --sequence apply to traces with per-launch memory, not to checkpoint traces");
  }
  return options.against == Against::kRecorded ? againstRecording(model, options) : betweenSides(model, options);
}

}  // namespace kcap::replay
