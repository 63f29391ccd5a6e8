// The Recorder: creating its trace, events, operations, ending, failure
// (process/lifecycle.cpp decides when it starts and what a fork does).
#include "record/recorder.h"

#include "hooks/shim_log.h"
#include "hooks/stats.h"
#include "core/checkpoint_gate.h"
#include "process/lifecycle.h"
#include "record/driver_api.h"
#include "record/hang_watchdog.h"
#include "timing/cupti_timing.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <kj/exception.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

namespace kcap {
namespace {

thread_local pid_t t_tid = 0;

uint32_t callerTid() {
  if (t_tid == 0) {
    t_tid = static_cast<pid_t>(::syscall(SYS_gettid));
  }
  return static_cast<uint32_t>(t_tid);
}

uint64_t clockNs(clockid_t clock) {
  timespec now{};
  clock_gettime(clock, &now);
  return static_cast<uint64_t>(now.tv_sec) * 1000000000ull + static_cast<uint64_t>(now.tv_nsec);
}

std::string hostName() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) {
    return "unknown";
  }
  return name;
}

// `kcap record` learns which traces its processes wrote, and why one stopped
// early, from lines the shim appends to the file KCAP_RECORD_STATUS names
// (tools/record.cpp reads them): "trace PID PATH" when a trace is created,
// "stopped PID PATH<tab>WHY" when recording into it failed. '%', tab and
// newline are written %25, %09, %0A. The file is never created here: no
// status file, no report.
std::string statusField(const std::string& text) {
  std::string out;
  for (const char c : text) {
    out += c == '%'    ? std::string("%25")
           : c == '\t' ? std::string("%09")
           : c == '\n' ? std::string("%0A")
                       : std::string(1, c);
  }
  return out;
}

void reportStatus(const char* kind, const std::string& path, const char* why) noexcept {
  const char* file = std::getenv("KCAP_RECORD_STATUS");
  if (file == nullptr || file[0] == '\0') {
    return;
  }
  try {
    std::string line = std::string(kind) + " " + std::to_string(::getpid()) + " " + statusField(path);
    if (why != nullptr) {
      line += "\t" + statusField(why);
    }
    line += "\n";
    const int fd = ::open(file, O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
      return;
    }
    // One write: the lines of processes recording at once do not interleave.
    [[maybe_unused]] const ssize_t written = ::write(fd, line.data(), line.size());
    ::close(fd);
  } catch (...) {
    // no report; the trace itself is unaffected
  }
}

// What is at `path`, for a message: "a FIFO", "a symbolic link", ...
const char* fileKind(mode_t mode) {
  switch (mode & S_IFMT) {
    case S_IFLNK:
      return "a symbolic link";
    case S_IFIFO:
      return "a FIFO";
    case S_IFSOCK:
      return "a socket";
    case S_IFCHR:
      return "a character device";
    case S_IFBLK:
      return "a block device";
    default:
      return "not a regular file";
  }
}

// Staging buffers: a whole number of pieces, enough of them that the
// writer's hashing threads each get some (memory_snapshot.cpp). 64 MiB was
// no faster for new memory and slower for memory already in the trace (33-44
// GB/s against 52 on the H200 host, 2026-11-30).
size_t stagingBytes(uint32_t pieceSize) {
  constexpr size_t kTarget = 32u << 20;
  const size_t pieces = kTarget / pieceSize;
  return (pieces == 0 ? 1 : pieces) * pieceSize;
}

// The writer's direct memory (page-locked, held for reuse until the trace
// ends): what it may hold pending, and four staging buffers' worth in flight
// with its producers, but at most a quarter of the machine's memory.
size_t directMemoryBound(const CaptureOptions& options) {
  const size_t bound = options.bufferBytes + 4 * stagingBytes(options.pieceSize);
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long pageSize = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || pageSize <= 0) {
    return bound;
  }
  return std::min<size_t>(bound, static_cast<size_t>(pages) / 4 * static_cast<size_t>(pageSize));
}

format::TraceWriter::Options writerOptions(const CaptureOptions& options) {
  format::TraceWriter::Options writerOptions;
  writerOptions.exclusive = true;
  writerOptions.zstdLevel = options.zstdLevel;
  writerOptions.pieceSize = options.pieceSize;
  writerOptions.maxPendingBytes = options.bufferBytes;
  writerOptions.pageLocker = &driverPageLocker();
  writerOptions.maxDirectBytes = directMemoryBound(options);
  writerOptions.threads = {options.idleWriter, options.writerCpus};
  return writerOptions;
}

std::unique_ptr<format::TraceWriter> createWriter(const std::string& path, const CaptureOptions& options) {
  const format::TraceWriter::Options writerOptions = kcap::writerOptions(options);
  // The writer's threads inherit this mask: asynchronous signals (SIGTERM,
  // SIGINT) then never land on them, so a handler never runs on a thread
  // the trace's progress depends on.
  sigset_t all;
  sigset_t old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  std::unique_ptr<format::TraceWriter> writer;
  try {
    writer = format::TraceWriter::create(path, writerOptions);
  } catch (...) {
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    throw;
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return writer;
}

// Creates this process's trace; `path` becomes its name. A trace never
// replaces or shares a file: the name is created exclusively, and when it is
// taken (another process records to the same template, or an old file is
// there) the process writes NAME.<pid>.EXT and says so once. A fork child
// whose template has no %p goes straight to NAME.<pid>.EXT, so that it never
// takes the name from its parent. What is not a regular file is never
// written through (a FIFO would block, a device would be written to).
std::unique_ptr<format::TraceWriter> openTrace(const CaptureOptions& options, std::string& path) {
  const long pid = static_cast<long>(::getpid());
  const std::string named = expandOutputPath(options.output, pid, hostName(),
                                             rankFromEnvironment([](const char* n) { return std::getenv(n); }));
  const bool suffixOnly = process::isForkChild() && !outputHasPid(options.output);
  std::vector<std::string> candidates;
  if (!suffixOnly) {
    candidates.push_back(named);
  }
  candidates.push_back(withPidSuffix(named, pid));
  for (const std::string& candidate : candidates) {
    try {
      std::unique_ptr<format::TraceWriter> writer = createWriter(candidate, options);
      if (candidate != named && !suffixOnly) {
        logMessage("%s exists; writing %s", named.c_str(), candidate.c_str());
      }
      path = candidate;
      return writer;
    } catch (const format::TraceWriter::PathExists&) {
      struct stat st {};
      if (::lstat(candidate.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
        throw std::runtime_error(candidate + (S_ISDIR(st.st_mode) ? std::string(" is a directory")
                                                                  : std::string(" exists and is not a regular file (") +
                                                                        fileKind(st.st_mode) + ")"));
      }
    }
  }
  throw std::runtime_error(candidates.size() == 1 ? candidates[0] + " exists; not replacing it"
                                                  : named + " and " + candidates.back() + " exist; not replacing them");
}

// The flight recorder (--trigger): nothing is created until a trigger
// fires; the ring then makes the output by the same rules as openTrace.
std::unique_ptr<format::TraceWriter> openRing(const CaptureOptions& options, std::string& path,
                                              const std::shared_ptr<std::atomic<HangWatchdog*>>& watchdog) {
  path = expandOutputPath(options.output, static_cast<long>(::getpid()), hostName(),
                          rankFromEnvironment([](const char* n) { return std::getenv(n); }));
  format::RingOptions ring;
  ring.checkpoints = options.ringCheckpoints;
  ring.maxBytes = options.bufferBytes;
  ring.maxSpillBytes = options.ringDiskBytes;
  ring.spillPath = path + ".ring";
  ring.openOutput = [options] {
    std::string written;
    std::unique_ptr<format::TraceWriter> writer = openTrace(options, written);
    reportStatus("trace", written, nullptr);
    return writer;
  };
  ring.warn = [](const std::string& text) { logMessage("%s", text.c_str()); };
  ring.launched = [watchdog](schema::Launch::Reader launch) {
    if (HangWatchdog* dog = watchdog->load(std::memory_order_acquire); dog != nullptr && !launch.getCapturing()) {
      // A per-thread default stream is the launching thread's: not one the watchdog can name.
      const uint64_t stream = launch.getPerThreadStream() && launch.getStream() == 0
                                  ? reinterpret_cast<uint64_t>(CU_STREAM_PER_THREAD)
                                  : launch.getStream();
      dog->launched(stream, launch.getContext(), launch.getLaunchIndex());
    }
  };
  format::TraceWriter::Options held = writerOptions(options);
  held.pageLocker = nullptr;  // the ring takes no direct blocks
  return std::make_unique<format::RingTraceWriter>(held, std::move(ring));
}

}  // namespace

// ---- events -----------------------------------------------------------------------

EventMessage::EventMessage(const Recorder& recorder, bool fromProgram)
    : message_(256), event_(message_.initRoot<schema::Event>()) {
  event_.setTimeNs(recorder.nowNs());
  event_.setThreadId(fromProgram ? callerTid() : 0);
}

uint32_t Recorder::callerThreadId() { return callerTid(); }

uint64_t Recorder::append(EventMessage& message) { return writer_->append(message.message()); }

void Recorder::flush() { writer_->flush(); }

void Recorder::noteOnce(std::atomic<bool>& flag, schema::Message::Level level, const std::string& text) {
  if (flag.exchange(true)) {
    return;
  }
  note(level, text);
}

void Recorder::note(schema::Message::Level level, const std::string& text) {
  EventMessage message(*this, false);
  auto body = message.event().initMessage();
  body.setLevel(level);
  body.setText(text);
  append(message);
}

void Recorder::writtenDataRead(const WrittenReadback::Owner& owner, const uint8_t* bytes, uint64_t size,
                               const std::string& missing) {
  EventMessage message(*this, false);
  auto written = message.event().initWrittenData();
  written.setOf(owner.of);
  written.setNode(owner.node);
  if (bytes != nullptr) {
    writer_->storeContent(bytes, size, written.initData());
  } else {
    written.setMissing(missing);
  }
  append(message);
}

void Recorder::kernelTimed(uint64_t launchIndex, uint64_t startNs, uint64_t endNs, const std::string& kernelName) {
  EventMessage message(*this, false);
  auto kernel = message.event().initKernelTiming();
  kernel.setLaunchIndex(launchIndex);
  kernel.setStartNs(startNs);
  kernel.setEndNs(endNs);
  kernel.setKernelName(kernelName);
  append(message);
}

// ---- operations ---------------------------------------------------------------------

// On every launch's path twice: the thread's own ThreadWork slot, plain
// stores (thread_work.h).
Recorder::Operation::Operation(Recorder& recorder) noexcept : recorder_(recorder), slot_(ThreadWork::mine()) {
  if (slot_ != nullptr) {
    ThreadWork::enter(*slot_);
  } else {
    recorder_.inflight_.fetch_add(1, std::memory_order_seq_cst);
  }
  admitted_ = !recorder_.ending_.load(std::memory_order_seq_cst);
}

Recorder::Operation::~Operation() {
  if (slot_ != nullptr) {
    ThreadWork::leave(*slot_);
  } else {
    recorder_.inflight_.fetch_sub(1, std::memory_order_release);
  }
}

// ---- life cycle ---------------------------------------------------------------------

Recorder::Recorder(CaptureOptions options, std::string path, std::unique_ptr<format::TraceWriter> writer)
    : options_(std::move(options)),
      path_(std::move(path)),
      writer_(std::move(writer)),
      ring_(dynamic_cast<format::RingTraceWriter*>(writer_.get())),
      startUnixNs_(clockNs(CLOCK_REALTIME)),
      staging_(stagingBytes(options_.pieceSize)) {
  // Checkpoints every N launches need the exact count at each launch's
  // start, which the writer's numbering (on its merger thread) may not
  // have reached yet.
  numberedByWriter_ = perLaunchMetadataOnly(options_.mode) && options_.skip == 0 &&
                      options_.maxLaunches == std::numeric_limits<uint64_t>::max() && !options_.timing &&
                      options_.checkpointEveryLaunches == 0;
  ThreadWork::prepare();  // before the first Operation
  CodeRegistry::instance().recordingStarted();
  if (options_.mode == CaptureMode::kCheckpoint) {
    checkpoints_ = std::make_unique<CheckpointTaker>(*writer_, staging_, options_.hashOnDevice);
    if (options_.readbackBytes != 0) {
      readback_ = std::make_unique<WrittenReadback>(
          options_.readbackBytes, [this](const WrittenReadback::Owner& owner, const uint8_t* bytes, uint64_t size,
                                         const std::string& missing) { writtenDataRead(owner, bytes, size, missing); });
    }
    CheckpointGate::arm();
    std::atexit(lastCheckpointAtExit);
  }
}

Recorder* Recorder::current() noexcept { return process::currentRecording(); }

Recorder* Recorder::active() noexcept { return process::activeRecording(); }

Recorder* Recorder::create(const CaptureOptions& options) {
  std::string path;
  std::unique_ptr<format::TraceWriter> writer;
  auto watchdog = std::make_shared<std::atomic<HangWatchdog*>>(nullptr);
  if (options.triggers.any()) {
    writer = openRing(options, path, watchdog);  // reports the trace when it fires
  } else {
    writer = openTrace(options, path);
    reportStatus("trace", path, nullptr);
  }
  LaunchOutcome::relax();  // a recording that ended before hurried its writer's waits
  std::unique_ptr<Recorder> recorder(new Recorder(options, path, std::move(writer)));
  recorder->watchdog_ = std::move(watchdog);
  recorder->writeTraceBegin();
  recorder->startWatchdog();
  return recorder.release();
}

void Recorder::end(schema::EndReason reason, int signal, const std::string& message,
                   std::chrono::milliseconds wait) noexcept {
  if (ending_.exchange(true, std::memory_order_seq_cst)) {
    return;
  }
  stopWatchdog();
  // Let other threads finish the events they are building (bounded: one of
  // them may be the thread that crashed).
  ThreadWork::endingFence();
  const auto deadline = std::chrono::steady_clock::now() + wait;
  const ThreadWork::Slot* const own = ThreadWork::mine();
  while ((inflight_.load(std::memory_order_acquire) > 0 || ThreadWork::anyBusy(own)) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  // Launch calls still in progress have their events with the writer,
  // which waits for their outcomes: not for long now (one may never
  // return: the thread that got a fatal signal, a driver that hangs).
  LaunchOutcome::hurry(std::chrono::milliseconds(1000));
  // The last checkpoint: what the last interval's launches left, for
  // replay to verify them. Not on a fatal signal: the device may be in any
  // state and the thread that got it may hold the driver's locks.
  if (checkpoints_ != nullptr && (reason == schema::EndReason::EXIT || reason == schema::EndReason::EXPLICIT) &&
      !lastCheckpointTaken_.exchange(true)) {
    checkpointNow(schema::CheckpointReason::END, std::chrono::milliseconds(1000));
  }
  // What other agents wrote, read back after their calls returned: after
  // the last checkpoint, which waited for the device. Not waited for on a
  // fatal signal.
  if (readback_ != nullptr) {
    const bool orderly = reason == schema::EndReason::EXIT || reason == schema::EndReason::EXPLICIT;
    readback_->finish(orderly ? std::chrono::milliseconds(5000) : std::chrono::milliseconds(0), orderly);
  }
  CheckpointGate::disarm();
  // Durations CUPTI still holds go in before traceEnd. Not on a fatal
  // signal: the thread that got it may hold CUPTI's locks.
  timing::finish(*this, reason == schema::EndReason::EXIT || reason == schema::EndReason::EXPLICIT);
  try {
    EventMessage event(*this, false);
    auto traceEnd = event.event().initTraceEnd();
    traceEnd.setReason(reason);
    traceEnd.setSignal(signal);
    traceEnd.setEventCount(writer_->stats().events);
    // Launches past the filters were recorded unless the launch range
    // (skip, at most) left them out. Numbered by the writer, they are all
    // counted once it has sequenced what was appended.
    writer_->waitSequenced();
    const uint64_t eligible = eligibleLaunches_.load();
    const uint64_t recorded = std::min(eligible > options_.skip ? eligible - options_.skip : 0, options_.maxLaunches);
    traceEnd.setLaunchCount(recorded);
    traceEnd.setDroppedLaunches(filteredLaunches_.load() + (eligible - recorded));
    if (!message.empty()) {
      traceEnd.setMessage(message);
    }
    append(event);
  } catch (...) {
    // the writer failed; close() says why
  }
  if (reason == schema::EndReason::INTERNAL_ERROR) {
    reportStatus("stopped", path_, message.empty() ? "internal error" : message.c_str());
  }
  try {
    writer_->close();
    const format::TraceWriter::Stats stats = writer_->stats();
    noteWriterStats(
        {stats.uniqueBytes, stats.reusedBuffers, stats.producerWaitNs, stats.pageLockedBytes, stats.pageLockNs});
  } catch (const std::exception& e) {
    if (reason != schema::EndReason::INTERNAL_ERROR) {
      logMessage("the trace %s may be incomplete: %s", path_.c_str(), e.what());
      reportStatus("stopped", path_, e.what());
    }
  } catch (...) {}
}

void Recorder::endCurrent(schema::EndReason reason, int signal, std::chrono::milliseconds wait) noexcept {
  if (Recorder* recorder = current()) {
    recorder->end(reason, signal, std::string(), wait);
  }
}

void Recorder::flushCurrent() noexcept {
  Recorder* recorder = current();
  if (recorder == nullptr || recorder->ending_.load()) {
    return;
  }
  try {
    recorder->flush();
  } catch (...) {
    // nothing more to save
  }
}

void Recorder::failCurrent(const char* why) noexcept {
  if (Recorder* recorder = current()) {
    try {
      recorder->end(schema::EndReason::INTERNAL_ERROR, 0, why != nullptr ? why : "", std::chrono::milliseconds(1000));
    } catch (...) {}
  }
}

bool Recorder::endedCurrent() noexcept {
  Recorder* recorder = current();
  return recorder != nullptr && recorder->ending_.load();
}

void Recorder::afterFork() noexcept {
  t_tid = 0;  // this thread's id in the parent
}

}  // namespace kcap
