#include "isolation.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <sstream>
#include <string>

#include "driver.h"
#include "replayer.h"

namespace kcap::replay {
namespace {

void writeAll(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the parent is gone: nothing to tell
    done += static_cast<size_t>(n);
  }
}

std::string oneLine(std::string text) {
  for (char& c : text) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return text;
}

// Tells the parent, over the pipe, of each launch's start, end and outcome.
class PipeListener : public ReplayListener {
 public:
  explicit PipeListener(int fd) : fd_(fd) {}
  void launchStarting(const LaunchOutcome& soFar) override {
    writeAll(fd_, "start " + std::to_string(outcomeKey(soFar)) + " " + std::to_string(static_cast<int>(soFar.memory)) +
                      " " + escapeField(soFar.code) + "\n");
  }
  void launchDone(uint64_t index) override { writeAll(fd_, "done " + std::to_string(index) + "\n"); }
  void outcome(const LaunchOutcome& outcome) override { writeAll(fd_, encodeOutcome(outcome)); }

 private:
  int fd_;
};

// Hands each outcome to `report`.
class ReportListener : public ReplayListener {
 public:
  explicit ReportListener(const std::function<void(const LaunchOutcome&)>& report) : report_(report) {}
  void outcome(const LaunchOutcome& outcome) override { report_(outcome); }

 private:
  const std::function<void(const LaunchOutcome&)>& report_;
};

// The replay process: replays `batch`, writes `start N`, `done N`, outcomes,
// or `fatal MESSAGE` when it cannot replay at all.
[[noreturn]] void child(const TraceModel& model, const ReplayOptions& options, const Selection& batch, int fd) {
  try {
    auto reader = format::TraceReader::open(options.tracePath);
    Replayer replayer(model, *reader, options);
    writeAll(fd, "device " + std::to_string(replayer.smVersion()) + " " + std::to_string(driver().version) + " " +
                     (replayer.pciBusId().empty() ? "?" : oneLine(replayer.pciBusId())) + " " +
                     oneLine(replayer.deviceName()) + "\n");
    PipeListener listener(fd);
    replayer.run(batch, listener);
  } catch (const ContextLost&) {
  } catch (const std::exception& e) {
    writeAll(fd, "fatal " + oneLine(e.what()) + "\n");
  }
  ::close(fd);
  _exit(0);  // no atexit handlers, no driver teardown of a poisoned context
}

// "1", "0.5", "2.25": the timeout as the user wrote it, not "1.000000".
std::string seconds(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", value);
  return text;
}

std::string describeStatus(int status) {
  if (WIFSIGNALED(status)) return std::string("killed by signal ") + strsignal(WTERMSIG(status));
  if (WIFEXITED(status)) return "exit status " + std::to_string(WEXITSTATUS(status));
  return "unknown status";
}

// The outcome of a launch or graph launch (outcomeKey) the replay process
// could not report on.
LaunchOutcome outcomeFor(const TraceModel& model, uint64_t key, Verdict verdict, const std::string& detail) {
  LaunchOutcome o;
  o.launchIndex = key & ~kGraphLaunchKey;
  if ((key & kGraphLaunchKey) != 0) {
    o.graph = true;
    if (const GraphLaunchRecord* g = model.graphLaunch(o.launchIndex)) {
      char exec[32];
      std::snprintf(exec, sizeof exec, "exec 0x%llx", static_cast<unsigned long long>(g->event().getGraphExec()));
      o.kernel = exec;
    }
  } else if (const LaunchRecord* l = model.launch(key)) {
    o = outcomeOf(*l);
  }
  o.verdict = verdict;
  o.detail = detail;
  return o;
}

}  // namespace

void replayInProcess(const TraceModel& model, const ReplayOptions& options, const Selection& selection,
                     const std::function<void(const LaunchOutcome&)>& report, ReplayDevice* device) {
  auto reader = format::TraceReader::open(options.tracePath);
  Replayer replayer(model, *reader, options);
  if (device != nullptr)
    *device = {options.device, replayer.deviceName(), replayer.smVersion(), driver().version, replayer.pciBusId()};
  ReportListener listener(report);
  try {
    replayer.run(selection, listener);
  } catch (const ContextLost&) {}
}

void replayIsolated(const TraceModel& model, const ReplayOptions& options, const Selection& selection,
                    const std::function<void(const LaunchOutcome&)>& report, ReplayDevice* device) {
  std::vector<uint64_t> indices = selection.launchIndices;  // launches, then graph launches (outcomeKey)
  for (const uint64_t g : selection.graphLaunchIndices) indices.push_back(g | kGraphLaunchKey);
  size_t next = 0;  // the first launch without an outcome
  bool anyOutcome = false;
  const auto positionOf = [&](uint64_t index) {
    for (size_t i = next; i < indices.size(); ++i) {
      if (indices[i] == index) return i;
    }
    return indices.size();
  };
  const auto finishRest = [&](Verdict verdict, const std::string& detail) {
    for (; next < indices.size(); ++next) report(outcomeFor(model, indices[next], verdict, detail));
  };

  while (next < indices.size()) {
    const size_t firstOfBatch = next;
    int fds[2];
    if (::pipe(fds) != 0) throw ReplayError(std::string("cannot make a pipe: ") + std::strerror(errno));
    Selection batch;
    batch.sequence = selection.sequence;
    for (size_t i = next; i < indices.size(); ++i) {
      if ((indices[i] & kGraphLaunchKey) != 0) {
        batch.graphLaunchIndices.push_back(indices[i] & ~kGraphLaunchKey);
      } else {
        batch.launchIndices.push_back(indices[i]);
      }
    }
    const pid_t pid = ::fork();
    if (pid < 0) throw ReplayError(std::string("cannot start the replay process: ") + std::strerror(errno));
    if (pid == 0) {
      ::close(fds[0]);
      child(model, options, batch, fds[1]);
    }
    ::close(fds[1]);

    std::string buffer, block, fatal;
    bool running = false;  // a launch started and is not done
    uint64_t runningIndex = 0;
    MemoryPath runningMemory = MemoryPath::kNone;  // what the process said of it at its start
    std::string runningCode;
    std::chrono::steady_clock::time_point deadline;
    bool hung = false;
    for (;;) {
      int waitMs = -1;
      if (running) {
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        waitMs = static_cast<int>(std::max<int64_t>(0, left.count()));
      }
      pollfd p{fds[0], POLLIN, 0};
      const int ready = ::poll(&p, 1, waitMs);
      if (ready < 0 && errno == EINTR) continue;
      if (ready == 0) {  // the launch in progress is past its time
        ::kill(pid, SIGKILL);
        hung = true;
        break;
      }
      char chunk[65536];
      const ssize_t n = ::read(fds[0], chunk, sizeof chunk);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;  // the replay process ended
      buffer.append(chunk, static_cast<size_t>(n));
      size_t eol;
      while ((eol = buffer.find('\n')) != std::string::npos) {
        std::string line = buffer.substr(0, eol);
        buffer.erase(0, eol + 1);
        if (line.rfind("start ", 0) == 0) {
          running = true;
          std::istringstream in(line.substr(6));
          int memory = 0;
          std::string code;
          in >> runningIndex >> memory >> code;
          runningMemory = memory >= 0 && memory <= static_cast<int>(MemoryPath::kMixed)
                              ? static_cast<MemoryPath>(memory)
                              : MemoryPath::kNone;
          runningCode = unescapeField(code);
          deadline = std::chrono::steady_clock::now() +
                     std::chrono::milliseconds(static_cast<int64_t>(options.timeoutSeconds * 1000));
        } else if (line.rfind("done ", 0) == 0) {
          running = false;
        } else if (line.rfind("device ", 0) == 0) {
          if (device != nullptr) {
            std::istringstream in(line.substr(7));
            device->ordinal = options.device;
            in >> device->sm >> device->driverVersion >> device->pciBusId;
            if (device->pciBusId == "?") device->pciBusId.clear();
            std::getline(in >> std::ws, device->name);
          }
        } else if (line.rfind("fatal ", 0) == 0) {
          fatal = line.substr(6);
        } else {
          block += line + "\n";
          if (line == "end") {
            const auto outcome = decodeOutcome(block);
            block.clear();
            if (!outcome) continue;
            running = false;
            const size_t at = positionOf(outcomeKey(*outcome));
            if (at == indices.size()) continue;
            // Launches the process passed over without an outcome (it cannot
            // happen by design; keep one outcome per launch regardless).
            for (; next < at; ++next) report(outcomeFor(model, indices[next], Verdict::kError, "no outcome reported"));
            report(*outcome);
            anyOutcome = true;
            ++next;
          }
        }
      }
    }
    ::close(fds[0]);
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {}

    if (!fatal.empty()) {
      if (!anyOutcome) throw ReplayError(fatal);  // nothing could run: say why, once
      finishRest(Verdict::kError, fatal);
      return;
    }
    if (next >= indices.size()) break;
    const uint64_t current = indices[next];
    if (hung || (running && runningIndex == current)) {
      LaunchOutcome lost =
          outcomeFor(model, current, hung ? Verdict::kHang : Verdict::kFault,
                     hung ? "did not finish within " + seconds(options.timeoutSeconds) + " s (--timeout)"
                          : "the replay process died during the launch (" + describeStatus(status) + ")");
      lost.memory = runningMemory;
      lost.code = runningCode;
      report(lost);
      anyOutcome = true;
      ++next;
    } else if (next == firstOfBatch) {
      // It ended without starting anything: do not try the same again.
      report(outcomeFor(model, current, Verdict::kError,
                        "the replay process ended before this launch (" + describeStatus(status) + ")"));
      anyOutcome = true;
      ++next;
    }
    if (selection.sequence) {
      // The process stops a sequence only at a fault; what follows depends on it.
      finishRest(Verdict::kSkipped, "an earlier launch of the sequence did not finish cleanly");
      return;
    }
  }
}

}  // namespace kcap::replay
