// Re-execution in a child process, as isolation.h does for launch replay: a
// faulting kernel poisons the context, a hung one never returns. The child
// streams what it finds over a pipe, one line each: `device`, `note`,
// `start N` / `done N` around each launch waited for, `queued N` /
// `completed N` as launches submitted without a wait go out and complete,
// `begin` (an interval about to run), `launch` and `interval` (JSON). A
// child that dies inside a launch gives the interval FAULT naming that
// launch; one that stops answering within the timeout, HANG. When launches
// were in flight the launch is not known: a second child runs the interval
// again with a wait after every launch, and its finding names it.
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>
#include <sstream>

#include "driver.h"
#include "reexecute.h"
#include "replayer.h"

namespace kcap::replay {
namespace {

using Json = nlohmann::json;

void writeAll(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the parent is gone
    done += static_cast<size_t>(n);
  }
}

std::string oneLine(std::string text) {
  for (char& c : text) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return text;
}

// dump() with invalid UTF-8 replaced: kernel names and messages come from the trace.
std::string jsonLine(const Json& json) { return json.dump(-1, ' ', false, Json::error_handler_t::replace); }

Json encode(const IntervalReport& r) {
  Json differences = Json::array();
  for (const RangeDifference& d : r.differences) {
    Json j = {{"address", d.address}, {"allocationBase", d.allocationBase},  {"kind", d.kind}, {"size", d.size},
              {"pieces", d.pieces},   {"differingPieces", d.differingPieces}};
    if (d.firstOffset) j["firstOffset"] = *d.firstOffset;
    j["sameBytes"] = d.sameBytes;
    differences.push_back(std::move(j));
  }
  Json j = {{"number", r.number},
            {"firstLaunch", r.firstLaunch},
            {"lastLaunch", r.lastLaunch},
            {"verdict", static_cast<int>(r.verdict)},
            {"detail", r.detail},
            {"bytesCompared", r.bytesCompared},
            {"piecesCompared", r.piecesCompared},
            {"differences", std::move(differences)},
            {"differingRanges", r.differingRanges},
            {"faultKernel", r.faultKernel},
            {"determinism", r.determinism}};
  if (r.fromCheckpoint) j["from"] = *r.fromCheckpoint;
  if (r.toCheckpoint) j["to"] = *r.toCheckpoint;
  if (r.faultLaunch) j["faultLaunch"] = *r.faultLaunch;
  if (r.faultAmong) j["faultAmong"] = {r.faultAmong->first, r.faultAmong->second};
  j["foundByRerun"] = r.foundByRerun;
  j["rate"] = {r.launchesRun, r.reexecutionNs, r.programNs};
  return j;
}

IntervalReport decodeInterval(const Json& j) {
  IntervalReport r;
  r.number = j.at("number").get<uint64_t>();
  r.firstLaunch = j.at("firstLaunch").get<uint64_t>();
  r.lastLaunch = j.at("lastLaunch").get<uint64_t>();
  const int verdict = j.at("verdict").get<int>();
  if (verdict < 0 || verdict > static_cast<int>(IntervalVerdict::kUnverified)) throw std::runtime_error("verdict");
  r.verdict = static_cast<IntervalVerdict>(verdict);
  r.detail = j.at("detail").get<std::string>();
  r.bytesCompared = j.at("bytesCompared").get<uint64_t>();
  r.piecesCompared = j.at("piecesCompared").get<uint64_t>();
  r.differingRanges = j.at("differingRanges").get<uint64_t>();
  r.faultKernel = j.at("faultKernel").get<std::string>();
  r.determinism = j.at("determinism").get<std::vector<std::string>>();
  for (const Json& d : j.at("differences")) {
    RangeDifference difference{d.at("address").get<uint64_t>(),
                               d.at("allocationBase").get<uint64_t>(),
                               d.at("kind").get<std::string>(),
                               d.at("size").get<uint64_t>(),
                               d.at("differingPieces").get<uint64_t>(),
                               d.at("pieces").get<uint64_t>(),
                               std::nullopt,
                               false};
    if (d.contains("firstOffset")) difference.firstOffset = d.at("firstOffset").get<uint64_t>();
    difference.sameBytes = d.at("sameBytes").get<bool>();
    r.differences.push_back(std::move(difference));
  }
  if (j.contains("from")) r.fromCheckpoint = j.at("from").get<uint64_t>();
  if (j.contains("to")) r.toCheckpoint = j.at("to").get<uint64_t>();
  if (j.contains("faultLaunch")) r.faultLaunch = j.at("faultLaunch").get<uint64_t>();
  if (j.contains("faultAmong")) {
    r.faultAmong = {{j.at("faultAmong").at(0).get<uint64_t>(), j.at("faultAmong").at(1).get<uint64_t>()}};
  }
  r.foundByRerun = j.at("foundByRerun").get<bool>();
  const Json& rate = j.at("rate");
  r.launchesRun = rate.at(0).get<uint64_t>();
  r.reexecutionNs = rate.at(1).get<uint64_t>();
  r.programNs = rate.at(2).get<uint64_t>();
  return r;
}

class PipeListener : public ReexecutionListener {
 public:
  explicit PipeListener(int fd) : fd_(fd) {}
  void started(const ReplayDevice& d) override {
    writeAll(fd_,
             "device " + std::to_string(d.sm) + " " + std::to_string(d.driverVersion) + " " + oneLine(d.name) + "\n");
  }
  void note(const std::string& text) override { writeAll(fd_, "note " + oneLine(text) + "\n"); }
  void launchStarting(uint64_t index) override { writeAll(fd_, "start " + std::to_string(index) + "\n"); }
  void launchDone(uint64_t index) override { writeAll(fd_, "done " + std::to_string(index) + "\n"); }
  void launchesQueued(uint64_t index) override { writeAll(fd_, "queued " + std::to_string(index) + "\n"); }
  void launchesCompleted(uint64_t index) override { writeAll(fd_, "completed " + std::to_string(index) + "\n"); }
  void launch(const LaunchOutcome& o) override {
    writeAll(
        fd_,
        "launch " +
            jsonLine({{"launchIndex", o.launchIndex}, {"detail", o.detail}, {"code", o.code}, {"kernel", o.kernel}}) +
            "\n");
  }
  void intervalStarting(const IntervalReport& soFar) override {
    writeAll(fd_, "begin " + jsonLine(encode(soFar)) + "\n");
  }
  void interval(const IntervalReport& report) override { writeAll(fd_, "interval " + jsonLine(encode(report)) + "\n"); }

 private:
  int fd_;
};

[[noreturn]] void child(const TraceModel& model, const ReplayOptions& options, const ReexecutionRequest& request,
                        int fd) {
  try {
    PipeListener listener(fd);
    reexecuteInProcess(model, options, request, listener);
  } catch (const std::exception& e) {
    writeAll(fd, "fatal " + oneLine(e.what()) + "\n");
  }
  ::close(fd);
  _exit(0);  // no atexit handlers, no driver teardown of a poisoned context
}

std::string describeStatus(int status) {
  if (WIFSIGNALED(status)) return std::string("killed by signal ") + strsignal(WTERMSIG(status));
  if (WIFEXITED(status)) return "exit status " + std::to_string(WEXITSTATUS(status));
  return "unknown status";
}

// The intervals a re-run reports.
class Collector : public ReexecutionListener {
 public:
  void interval(const IntervalReport& report) override { intervals.push_back(report); }
  std::vector<IntervalReport> intervals;
};

// What a child process left besides what it told the listener.
struct ChildEnd {
  std::optional<IntervalReport> held;  // a failure among launches in flight, not yet told
  std::string fatal;
  bool died = false;  // between intervals
  std::string status;
};

// One child process running `request`, its findings told to `listener` as
// they come; with `hold`, an interval that failed while launches were in
// flight is kept back in `held` instead.
ChildEnd runChild(const TraceModel& model, const ReplayOptions& options, const ReexecutionRequest& request,
                  ReexecutionListener& listener, ReplayDevice* device, bool hold) {
  int fds[2];
  if (::pipe(fds) != 0) throw ReplayError(std::string("cannot make a pipe: ") + std::strerror(errno));
  const pid_t pid = ::fork();
  if (pid < 0) throw ReplayError(std::string("cannot start the replay process: ") + std::strerror(errno));
  if (pid == 0) {
    ::close(fds[0]);
    child(model, options, request, fds[1]);
  }
  ::close(fds[1]);

  ChildEnd end;
  std::string buffer;
  std::optional<IntervalReport> current;  // begun, not reported
  bool running = false;                   // a launch started and not done
  uint64_t runningIndex = 0;
  // Launches in flight: submitted up to `queued`, complete up to `completed`.
  bool inFlight = false;
  uint64_t queued = 0;
  uint64_t completed = 0;
  bool anyCompleted = false;  // in the interval running
  std::chrono::steady_clock::time_point deadline;
  const auto arm = [&] {
    deadline = std::chrono::steady_clock::now() +
               std::chrono::milliseconds(static_cast<int64_t>(options.timeoutSeconds * 1000));
  };
  bool hung = false;
  for (;;) {
    int waitMs = -1;
    if (running || inFlight) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      waitMs = static_cast<int>(std::max<int64_t>(0, left.count()));
    }
    pollfd p{fds[0], POLLIN, 0};
    const int ready = ::poll(&p, 1, waitMs);
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) {
      ::kill(pid, SIGKILL);
      hung = true;
      break;
    }
    char chunk[65536];
    const ssize_t n = ::read(fds[0], chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    buffer.append(chunk, static_cast<size_t>(n));
    size_t eol;
    while ((eol = buffer.find('\n')) != std::string::npos) {
      const std::string line = buffer.substr(0, eol);
      buffer.erase(0, eol + 1);
      const size_t space = line.find(' ');
      const std::string word = line.substr(0, space);
      const std::string rest = space == std::string::npos ? std::string() : line.substr(space + 1);
      try {
        if (word == "start") {
          runningIndex = std::stoull(rest);
          running = true;
          arm();
        } else if (word == "done") {
          running = false;
        } else if (word == "queued") {
          queued = std::stoull(rest);
          inFlight = true;
          arm();
        } else if (word == "completed") {
          completed = std::stoull(rest);
          anyCompleted = true;
          if (completed >= queued) {
            inFlight = false;
          } else {
            arm();  // progress: the wait goes on
          }
        } else if (word == "note") {
          listener.note(rest);
        } else if (word == "device") {
          ReplayDevice d;
          std::istringstream in(rest);
          d.ordinal = options.device;
          in >> d.sm >> d.driverVersion;
          std::getline(in >> std::ws, d.name);
          if (device != nullptr) *device = d;
          listener.started(d);
        } else if (word == "begin") {
          current = decodeInterval(Json::parse(rest));
          anyCompleted = false;
          listener.intervalStarting(*current);
        } else if (word == "interval") {
          current.reset();
          running = inFlight = false;
          IntervalReport report = decodeInterval(Json::parse(rest));
          if (hold && report.faultAmong && !report.faultLaunch) {
            end.held = std::move(report);
          } else {
            listener.interval(report);
          }
        } else if (word == "launch") {
          const Json j = Json::parse(rest);
          const LaunchRecord* l = model.launch(j.at("launchIndex").get<uint64_t>());
          if (l == nullptr) continue;
          LaunchOutcome o = outcomeOf(*l);
          o.verdict = Verdict::kUnverified;
          o.memory = MemoryPath::kFixed;
          o.detail = j.at("detail").get<std::string>();
          o.code = j.at("code").get<std::string>();
          listener.launch(o);
        } else if (word == "fatal") {
          end.fatal = rest;
        }
      } catch (const std::exception&) {
        // A line the child did not finish (it died writing it): nothing to take from it.
      }
    }
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  end.status = describeStatus(status);
  if (current) {
    IntervalReport lost = *current;
    lost.verdict = hung ? IntervalVerdict::kHang : IntervalVerdict::kFault;
    if (running) {
      lost.faultLaunch = runningIndex;
      if (const LaunchRecord* l = model.launch(runningIndex)) lost.faultKernel = l->event().getKernelName();
    }
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%g", options.timeoutSeconds);
    lost.detail =
        hung ? "did not finish within " + std::string(seconds) + " s (--timeout)"
             : "the replay process died" + std::string(running ? " during the launch" : "") + " (" + end.status + ")";
    if (!running && inFlight) {
      // The child may have been inside the submission of a launch after the
      // last it said it queued: any launch of the interval not known complete.
      const uint64_t first = anyCompleted ? std::max(completed + 1, lost.firstLaunch) : lost.firstLaunch;
      lost.faultAmong = {{std::min(first, lost.lastLaunch), lost.lastLaunch}};
      lost.detail += "; launches ran without a wait between them: the failing launch is one of launches " +
                     std::to_string(lost.faultAmong->first) + ".." + std::to_string(lost.faultAmong->second);
    }
    if (hold && lost.faultAmong) {
      end.held = std::move(lost);
    } else {
      listener.interval(lost);
    }
    return end;
  }
  end.died = hung || !WIFEXITED(status) || WEXITSTATUS(status) != 0;
  return end;
}

// Names the launch of a failure found among launches in flight: the
// interval again, in a fresh process (a sticky fault leaves the context
// unusable), with a wait after every launch.
void attribute(const TraceModel& model, const ReplayOptions& options, IntervalReport& report,
               ReexecutionListener& listener) {
  listener.note("interval " + std::to_string(report.number) +
                " failed with launches in flight: running it again with " +
                "a wait after every launch, to name the launch");
  ReexecutionRequest again;
  again.launch = report.faultAmong->second;
  again.synchronized = true;
  again.quiet = true;
  Collector found;
  std::string why;
  try {
    const ChildEnd end = runChild(model, options, again, found, nullptr, false);
    if (!end.fatal.empty()) why = end.fatal;
  } catch (const std::exception& e) {
    why = e.what();
  }
  const IntervalReport* failed = nullptr;
  for (const IntervalReport& r : found.intervals) {
    if (r.faultLaunch) failed = &r;
  }
  if (failed != nullptr) {
    report.verdict = failed->verdict;
    report.faultLaunch = failed->faultLaunch;
    report.faultKernel = failed->faultKernel;
    report.foundByRerun = true;
    report.detail = failed->detail +
                    " (the launch found by a synchronized re-run of the interval; its first run, with launches in "
                    "flight, ended: " +
                    report.detail + ")";
    return;
  }
  if (why.empty() && found.intervals.empty()) why = "it reported nothing";
  if (why.empty()) {
    const char* verdict = intervalVerdictName(found.intervals.back().verdict);
    why = report.verdict == IntervalVerdict::kHang
              ? std::string("it ran the interval to its end (") + verdict +
                    "), no launch taking --timeout: the launches in flight took longer together (a larger --timeout "
                    "lets them finish)"
              : std::string("it ended ") + verdict + ": the fault depends on launches overlapping";
  }
  report.detail += "; a synchronized re-run did not name the launch: " + why;
}

}  // namespace

void reexecuteIsolated(const TraceModel& model, const ReplayOptions& options, const ReexecutionRequest& request,
                       ReexecutionListener& listener, ReplayDevice* device) {
  ChildEnd end = runChild(model, options, request, listener, device, !request.synchronized);
  if (end.held) {
    attribute(model, options, *end.held, listener);
    listener.interval(*end.held);
    return;
  }
  if (!end.fatal.empty()) throw ReplayError(end.fatal);
  if (end.died) throw ReplayError("the replay process died between intervals (" + end.status + ")");
}

}  // namespace kcap::replay
