// kcap export --perfetto OUT FILE: the trace as a timeline in the Chrome
// trace-event JSON format, which ui.perfetto.dev and chrome://tracing open.
//
// Tracks: one per host thread (the process's pid, the thread's tid) holding
// each launch call as a slice and the copies, memsets, synchronization calls,
// graph launches, module loads, API errors and messages as instants; one per
// stream of each device (a process per device) holding each launch's
// execution: its GPU time when the trace has kernelTiming events (--timing),
// else the host call's. A timed launch gets a flow from its call to its
// execution. Checkpoints are process-wide instants, triggers global ones.
//
// GPU timestamps are in CUPTI's clock, not the trace's: they are moved, all
// by one offset, to the earliest place where no kernel starts before the call
// that launched it. Durations and the order and gaps between kernels are
// CUPTI's own.
//
// Exit codes: 0 written; 1 the trace cannot be read or is damaged (every
// intact event is still written, and the reader's problems are printed) or
// the output cannot be written; 2 usage (OUT exists without --force, OUT is
// FILE or not a regular file).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <tuple>

#include <CLI/CLI.hpp>

#include "common.h"
#include "errors.h"
#include "event_visitor.h"
#include "launch_table.h"
#include "subcommands.h"
#include "trace_reader.h"
#include "trace_summary.h"

namespace kcap::tools {
namespace {

using format::FormatError;
using format::LaunchRecord;

struct Options {
  std::string path;
  std::string perfetto;
  bool force = false;
};

// Device processes are numbered apart from any Linux pid (pid_max <= 2^22).
constexpr int64_t kDevicePidBase = int64_t{1} << 30;

double micros(uint64_t ns) { return static_cast<double>(ns) / 1e3; }

// ---- the output file ----------------------------------------------------------

// Written beside its final path and renamed over it once complete: a failed
// export leaves nothing half-written, and nothing that was there is lost.
class OutputFile {
 public:
  explicit OutputFile(std::string target) : target_(std::move(target)) {
    const size_t slash = target_.rfind('/');
    const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : target_.substr(0, slash);
    const std::string base = slash == std::string::npos ? target_ : target_.substr(slash + 1);
    std::string pattern = dir + "/." + base + ".export-XXXXXX";
    const int fd = ::mkstemp(pattern.data());
    if (fd < 0) throw FormatError(target_ + ": cannot create a temporary file in " + dir + ": " + std::strerror(errno));
    temp_ = pattern;
    file_ = ::fdopen(fd, "w");
    if (file_ == nullptr) {
      ::close(fd);
      ::unlink(temp_.c_str());
      throw FormatError(target_ + ": cannot write: " + std::strerror(errno));
    }
  }
  ~OutputFile() {
    if (file_ != nullptr) std::fclose(file_);
    if (!temp_.empty()) ::unlink(temp_.c_str());
  }
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  void write(const std::string& text) { std::fwrite(text.data(), 1, text.size(), file_); }

  void commit() {
    const bool failed = std::ferror(file_) != 0 || std::fflush(file_) != 0 || ::fsync(::fileno(file_)) != 0;
    const std::string why = std::strerror(errno);
    std::fclose(file_);
    file_ = nullptr;
    if (failed) throw FormatError(target_ + ": cannot write: " + why);
    if (::rename(temp_.c_str(), target_.c_str()) != 0) {
      throw FormatError(target_ + ": cannot rename " + temp_ + " to it: " + std::strerror(errno));
    }
    temp_.clear();
  }

 private:
  std::string target_;
  std::string temp_;
  std::FILE* file_ = nullptr;
};

// "" when the timeline may go to opt.perfetto, else why not (a usage error).
std::string checkOutput(const Options& opt) {
  struct stat out {};
  if (::stat(opt.perfetto.c_str(), &out) != 0) return {};  // absent (or unreachable: the write says why)
  if (!S_ISREG(out.st_mode)) return opt.perfetto + " is not a regular file; not replacing it, even with --force";
  struct stat in {};
  if (::stat(opt.path.c_str(), &in) == 0 && in.st_dev == out.st_dev && in.st_ino == out.st_ino) {
    return opt.perfetto + " is the trace being read; name another file";
  }
  if (!opt.force) return opt.perfetto + " exists; not replacing it (--force replaces it)";
  return {};
}

// ---- the timeline ---------------------------------------------------------------

class Timeline {
 public:
  explicit Timeline(OutputFile& out) : out_(out) {}

  void begin() { out_.write("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n"); }
  void end(const Json& metadata) {
    out_.write("\n],\"otherData\":");
    out_.write(text(metadata));
    out_.write("}\n");
  }

  // One event; pid and tid are added here.
  void emit(Json event, int64_t pid, int64_t tid) {
    event["pid"] = pid;
    event["tid"] = tid;
    if (written_++ != 0) out_.write(",\n");
    out_.write(text(event));
  }

  void instant(const std::string& name, const char* category, char scope, uint64_t ns, int64_t pid, int64_t tid,
               Json args) {
    Json e = {{"name", name}, {"cat", category}, {"ph", "i"}, {"s", std::string(1, scope)}, {"ts", micros(ns)}};
    e["args"] = std::move(args);
    emit(std::move(e), pid, tid);
  }
  void slice(const std::string& name, const char* category, uint64_t ns, uint64_t durationNs, int64_t pid, int64_t tid,
             Json args) {
    Json e = {{"name", name}, {"cat", category}, {"ph", "X"}, {"ts", micros(ns)}, {"dur", micros(durationNs)}};
    e["args"] = std::move(args);
    emit(std::move(e), pid, tid);
  }
  void processName(int64_t pid, const std::string& name) {
    emit({{"name", "process_name"}, {"ph", "M"}, {"ts", 0}, {"args", {{"name", name}}}}, pid, 0);
  }
  void threadName(int64_t pid, int64_t tid, const std::string& name) {
    emit({{"name", "thread_name"}, {"ph", "M"}, {"ts", 0}, {"args", {{"name", name}}}}, pid, tid);
  }
  uint64_t written() const { return written_; }

 private:
  // nlohmann's number format keeps every digit of a timestamp; text from the
  // trace is untrusted: bytes that are not UTF-8 become U+FFFD, terminal
  // controls outside ASCII are escaped.
  static std::string text(const Json& value) {
    return withoutTerminalControls(value.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace));
  }

  OutputFile& out_;
  uint64_t written_ = 0;
};

// Tracks of the device side: one per (device, stream); a per-thread default
// stream is one per thread.
struct StreamKey {
  int32_t device = 0;
  uint64_t stream = 0;
  uint32_t perThreadOf = 0;  // the thread, for a per-thread default stream
  bool operator<(const StreamKey& o) const {
    return std::tie(device, stream, perThreadOf) < std::tie(o.device, o.stream, o.perThreadOf);
  }
};

class Exporter {
 public:
  Exporter(Timeline& timeline, int64_t hostPid) : t_(timeline), hostPid_(hostPid) {}

  // Events that are instants, written as they come; launches go to the table.
  void add(schema::Event::Reader e) {
    if (table_.add(e)) return;
    const uint64_t ns = e.getTimeNs();
    const uint32_t tid = e.getThreadId();
    format::visitEvent(
        e, format::Overloaded{
               [&](schema::Memcpy::Reader m) {
                 Json args = {{"direction", enumName(m.getDirection())},
                              {"bytes", m.getSize()},
                              {"dst", hex(m.getDst())},
                              {"src", hex(m.getSrc())},
                              {"stream", hex(m.getStream())},
                              {"async", m.getIsAsync()}};
                 hostInstant(e, "memcpy " + enumName(m.getDirection()), "memcpy", m.getResult(), std::move(args));
               },
               [&](schema::Memset::Reader m) {
                 Json args = {{"dst", hex(m.getDst())}, {"value", m.getValue()},   {"elementSize", m.getElementSize()},
                              {"count", m.getCount()},  {"height", m.getHeight()}, {"stream", hex(m.getStream())},
                              {"async", m.getIsAsync()}};
                 hostInstant(e, "memset", "memset", m.getResult(), std::move(args));
               },
               [&](schema::SyncOp::Reader s) {
                 Json args = {{"stream", hex(s.getStream())}, {"event", hex(s.getEvent())}};
                 hostInstant(e, enumName(s.getOp()), "sync", s.getResult(), std::move(args));
               },
               [&](schema::GraphLaunch::Reader g) {
                 Json args = {{"graphExec", hex(g.getGraphExec())}, {"stream", hex(g.getStream())}};
                 hostInstant(e, "graph launch", "graph", g.getResult(), std::move(args));
               },
               [&](schema::ModuleLoad::Reader m) {
                 Json args = {{"handle", hex(m.getHandle())},
                              {"api", enumName(m.getApi())},
                              {"image", enumName(m.getImageKind())},
                              {"bytes", m.getImage().getSize()}};
                 if (m.hasPath()) args["path"] = m.getPath().cStr();
                 hostInstant(e, "module load", "module", m.getResult(), std::move(args));
               },
               [&](schema::ApiError::Reader a) {
                 Json args = {{"function", a.getFunction().cStr()}, {"resultName", a.getResultName().cStr()}};
                 hostInstant(e, std::string("error: ") + a.getFunction().cStr(), "error", a.getResult(),
                             std::move(args));
               },
               [&](schema::Message::Reader m) {
                 hostInstant(e, enumName(m.getLevel()) + ": " + m.getText().cStr(), "message", 0, Json::object());
               },
               [&](schema::Checkpoint::Reader c) {
                 Json args = {{"ordinal", c.getOrdinal()},
                              {"reason", enumName(c.getReason())},
                              {"launchCount", c.getLaunchCount()},
                              {"device", c.getDevice()},
                              {"changedBytes", c.getChangedBytes()},
                              {"holdNs", c.getHoldNs()},
                              {"result", c.getResult()}};
                 seeThread(tid);
                 t_.instant("checkpoint #" + std::to_string(c.getOrdinal()), "checkpoint", 'p', ns, hostPid_, tid,
                            std::move(args));
               },
               [&](schema::Trigger::Reader g) {
                 Json args = {{"kind", enumName(g.getKind())}, {"reason", g.getReason().cStr()}};
                 if (g.getHasLaunch()) args["launchIndex"] = g.getLaunchIndex();
                 seeThread(tid);
                 t_.instant("trigger: " + enumName(g.getKind()), "trigger", 'g', ns, hostPid_, tid, std::move(args));
               },
               [](const auto&) {},  // allocations, binds, attributes, tensor maps: not on the timeline
           });
  }

  // The launches (their ends and timings are all read now) and the names of
  // every track.
  void finish(const format::TraceSummary& summary) {
    alignGpuClock();
    uint64_t flowId = 0;
    for (const LaunchRecord& r : table_.launches()) {
      seeThread(r.threadId);
      const uint64_t callNs = r.ended && r.endTimeNs >= r.timeNs ? r.endTimeNs - r.timeNs : 0;
      Json args = {{"launchIndex", r.launchIndex},
                   {"grid", dim3Text(r.grid[0], r.grid[1], r.grid[2])},
                   {"block", dim3Text(r.block[0], r.block[1], r.block[2])},
                   {"sharedMemBytes", r.sharedMemBytes},
                   {"stream", hex(r.stream)},
                   {"seq", r.seq}};
      if (r.ended) args["result"] = r.result;
      if (!r.ended) args["ended"] = false;  // no launchEnd in the trace: the call's end is unknown
      Json callArgs = args;
      callArgs["function"] = hex(r.function);
      const std::string callName = r.capturing ? r.kernelName + " (captured into a graph)" : r.kernelName;
      t_.slice(callName, "launch", r.timeNs, callNs, hostPid_, r.threadId, std::move(callArgs));
      if (r.capturing) continue;  // it did not run

      const StreamKey key{r.device, r.stream, r.stream == 0 && r.perThreadStream ? r.threadId : 0};
      const int64_t pid = kDevicePidBase + r.device;
      const int64_t tid = streamTrack(key);
      if (r.timed) {
        const uint64_t startNs = gpuNs(r.gpuStartNs);
        args["timing"] = "GPU (CUPTI)";
        args["gpuStartNs"] = r.gpuStartNs;
        t_.slice(r.kernelName, "kernel", startNs, r.gpuEndNs - r.gpuStartNs, pid, tid, std::move(args));
        ++flowId;
        Json from = {{"name", "launch"}, {"cat", "flow"}, {"ph", "s"}, {"id", flowId}, {"ts", micros(r.timeNs)}};
        t_.emit(std::move(from), hostPid_, r.threadId);
        Json to = {{"name", "launch"}, {"cat", "flow"}, {"ph", "f"},
                   {"bp", "e"},        {"id", flowId},  {"ts", micros(startNs)}};
        t_.emit(std::move(to), pid, tid);
      } else {
        args["timing"] = "host call (no --timing)";
        t_.slice(r.kernelName, "kernel", r.timeNs, callNs, pid, tid, std::move(args));
      }
    }
    nameTracks(summary);
  }

  const format::LaunchTable& table() const { return table_; }

 private:
  void hostInstant(schema::Event::Reader e, const std::string& name, const char* category, int32_t result, Json args) {
    if (result != 0) args["result"] = result;
    seeThread(e.getThreadId());
    t_.instant(name, category, 't', e.getTimeNs(), hostPid_, e.getThreadId(), std::move(args));
  }

  void seeThread(uint32_t tid) { threads_.insert(tid); }

  int64_t streamTrack(const StreamKey& key) {
    auto [it, inserted] = streams_.emplace(key, 0);
    if (inserted) it->second = static_cast<int64_t>(streams_.size());
    return it->second;
  }

  // The smallest shift that puts no timed kernel before its launch call,
  // computed relative to the earliest GPU start so that nothing overflows.
  void alignGpuClock() {
    bool any = false;
    for (const LaunchRecord& r : table_.launches()) {
      if (!r.timed) continue;
      gpuBase_ = any ? std::min(gpuBase_, r.gpuStartNs) : r.gpuStartNs;
      any = true;
    }
    for (const LaunchRecord& r : table_.launches()) {
      if (!r.timed) continue;
      // Beyond 2^62 ns apart (146 years) the timings cannot be one clock's.
      const uint64_t since = std::min<uint64_t>(r.gpuStartNs - gpuBase_, uint64_t{1} << 62);
      const auto host = static_cast<int64_t>(std::min<uint64_t>(r.timeNs, uint64_t{1} << 62));
      gpuShift_ = std::max(gpuShift_, host - static_cast<int64_t>(since));
    }
  }
  uint64_t gpuNs(uint64_t gpuStartNs) const {
    const uint64_t since = std::min<uint64_t>(gpuStartNs - gpuBase_, uint64_t{1} << 62);
    return static_cast<uint64_t>(static_cast<int64_t>(since) + gpuShift_);
  }

  void nameTracks(const format::TraceSummary& summary) {
    const auto begin = summary.traceBegin();
    std::string host = "host";
    if (begin) {
      host = "host " + std::string(begin->getHostName().cStr()) + ", pid " + std::to_string(begin->getProcessId());
      if (begin->getArgv().size() > 0) host += ": " + std::string(begin->getArgv()[0].cStr());
    }
    t_.processName(hostPid_, host);
    for (const uint32_t tid : threads_) {
      t_.threadName(hostPid_, tid,
                    tid == 0 ? std::string("kcap (events the shim made)") : "thread " + std::to_string(tid));
    }
    std::set<int32_t> devices;
    for (const auto& [key, tid] : streams_) {
      devices.insert(key.device);
      std::string name = key.stream != 0 ? "stream " + hex(key.stream)
                         : key.perThreadOf != 0
                             ? "per-thread default stream of thread " + std::to_string(key.perThreadOf)
                             : std::string("default stream");
      t_.threadName(kDevicePidBase + key.device, tid, name);
    }
    for (const int32_t device : devices) {
      std::string name = "GPU " + std::to_string(device);
      if (begin) {
        for (const auto d : begin->getDevices()) {
          if (d.getOrdinal() == device) name += ": " + std::string(d.getName().cStr());
        }
      }
      t_.processName(kDevicePidBase + device, name);
    }
  }

  Timeline& t_;
  int64_t hostPid_;
  format::LaunchTable table_;
  std::set<uint32_t> threads_;
  std::map<StreamKey, int64_t> streams_;  // -> tid on its device's process
  uint64_t gpuBase_ = 0;
  int64_t gpuShift_ = 0;
};

int runExport(const Options& opt) {
  if (const std::string refused = checkOutput(opt); !refused.empty()) {
    std::cerr << "kcap export: " << terminalSafe(refused) << "\n";
    return kExitUsage;
  }
  return guarded(opt.path, [&] {
    auto reader = format::TraceReader::open(opt.path);
    // The environment (traceBegin) names the tracks; the summary holds it.
    const format::TraceSummary summary = format::summarizeTrace(*reader);
    const auto begin = summary.traceBegin();
    const int64_t hostPid = begin && begin->getProcessId() != 0 ? int64_t{begin->getProcessId()} : 1;

    OutputFile out(opt.perfetto);
    Timeline timeline(out);
    timeline.begin();
    Exporter exporter(timeline, hostPid);
    reader->forEachEvent([&](const format::EventRef& ref) {
      exporter.add(ref.event);
      return true;
    });
    exporter.finish(summary);
    Json about = {
        {"source", opt.path}, {"launches", exporter.table().launches().size()}, {"problems", reader->problemCount()}};
    timeline.end(about);
    out.commit();

    std::cout << "exported " << withCommas(exporter.table().launches().size()) << " launches ("
              << withCommas(timeline.written()) << " timeline events) of " << terminalSafe(opt.path) << " to "
              << terminalSafe(opt.perfetto) << "\n";
    if (reader->problems().empty()) return kExitOk;
    for (const auto& p : reader->problems()) {
      std::cerr << terminalSafe(opt.path) << ": at byte " << p.offset << ": "
                << terminalSafe(bareProblem(opt.path, p.message)) << "\n";
    }
    std::cerr << "kcap export: the trace is damaged; every intact event was exported\n";
    return kExitTrace;
  });
}

}  // namespace

Run setupExport(CLI::App& cmd) {
  auto opt = std::make_shared<Options>();
  cmd.add_option("file", opt->path, "The .kcap trace")->required()->type_name("FILE");
  cmd.add_option("--perfetto", opt->perfetto,
                 "Write the timeline as Chrome trace-event JSON (ui.perfetto.dev, chrome://tracing)")
      ->required()
      ->type_name("OUT");
  cmd.add_flag("--force", opt->force, "Replace OUT when it exists");
  return [opt] { return runExport(*opt); };
}

}  // namespace kcap::tools
