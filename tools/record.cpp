// kcap record [options] -- CMD ARGS...: runs CMD with the capture shim
// preloaded and says what it recorded.
//
// The shim is libkcap_interpose.so: --shim PATH, else KCAP_SHIM, else found
// next to this binary (the build tree's interpose/, or an install's lib/).
// Each option becomes the KCAP_* variable the shim reads (a variable already
// in the environment counts when its option is not given), validated here
// with the shim's own parser, so that a bad value is a usage error (exit 2)
// rather than a silent run without recording.
//
// The trace path is checked before CMD starts: its directory must exist and
// be writable, and nothing at the path is replaced unless --force is given
// and it is a kcap trace no process is writing (a regular file with the kcap
// magic, not locked by a writer). The shim creates every trace exclusively;
// it reports each trace it creates, and why recording into one stopped, to a
// status file (KCAP_RECORD_STATUS), so the summary is of this recording's
// traces only, whatever else is in the directory.
//
// Exit code: CMD's own, or 128 + the signal that ended it; 127 if it could
// not be started; 2 for usage errors and an output path refused. Unless
// --quiet, one line on stderr at the end for each trace: events, launches,
// size, and what ended it when it was not closed.
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "capture_options.h"
#include "common.h"
#include "container.h"
#include "errors.h"
#include "subcommands.h"
#include "trace_reader.h"

extern char** environ;

namespace kcap::tools {
namespace {

constexpr const char* kShimName = "libkcap_interpose.so";
constexpr const char* kDefaultOutput = "kcap-%p.kcap";

struct Options {
  std::string output;
  std::string mode;
  std::string checkpointEvery;
  std::string checkpointDevice;
  std::string trigger;
  std::string ring;
  std::string ringDisk;
  std::string readback;
  std::string writerPriority;
  std::string writerCpus;
  std::string include;
  std::string exclude;
  std::string skip;
  std::string maxLaunches;
  std::string level;
  std::string pieceSize;
  std::string buffer;
  std::string flush;
  std::string hash;
  bool timing = false;
  std::string shim;
  bool force = false;
  bool quiet = false;
  std::vector<std::string> command;
};

// The option that sets each variable, for messages.
const std::map<std::string, std::string>& flagOf() {
  static const std::map<std::string, std::string> flags = {{"KCAP_OUTPUT", "--output"},
                                                           {"KCAP_MODE", "--mode"},
                                                           {"KCAP_INCLUDE", "--include"},
                                                           {"KCAP_EXCLUDE", "--exclude"},
                                                           {"KCAP_SKIP", "--skip"},
                                                           {"KCAP_MAX_LAUNCHES", "--max-launches"},
                                                           {"KCAP_LEVEL", "--level"},
                                                           {"KCAP_PIECE_SIZE", "--piece-size"},
                                                           {"KCAP_BUFFER", "--buffer"},
                                                           {"KCAP_FLUSH", "--flush"},
                                                           {"KCAP_TIMING", "--timing"},
                                                           {"KCAP_HASH", "--hash"},
                                                           {"KCAP_CHECKPOINT_EVERY", "--checkpoint-every"},
                                                           {"KCAP_CHECKPOINT_DEVICE", "--checkpoint-device"},
                                                           {"KCAP_TRIGGER", "--trigger"},
                                                           {"KCAP_RING", "--ring"},
                                                           {"KCAP_READBACK", "--readback"},
                                                           {"KCAP_WRITER_PRIORITY", "--writer-priority"},
                                                           {"KCAP_WRITER_CPUS", "--writer-cpus"},
                                                           {"KCAP_RING_DISK", "--ring-disk"}};
  return flags;
}

bool isFile(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string directoryOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

std::string selfDirectory() {
  char buffer[PATH_MAX] = {};
  const ssize_t n = ::readlink("/proc/self/exe", buffer, sizeof buffer - 1);
  return n > 0 ? directoryOf(std::string(buffer, static_cast<size_t>(n))) : ".";
}

std::string absolute(const std::string& path) {
  if (!path.empty() && path[0] == '/') return path;
  char cwd[PATH_MAX] = {};
  if (::getcwd(cwd, sizeof cwd) == nullptr) return path;
  return std::string(cwd) + "/" + path;
}

// --shim, KCAP_SHIM, or next to this binary. Empty (and a message) if none.
std::string findShim(const Options& opt) {
  std::string requested = opt.shim;
  if (requested.empty()) {
    const char* env = std::getenv("KCAP_SHIM");
    if (env != nullptr) requested = env;
  }
  if (!requested.empty()) {
    if (isFile(requested)) return absolute(requested);
    std::cerr << "kcap record: the shim " << requested << " does not exist\n";
    return {};
  }
  const std::string dir = selfDirectory();
  for (const std::string& candidate : {dir + "/../interpose/" + kShimName, dir + "/../lib/" + kShimName,
                                       dir + "/../lib64/" + kShimName, dir + "/" + kShimName}) {
    if (isFile(candidate)) {
      char resolved[PATH_MAX] = {};
      return ::realpath(candidate.c_str(), resolved) != nullptr ? std::string(resolved) : candidate;
    }
  }
  std::cerr << "kcap record: cannot find " << kShimName << " next to " << dir
            << " (in ../interpose, ../lib, ../lib64 or .); give its path with --shim or KCAP_SHIM\n";
  return {};
}

// The trace template as the user gave it (for messages).
std::string givenOutput(const Options& opt) {
  if (!opt.output.empty()) return opt.output;
  const char* env = std::getenv("KCAP_OUTPUT");
  return env != nullptr && env[0] != '\0' ? env : kDefaultOutput;
}

// The KCAP_* settings the child gets: options given here, else the
// environment's.
std::map<std::string, std::string> settings(const Options& opt) {
  std::map<std::string, std::string> out;
  const std::pair<const char*, const std::string*> given[] = {{"KCAP_MODE", &opt.mode},
                                                              {"KCAP_INCLUDE", &opt.include},
                                                              {"KCAP_EXCLUDE", &opt.exclude},
                                                              {"KCAP_SKIP", &opt.skip},
                                                              {"KCAP_MAX_LAUNCHES", &opt.maxLaunches},
                                                              {"KCAP_LEVEL", &opt.level},
                                                              {"KCAP_PIECE_SIZE", &opt.pieceSize},
                                                              {"KCAP_BUFFER", &opt.buffer},
                                                              {"KCAP_FLUSH", &opt.flush},
                                                              {"KCAP_HASH", &opt.hash},
                                                              {"KCAP_CHECKPOINT_EVERY", &opt.checkpointEvery},
                                                              {"KCAP_CHECKPOINT_DEVICE", &opt.checkpointDevice},
                                                              {"KCAP_TRIGGER", &opt.trigger},
                                                              {"KCAP_RING", &opt.ring},
                                                              {"KCAP_RING_DISK", &opt.ringDisk},
                                                              {"KCAP_READBACK", &opt.readback},
                                                              {"KCAP_WRITER_PRIORITY", &opt.writerPriority},
                                                              {"KCAP_WRITER_CPUS", &opt.writerCpus}};
  for (const char* name : captureVariables()) {
    const char* env = std::getenv(name);
    if (env != nullptr) out[name] = env;
  }
  for (const auto& [name, value] : given) {
    if (!value->empty()) out[name] = *value;
  }
  if (opt.timing) out["KCAP_TIMING"] = "1";
  out["KCAP_OUTPUT"] = absolute(givenOutput(opt));
  return out;
}

std::string hostName() {
  char name[256] = {};
  return ::gethostname(name, sizeof name - 1) == 0 ? name : "unknown";
}

std::string rank() {
  return rankFromEnvironment([](const char* name) { return std::getenv(name); });
}

// SIGTERM / SIGHUP sent to `kcap record` go to the program; SIGINT and
// SIGQUIT from the terminal reach it anyway (same process group), so
// `kcap record` ignores those while it waits.
volatile sig_atomic_t g_child = 0;

void forward(int sig) {
  if (g_child > 0) ::kill(static_cast<pid_t>(g_child), sig);
}

// The child's wait status.
int waitFor(pid_t child) {
  int status = 0;
  while (::waitpid(child, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  return status;
}

int exitCode(int status) {
  if (status != -1 && WIFEXITED(status)) return WEXITSTATUS(status);
  if (status != -1 && WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 127;
}

std::string signalName(int sig) {
  const char* abbrev = ::sigabbrev_np(sig);
  return abbrev != nullptr ? std::string("SIG") + abbrev : "an unknown signal";
}

const char* fileKind(mode_t mode) {
  switch (mode & S_IFMT) {
    case S_IFDIR:
      return "a directory";
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

// Whether the trace may go to `path` (`shown`: the same as the user wrote
// it): "" when it may, else why not. With `force`, replaces a kcap trace
// that is there.
std::string checkOutput(const std::string& path, const std::string& shown, bool force) {
  const std::string dir = directoryOf(path);
  const std::string shownDir = directoryOf(shown);
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) {
      return shown + " is a directory (-o names the trace file, e.g. " + shown + "/run.kcap)";
    }
    if (!S_ISREG(st.st_mode)) {
      return shown + " is not a regular file (" + fileKind(st.st_mode) + "); not replacing it, even with --force";
    }
    if (!force) return shown + " exists; not replacing it (--force replaces a kcap trace)";
    const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return "cannot read " + shown + ": " + std::strerror(errno) + "; not replacing it";
    std::array<uint8_t, format::kFileMagic.size()> magic{};
    struct stat opened {};
    const bool trace =
        ::pread(fd, magic.data(), magic.size(), 0) == static_cast<ssize_t>(magic.size()) && magic == format::kFileMagic;
    std::string refused;
    if (!trace) {
      refused = shown + " is not a kcap trace; not replacing it, even with --force";
    } else if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      // The shim's writer holds the lock while the trace is open.
      refused = shown + " is being written by another process; not replacing it";
    } else if (::fstat(fd, &opened) != 0 || ::lstat(path.c_str(), &st) != 0 || st.st_dev != opened.st_dev ||
               st.st_ino != opened.st_ino) {
      refused = shown + " changed while it was checked; not replacing it";
    } else if (::unlink(path.c_str()) != 0) {
      refused = "cannot replace " + shown + ": " + std::strerror(errno);
    }
    ::close(fd);
    if (!refused.empty()) return refused;
  } else if (errno != ENOENT && errno != ENOTDIR) {
    return "cannot write " + shown + ": " + std::strerror(errno);
  }
  if (::stat(dir.c_str(), &st) != 0) {
    return "cannot write " + shown + ": " +
           (errno == ENOENT ? "the directory " + shownDir + " does not exist" : shownDir + ": " + std::strerror(errno));
  }
  if (!S_ISDIR(st.st_mode)) return "cannot write " + shown + ": " + shownDir + " is not a directory";
  // access() reports a read-only file system (EROFS) to root as well.
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    return "cannot write " + shown + ": " + shownDir + ": " + std::strerror(errno);
  }
  return {};
}

// ---- the status file ----------------------------------------------------------------

// What the shims of this recording reported (interpose/record/recorder.cpp writes
// the lines): each trace created, in order, by which process, and why
// recording into it stopped, if it did.
struct TraceReport {
  long pid = 0;
  std::string path;
  std::string stopped;
};

std::string unescapeField(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size()) {
      const std::string code = text.substr(i + 1, 2);
      if (code == "25" || code == "09" || code == "0A") {
        out += code == "25" ? '%' : code == "09" ? '\t' : '\n';
        i += 2;
        continue;
      }
    }
    out += text[i];
  }
  return out;
}

std::vector<TraceReport> readStatus(const std::string& statusPath) {
  std::vector<TraceReport> traces;
  std::FILE* in = std::fopen(statusPath.c_str(), "re");
  if (in == nullptr) return traces;
  std::string line;
  for (int c = std::fgetc(in);; c = std::fgetc(in)) {
    if (c != '\n' && c != EOF) {
      line += static_cast<char>(c);
      continue;
    }
    // "trace PID PATH" or "stopped PID PATH<tab>WHY"
    const size_t space = line.find(' ');
    const size_t second = space == std::string::npos ? std::string::npos : line.find(' ', space + 1);
    if (second != std::string::npos) {
      const std::string kind = line.substr(0, space);
      const long pid = std::strtol(line.c_str() + space + 1, nullptr, 10);
      const size_t tab = line.find('\t', second + 1);
      const std::string path =
          unescapeField(line.substr(second + 1, tab == std::string::npos ? std::string::npos : tab - second - 1));
      const std::string why = tab == std::string::npos ? "" : unescapeField(line.substr(tab + 1));
      auto known = std::find_if(traces.begin(), traces.end(), [&](const TraceReport& t) { return t.path == path; });
      if (kind == "trace" && known == traces.end()) {
        traces.push_back({pid, path, ""});
      } else if (kind == "stopped" && known != traces.end() && known->stopped.empty()) {
        known->stopped = why.empty() ? "internal error" : why;
      }
    }
    line.clear();
    if (c == EOF) break;
  }
  std::fclose(in);
  return traces;
}

// The shim's reason, without the trace's path the line already names.
std::string stoppedWhy(const TraceReport& trace) {
  const std::string& why = trace.stopped;
  return why.rfind(trace.path + ": ", 0) == 0 ? why.substr(trace.path.size() + 2) : why;
}

// What ended a trace that is not closed, from what the evidence shows: the
// shim's own report, else the wait status of the program (when the trace is
// its own), and whether the file ends inside a chunk.
std::string whyNotClosed(const TraceReport& trace, const format::TraceReader& reader, pid_t child, int status) {
  if (!trace.stopped.empty()) return "recording stopped: " + stoppedWhy(trace);
  const std::string cut = reader.torn() ? ", the file ends inside a chunk" : "";
  if (trace.pid == static_cast<long>(child) && status != -1) {
    if (WIFSIGNALED(status)) {
      return strf("the program was killed by signal %d (%s)", WTERMSIG(status), signalName(WTERMSIG(status)).c_str()) +
             cut;
    }
    if (WIFEXITED(status)) {
      return reader.torn()
                 ? strf("the program exited (code %d) while the trace was being written%s", WEXITSTATUS(status),
                        cut.c_str())
                 : strf("the program exited (code %d) without closing the trace (e.g. _exit)", WEXITSTATUS(status));
    }
  }
  return strf("process %ld ended without closing it (killed, or _exit)%s", trace.pid, cut.c_str());
}

void summarize(const TraceReport& trace, pid_t child, int status) {
  try {
    auto reader = format::TraceReader::open(trace.path);
    uint64_t events = 0;
    uint64_t launches = 0;
    reader->forEachEvent([&](const format::EventRef& ref) {
      ++events;
      if (ref.event.which() == schema::Event::LAUNCH) ++launches;
      return true;
    });
    std::string state;
    if (!reader->closed()) {
      state = ", not closed: " + whyNotClosed(trace, *reader, child, status);
    } else if (!trace.stopped.empty()) {
      state = ", recording stopped early: " + stoppedWhy(trace);
    }
    if (!reader->problems().empty()) state += strf(", %zu problem(s): run kcap check", reader->problems().size());
    std::cerr << "kcap: recorded " << withCommas(events) << " events, " << withCommas(launches) << " launch"
              << (launches == 1 ? "" : "es") << " in " << trace.path << " (" << humanSize(reader->fileSize()) << ")"
              << state << "\n";
  } catch (const format::FormatError& e) {
    std::cerr << "kcap: the trace cannot be read: " << e.what()
              << (trace.stopped.empty() ? "" : " (recording stopped: " + trace.stopped + ")") << "\n";
  }
}

// A status file for this recording's shims, empty (and said) if none can be made.
std::string makeStatusFile() {
  const char* tmp = std::getenv("TMPDIR");
  std::string name = std::string(tmp != nullptr && tmp[0] != '\0' ? tmp : "/tmp") + "/kcap-record-XXXXXX";
  const int fd = ::mkstemp(name.data());
  if (fd < 0) {
    std::cerr << "kcap record: cannot create a status file (" << name << ": " << std::strerror(errno)
              << "); recording without a summary\n";
    return {};
  }
  ::close(fd);
  return name;
}

int runRecord(const Options& opt) {
  if (opt.command.empty()) {
    std::cerr << "kcap record: no command given (kcap record [options] -- CMD ARGS...)\n";
    return kExitUsage;
  }
  const std::map<std::string, std::string> vars = settings(opt);
  std::optional<CaptureOptions> options;
  try {
    options = readCaptureOptions([&](const char* name) -> const char* {
      const auto it = vars.find(name);
      return it != vars.end() ? it->second.c_str() : nullptr;
    });
  } catch (const OptionError& e) {
    const auto flag = flagOf().find(e.variable());
    std::cerr << "kcap record: " << (flag != flagOf().end() ? flag->second : e.variable()) << " \"" << e.value()
              << "\": " << e.reason() << "\n";
    return kExitUsage;
  }
  const std::string shim = findShim(opt);
  if (shim.empty()) return kExitUsage;

  const std::string pattern = vars.at("KCAP_OUTPUT");
  const std::string given = givenOutput(opt);
  const std::string statusPath = opt.quiet ? std::string() : makeStatusFile();

  std::vector<std::string> environment;
  std::string preload = shim;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string variable = *entry;
    const std::string name = variable.substr(0, variable.find('='));
    if (name == "LD_PRELOAD") {
      const std::string existing = variable.substr(name.size() + 1);
      // The shim goes first, except behind a sanitizer runtime, which
      // insists on being first itself.
      const bool sanitizer =
          existing.find("libasan") != std::string::npos || existing.find("clang_rt.asan") != std::string::npos;
      if (sanitizer) {
        preload = existing + ":" + shim;
      } else if (!existing.empty()) {
        preload += ":" + existing;
      }
    } else if (vars.count(name) == 0 && name != "KCAP_RECORD_STATUS") {
      environment.push_back(variable);
    }
  }
  environment.push_back("LD_PRELOAD=" + preload);
  for (const auto& [name, value] : vars) environment.push_back(name + "=" + value);
  if (!statusPath.empty()) environment.push_back("KCAP_RECORD_STATUS=" + statusPath);

  std::vector<char*> envp;
  for (std::string& variable : environment) envp.push_back(variable.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = opt.command;
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);

  struct sigaction ignore {};
  struct sigaction forwarding {};
  struct sigaction oldInt {
  }, oldQuit{}, oldTerm{}, oldHup{};
  ignore.sa_handler = SIG_IGN;
  forwarding.sa_handler = forward;
  sigemptyset(&ignore.sa_mask);
  sigemptyset(&forwarding.sa_mask);
  const auto removeStatus = [&] {
    if (!statusPath.empty()) ::unlink(statusPath.c_str());
  };
  // The child waits at a gate until its trace's path (which %p names after
  // it) is checked: a refused path runs nothing.
  int gate[2] = {-1, -1};
  if (::pipe2(gate, O_CLOEXEC) != 0) {
    std::cerr << "kcap record: pipe failed: " << std::strerror(errno) << "\n";
    removeStatus();
    return 127;
  }
  std::fflush(nullptr);
  const pid_t child = ::fork();
  if (child < 0) {
    std::cerr << "kcap record: fork failed: " << std::strerror(errno) << "\n";
    removeStatus();
    return 127;
  }
  if (child == 0) {
    ::close(gate[1]);
    char go = 0;
    while (::read(gate[0], &go, 1) < 0 && errno == EINTR) {}
    if (go != '1') ::_exit(127);
    ::execvpe(argv[0], argv.data(), envp.data());
    const int error = errno;
    std::fprintf(stderr, "kcap record: cannot run %s: %s\n", argv[0], std::strerror(error));
    ::_exit(error == ENOENT ? 127 : 126);
  }
  ::close(gate[0]);
  std::string refused;
  try {
    refused = checkOutput(expandOutputPath(pattern, static_cast<long>(child), hostName(), rank()),
                          expandOutputPath(given, static_cast<long>(child), hostName(), rank()), opt.force);
  } catch (const OptionError& e) {
    refused = e.what();
  }
  if (!refused.empty()) {
    ::close(gate[1]);  // the child leaves without running anything
    waitFor(child);
    removeStatus();
    std::cerr << "kcap record: " << refused << "\n";
    return kExitUsage;
  }
  const char go = '1';
  if (::write(gate[1], &go, 1) != 1) {
    std::cerr << "kcap record: cannot start the program: " << std::strerror(errno) << "\n";
  }
  ::close(gate[1]);
  g_child = child;
  sigaction(SIGINT, &ignore, &oldInt);
  sigaction(SIGQUIT, &ignore, &oldQuit);
  sigaction(SIGTERM, &forwarding, &oldTerm);
  sigaction(SIGHUP, &forwarding, &oldHup);
  const int status = waitFor(child);
  sigaction(SIGINT, &oldInt, nullptr);
  sigaction(SIGQUIT, &oldQuit, nullptr);
  sigaction(SIGTERM, &oldTerm, nullptr);
  sigaction(SIGHUP, &oldHup, nullptr);

  if (!statusPath.empty()) {
    const std::vector<TraceReport> traces = readStatus(statusPath);
    removeStatus();
    if (traces.empty() && options->triggers.any()) {
      // The flight recorder writes only when a trigger fires.
      std::cerr << "kcap: no trigger fired (" << options->triggers.text() << "); nothing written to "
                << expandOutputPath(given, static_cast<long>(child), hostName(), rank()) << "\n";
    } else if (traces.empty()) {
      std::cerr << "kcap: no trace written to " << expandOutputPath(given, static_cast<long>(child), hostName(), rank())
                << " (the program made no CUDA calls, or recording failed)\n";
    }
    constexpr size_t kListed = 16;
    for (size_t i = 0; i < traces.size() && i < kListed; ++i) summarize(traces[i], child, status);
    if (traces.size() > kListed) std::cerr << "kcap: ... and " << traces.size() - kListed << " more traces\n";
  }
  return exitCode(status);
}

}  // namespace

Run setupRecord(CLI::App& cmd) {
  auto opt = std::make_shared<Options>();
  cmd.add_option("-o,--output", opt->output,
                 "Trace path (KCAP_OUTPUT); %p pid, %h host, %r rank, %% a percent sign [default: kcap-%p.kcap]")
      ->type_name("PATH");
  cmd.add_option("--mode", opt->mode,
                 "full: reachable memory before and after each launch (default); pre: before only; "
                 "metadata: no memory, no synchronization; checkpoint: metadata plus periodic checkpoints of all "
                 "live device memory, replayed by re-execution (KCAP_MODE)")
      ->type_name("MODE");
  cmd.add_option("--checkpoint-every", opt->checkpointEvery,
                 "Checkpoint mode: time (500ms, 2s, 1m) or launches (1000launches) between checkpoints "
                 "(KCAP_CHECKPOINT_EVERY) [default: 1s]")
      ->type_name("INTERVAL");
  cmd.add_option("--checkpoint-device", opt->checkpointDevice,
                 "Checkpoint mode, a process driving several GPUs: the device whose memory the checkpoints hold; "
                 "replay re-executes its launches (KCAP_CHECKPOINT_DEVICE) [default: the first launch's]")
      ->type_name("N");
  cmd.add_option("--trigger", opt->trigger,
                 "The flight recorder (checkpoint mode): nothing is written until one of these fires, then the "
                 "last --ring checkpoints and the log since the oldest: error, signal, exit, api, hang=SECONDS, "
                 "comma-separated (KCAP_TRIGGER)")
      ->type_name("LIST");
  cmd.add_option("--ring", opt->ring,
                 "With --trigger: checkpoints the ring keeps, held in memory up to --buffer, then in a ring file "
                 "up to --ring-disk (KCAP_RING) [default: 2]")
      ->type_name("N");
  cmd.add_option("--ring-disk", opt->ringDisk,
                 "With --trigger: disk for what of the ring exceeds --buffer, in an unnamed file in the output's "
                 "directory, e.g. 32G; 0: none, past --buffer older checkpoints are dropped (KCAP_RING_DISK) "
                 "[default: 8G]")
      ->type_name("SIZE");
  cmd.add_option("--readback", opt->readback,
                 "Checkpoint mode: page-locked memory for reading back what NCCL calls and copies from other "
                 "devices wrote without holding the calling thread (KCAP_READBACK) [default: 256M]; a call whose "
                 "bytes do not fit, and with 0 every call, waits for its stream")
      ->type_name("SIZE");
  cmd.add_option("--writer-priority", opt->writerPriority,
                 "Metadata and checkpoint modes: idle runs the trace writer's threads under SCHED_IDLE, only on "
                 "CPU the program leaves, never preempting its threads (KCAP_WRITER_PRIORITY) [default: normal]")
      ->type_name("normal|idle");
  cmd.add_option("--writer-cpus", opt->writerCpus,
                 "The CPUs the trace writer's threads may run on, e.g. 15 or 12-15,30, each one the program may "
                 "run on: keeps them off the cores the program's threads use (KCAP_WRITER_CPUS) [default: the "
                 "program's]")
      ->type_name("LIST");
  cmd.add_option("--include", opt->include, "Record only kernels whose name matches this regex (KCAP_INCLUDE)")
      ->type_name("REGEX");
  cmd.add_option("--exclude", opt->exclude, "Do not record kernels whose name matches this regex (KCAP_EXCLUDE)")
      ->type_name("REGEX");
  cmd.add_option("--skip", opt->skip, "Skip the first N launches that pass the filters (KCAP_SKIP)")->type_name("N");
  cmd.add_option("--max-launches", opt->maxLaunches, "Then record at most N launches (KCAP_MAX_LAUNCHES)")
      ->type_name("N");
  cmd.add_option("--level", opt->level, "zstd compression level (KCAP_LEVEL) [default: 1]")->type_name("LEVEL");
  cmd.add_option("--piece-size", opt->pieceSize, "Bytes per stored memory piece, e.g. 1M (KCAP_PIECE_SIZE)")
      ->type_name("SIZE");
  cmd.add_option("--buffer", opt->buffer,
                 "Memory for snapshots not yet written to the file, e.g. 8G (KCAP_BUFFER) [default: 256M]; more "
                 "captures a burst of fresh memory at memory speed, written out behind the program")
      ->type_name("SIZE");
  cmd.add_option("--flush", opt->flush,
                 "launch: each launch's record and memory are in the file before the launch runs, so a launch "
                 "that kills the process is on record (KCAP_FLUSH) [default]; batch: the file is written behind "
                 "the program (with a --buffer large enough, fresh memory is captured at memory speed); a SIGKILL "
                 "then loses what was not yet written")
      ->type_name("launch|batch");
  cmd.add_option("--hash", opt->hash,
                 "device: a large range of device memory is hashed on the GPU first and only the pieces the "
                 "trace lacks are copied to the host (KCAP_HASH) [default]; host: every range is copied and "
                 "hashed on the host")
      ->type_name("device|host");
  cmd.add_flag("--timing", opt->timing,
               "Also record each launch's GPU duration through CUPTI (KCAP_TIMING=1); without CUPTI, or "
               "when a profiler holds it, says so once and records without durations");
  cmd.add_option("--shim", opt->shim, "Path of libkcap_interpose.so (KCAP_SHIM) [default: next to kcap]")
      ->type_name("PATH");
  cmd.add_flag("--force", opt->force,
               "Replace the trace at the output path if there is one (only a kcap trace no process is writing; "
               "anything else there is never replaced)");
  cmd.add_flag("-q,--quiet", opt->quiet, "Print no summary at the end");
  cmd.add_option("command", opt->command, "The program to run and its arguments (after --)")->type_name("CMD ARGS...");
  return [opt] { return runRecord(*opt); };
}

}  // namespace kcap::tools
