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
// Exit code: CMD's own, or 128 + the signal that ended it; 127 if it could
// not be started; 2 for usage errors. Unless --quiet, one line on stderr at
// the end: events, launches and size of the trace.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "capture_options.h"
#include "common.h"
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
  bool quiet = false;
  std::vector<std::string> command;
};

// The option that sets each variable, for messages.
const std::map<std::string, std::string>& flagOf() {
  static const std::map<std::string, std::string> flags = {
      {"KCAP_OUTPUT", "--output"}, {"KCAP_MODE", "--mode"},
      {"KCAP_INCLUDE", "--include"}, {"KCAP_EXCLUDE", "--exclude"},
      {"KCAP_SKIP", "--skip"}, {"KCAP_MAX_LAUNCHES", "--max-launches"},
      {"KCAP_LEVEL", "--level"}, {"KCAP_PIECE_SIZE", "--piece-size"}, {"KCAP_BUFFER", "--buffer"},
      {"KCAP_FLUSH", "--flush"}, {"KCAP_TIMING", "--timing"}, {"KCAP_HASH", "--hash"}};
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

// The KCAP_* settings the child gets: options given here, else the
// environment's.
std::map<std::string, std::string> settings(const Options& opt) {
  std::map<std::string, std::string> out;
  const std::pair<const char*, const std::string*> given[] = {
      {"KCAP_MODE", &opt.mode},     {"KCAP_INCLUDE", &opt.include},
      {"KCAP_EXCLUDE", &opt.exclude}, {"KCAP_SKIP", &opt.skip},
      {"KCAP_MAX_LAUNCHES", &opt.maxLaunches}, {"KCAP_LEVEL", &opt.level},
      {"KCAP_PIECE_SIZE", &opt.pieceSize}, {"KCAP_BUFFER", &opt.buffer},
      {"KCAP_FLUSH", &opt.flush}, {"KCAP_HASH", &opt.hash}};
  for (const char* name : captureVariables()) {
    const char* env = std::getenv(name);
    if (env != nullptr) out[name] = env;
  }
  for (const auto& [name, value] : given) {
    if (!value->empty()) out[name] = *value;
  }
  if (opt.timing) out["KCAP_TIMING"] = "1";
  std::string output = opt.output;
  if (output.empty()) {
    const char* env = std::getenv("KCAP_OUTPUT");
    output = env != nullptr && env[0] != '\0' ? env : kDefaultOutput;
  }
  out["KCAP_OUTPUT"] = absolute(output);
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

int waitFor(pid_t child) {
  int status = 0;
  while (::waitpid(child, &status, 0) < 0) {
    if (errno != EINTR) return 127;
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 127;
}

void summarize(const std::string& path) {
  try {
    auto reader = format::TraceReader::open(path);
    uint64_t events = 0;
    uint64_t launches = 0;
    reader->forEachEvent([&](const format::EventRef& ref) {
      ++events;
      if (ref.event.which() == schema::Event::LAUNCH) ++launches;
      return true;
    });
    std::string state;
    if (!reader->closed()) state = ", not closed (the program was killed?)";
    if (!reader->problems().empty()) state += strf(", %zu problem(s): run kcap check", reader->problems().size());
    std::cerr << "kcap: recorded " << withCommas(events) << " events, " << withCommas(launches) << " launch"
              << (launches == 1 ? "" : "es") << " in " << path << " (" << humanSize(reader->fileSize()) << ")"
              << state << "\n";
  } catch (const format::FormatError& e) {
    std::cerr << "kcap: the trace cannot be read: " << e.what() << "\n";
  }
}

std::string regexEscape(const std::string& text) {
  static const std::string special = "\\^$.|?*+()[]{}";
  std::string out;
  for (const char c : text) {
    if (special.find(c) != std::string::npos) out += '\\';
    out += c;
  }
  return out;
}

// The traces the program's processes wrote: the one the template names for
// the program's pid, or, when a descendant recorded instead (a shell or a
// launcher ran the CUDA program), every file the template could have
// produced that was written since the program started.
std::vector<std::string> tracesWritten(const std::string& pattern, pid_t child, time_t started) {
  const std::string own = expandOutputPath(pattern, static_cast<long>(child), hostName(), rank());
  std::string name;  // a regex for the file name of any process's trace
  const std::string file = pattern.substr(pattern.rfind('/') + 1);
  for (size_t i = 0; i < file.size(); ++i) {
    if (file[i] == '%' && i + 1 < file.size()) {
      const char p = file[++i];
      name += p == 'p' ? "[0-9]+" : p == 'h' ? regexEscape(hostName()) : p == 'r' ? regexEscape(rank()) : "%";
    } else {
      name += regexEscape(std::string(1, file[i]));
    }
  }
  if (!outputHasPid(pattern)) {
    // withPidSuffix: ".<pid>" before the extension
    const std::string plain = own.substr(own.rfind('/') + 1);
    const size_t dot = plain.rfind('.');
    name = dot == std::string::npos || dot == 0
               ? regexEscape(plain) + "(\\.[0-9]+)?"
               : regexEscape(plain.substr(0, dot)) + "(\\.[0-9]+)?" + regexEscape(plain.substr(dot));
  }
  std::vector<std::string> found;
  if (isFile(own)) found.push_back(own);
  const std::string dir = directoryOf(own);
  std::error_code error;
  const std::regex matcher(name);
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    const std::string path = dir + "/" + entry.path().filename().string();
    struct stat st {};
    if (path == own || !std::regex_match(entry.path().filename().string(), matcher) ||
        ::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_mtime < started) {
      continue;
    }
    found.push_back(path);
  }
  std::sort(found.begin() + (isFile(own) ? 1 : 0), found.end());
  return found;
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

  // A trace name without %p is claimed by the first process that records
  // (KCAP_OUTPUT_EXCLUSIVE): remove an old file of that name first.
  const std::string pattern = vars.at("KCAP_OUTPUT");
  if (!outputHasPid(pattern)) {
    ::unlink(expandOutputPath(pattern, 0, hostName(), rank()).c_str());
  }

  std::vector<std::string> environment;
  std::string preload = shim;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string variable = *entry;
    const std::string name = variable.substr(0, variable.find('='));
    if (name == "LD_PRELOAD") {
      const std::string existing = variable.substr(name.size() + 1);
      // The shim goes first, except behind a sanitizer runtime, which
      // insists on being first itself.
      const bool sanitizer = existing.find("libasan") != std::string::npos ||
                             existing.find("clang_rt.asan") != std::string::npos;
      if (sanitizer) {
        preload = existing + ":" + shim;
      } else if (!existing.empty()) {
        preload += ":" + existing;
      }
    } else if (vars.count(name) == 0 && name != "KCAP_OUTPUT_EXCLUSIVE") {
      environment.push_back(variable);
    }
  }
  environment.push_back("LD_PRELOAD=" + preload);
  for (const auto& [name, value] : vars) environment.push_back(name + "=" + value);
  environment.push_back("KCAP_OUTPUT_EXCLUSIVE=1");

  std::vector<char*> envp;
  for (std::string& variable : environment) envp.push_back(variable.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = opt.command;
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);

  struct sigaction ignore {};
  struct sigaction forwarding {};
  struct sigaction oldInt {}, oldQuit {}, oldTerm {}, oldHup {};
  ignore.sa_handler = SIG_IGN;
  forwarding.sa_handler = forward;
  sigemptyset(&ignore.sa_mask);
  sigemptyset(&forwarding.sa_mask);
  std::fflush(nullptr);
  const time_t started = ::time(nullptr);
  const pid_t child = ::fork();
  if (child < 0) {
    std::cerr << "kcap record: fork failed: " << std::strerror(errno) << "\n";
    return 127;
  }
  if (child == 0) {
    ::execvpe(argv[0], argv.data(), envp.data());
    const int error = errno;
    std::fprintf(stderr, "kcap record: cannot run %s: %s\n", argv[0], std::strerror(error));
    ::_exit(error == ENOENT ? 127 : 126);
  }
  g_child = child;
  sigaction(SIGINT, &ignore, &oldInt);
  sigaction(SIGQUIT, &ignore, &oldQuit);
  sigaction(SIGTERM, &forwarding, &oldTerm);
  sigaction(SIGHUP, &forwarding, &oldHup);
  const int code = waitFor(child);
  sigaction(SIGINT, &oldInt, nullptr);
  sigaction(SIGQUIT, &oldQuit, nullptr);
  sigaction(SIGTERM, &oldTerm, nullptr);
  sigaction(SIGHUP, &oldHup, nullptr);

  if (!opt.quiet) {
    const std::vector<std::string> traces = tracesWritten(pattern, child, started);
    if (traces.empty()) {
      std::cerr << "kcap: no trace written to "
                << expandOutputPath(pattern, static_cast<long>(child), hostName(), rank())
                << " (the program made no CUDA calls, or recording failed)\n";
    }
    constexpr size_t kListed = 16;
    for (size_t i = 0; i < traces.size() && i < kListed; ++i) summarize(traces[i]);
    if (traces.size() > kListed) std::cerr << "kcap: ... and " << traces.size() - kListed << " more traces\n";
  }
  return code;
}

}  // namespace

Run setupRecord(CLI::App& cmd) {
  auto opt = std::make_shared<Options>();
  cmd.add_option("-o,--output", opt->output,
                 "Trace path (KCAP_OUTPUT); %p pid, %h host, %r rank, %% a percent sign [default: kcap-%p.kcap]")
      ->type_name("PATH");
  cmd.add_option("--mode", opt->mode,
                 "full: reachable memory before and after each launch (default); pre: before only; "
                 "metadata: no memory, no synchronization (KCAP_MODE)")
      ->type_name("MODE");
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
  cmd.add_flag("-q,--quiet", opt->quiet, "Print no summary at the end");
  cmd.add_option("command", opt->command, "The program to run and its arguments (after --)")
      ->type_name("CMD ARGS...");
  return [opt] { return runRecord(*opt); };
}

}  // namespace kcap::tools
