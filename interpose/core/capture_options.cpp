#include "capture_options.h"

#include "container.h"
#include "job_environment.h"

#include <sched.h>
#include <zstd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <set>

namespace kcap {
namespace {

constexpr const char* kOutput = "KCAP_OUTPUT";
constexpr const char* kMode = "KCAP_MODE";
constexpr const char* kInclude = "KCAP_INCLUDE";
constexpr const char* kExclude = "KCAP_EXCLUDE";
constexpr const char* kSkip = "KCAP_SKIP";
constexpr const char* kMaxLaunches = "KCAP_MAX_LAUNCHES";
constexpr const char* kLevel = "KCAP_LEVEL";
constexpr const char* kPieceSize = "KCAP_PIECE_SIZE";
constexpr const char* kBuffer = "KCAP_BUFFER";
constexpr uint64_t kMinBufferBytes = uint64_t{64} << 20;
constexpr uint64_t kMaxBufferBytes = uint64_t{1024} << 30;
constexpr const char* kFlush = "KCAP_FLUSH";
constexpr const char* kTiming = "KCAP_TIMING";
constexpr const char* kHash = "KCAP_HASH";
constexpr const char* kCheckpointEvery = "KCAP_CHECKPOINT_EVERY";
constexpr const char* kCheckpointDevice = "KCAP_CHECKPOINT_DEVICE";
constexpr uint64_t kMaxDeviceOrdinal = 1023;
constexpr const char* kTrigger = "KCAP_TRIGGER";
constexpr const char* kRing = "KCAP_RING";
constexpr const char* kRingDisk = "KCAP_RING_DISK";
constexpr uint64_t kMinRingDiskBytes = uint64_t{1} << 20;
constexpr uint64_t kMaxRingDiskBytes = uint64_t{64} << 40;
constexpr const char* kReadback = "KCAP_READBACK";
constexpr const char* kWriterPriority = "KCAP_WRITER_PRIORITY";
constexpr const char* kWriterCpus = "KCAP_WRITER_CPUS";
constexpr uint64_t kMaxReadbackBytes = uint64_t{64} << 30;
constexpr uint32_t kMaxHangSeconds = 86400;

std::optional<uint64_t> parseUnsigned(std::string_view text) {
  uint64_t value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end) {
    return std::nullopt;
  }
  return value;
}

// "0-3,8" as taskset -c writes it, and back.
std::string cpuListText(const std::vector<unsigned>& cpus) {
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    out += (out.empty() ? "" : ",") + std::to_string(cpus[i]);
    if (j > i) out += "-" + std::to_string(cpus[j]);
    i = j + 1;
  }
  return out;
}

// A set of CPUs the process may run on (its affinity when kcap starts:
// taskset, a container's cpuset), sorted, each once.
std::vector<unsigned> parseWriterCpus(const std::string& text) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) {
    throw OptionError(kWriterCpus, text, std::string("cannot read the process's CPUs: ") + std::strerror(errno));
  }
  std::vector<unsigned> own;
  for (unsigned cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &allowed)) own.push_back(cpu);
  }
  const auto refuse = [&](const std::string& why) {
    throw OptionError(kWriterCpus, text,
                      why + " (expected a list such as 0-3,8 of the process's CPUs: " + cpuListText(own) + ")");
  };
  std::set<unsigned> cpus;
  std::string_view rest = text;
  while (true) {
    const size_t comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    const size_t dash = item.find('-');
    const auto first = parseUnsigned(item.substr(0, dash));
    const auto last = dash == std::string_view::npos ? first : parseUnsigned(item.substr(dash + 1));
    if (!first || !last || *first > *last) refuse("'" + std::string(item) + "' is not a CPU or a range of CPUs");
    if (*last >= CPU_SETSIZE) refuse("CPU " + std::to_string(*last) + " is past the last one Linux numbers");
    for (uint64_t cpu = *first; cpu <= *last; ++cpu) {
      if (!CPU_ISSET(cpu, &allowed)) refuse("CPU " + std::to_string(cpu) + " is not one this process may run on");
      cpus.insert(static_cast<unsigned>(cpu));
    }
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return {cpus.begin(), cpus.end()};
}

std::shared_ptr<const NamePattern> compile(const char* variable, const std::string& source) {
  if (source.empty()) {
    return nullptr;
  }
  try {
    return std::make_shared<const NamePattern>(source);
  } catch (const NamePatternError& e) {
    throw OptionError(variable, source, std::string("not a valid regular expression (") + e.what() + ")");
  }
}

}  // namespace

const char* captureModeName(CaptureMode mode) {
  switch (mode) {
    case CaptureMode::kFull:
      return "full";
    case CaptureMode::kPreOnly:
      return "pre";
    case CaptureMode::kMetadata:
      return "metadata";
    case CaptureMode::kCheckpoint:
      return "checkpoint";
  }
  return "?";
}

const char* flushPolicyName(FlushPolicy policy) { return policy == FlushPolicy::kLaunch ? "launch" : "batch"; }

OptionError::OptionError(std::string variable, std::string value, const std::string& reason)
    : std::runtime_error(variable + "=\"" + value + "\": " + reason),
      variable_(std::move(variable)),
      value_(std::move(value)),
      reason_(reason) {}

bool CaptureOptions::selects(std::string_view kernelName) const {
  if (includePattern && !includePattern->search(kernelName)) {
    return false;
  }
  return !(excludePattern && excludePattern->search(kernelName));
}

std::vector<std::pair<std::string, std::string>> CaptureOptions::describe() const {
  std::vector<std::pair<std::string, std::string>> out;
  out.emplace_back("output", output);
  out.emplace_back("mode", captureModeName(mode));
  if (!include.empty()) {
    out.emplace_back("include", include);
  }
  if (!exclude.empty()) {
    out.emplace_back("exclude", exclude);
  }
  out.emplace_back("skip", std::to_string(skip));
  out.emplace_back("maxLaunches",
                   maxLaunches == std::numeric_limits<uint64_t>::max() ? "unlimited" : std::to_string(maxLaunches));
  out.emplace_back("level", std::to_string(zstdLevel));
  out.emplace_back("pieceSize", std::to_string(pieceSize));
  out.emplace_back("buffer", std::to_string(bufferBytes));
  out.emplace_back("flush", flushPolicyName(flush));
  out.emplace_back("timing", timing ? "on" : "off");
  out.emplace_back("hash", hashOnDevice ? "device" : "host");
  out.emplace_back("writerPriority", idleWriter ? "idle" : "normal");
  if (!writerCpus.empty()) {
    out.emplace_back("writerCpus", cpuListText(writerCpus));
  }
  if (triggers.any()) {
    out.emplace_back("trigger", triggers.text());
    out.emplace_back("ring", std::to_string(ringCheckpoints));
    out.emplace_back("ringDisk", std::to_string(ringDiskBytes));
  }
  if (mode == CaptureMode::kCheckpoint) {
    out.emplace_back("readback", std::to_string(readbackBytes));
    out.emplace_back("checkpointEvery", checkpointEveryLaunches != 0
                                            ? std::to_string(checkpointEveryLaunches) + "launches"
                                            : std::to_string(checkpointEveryNs / 1'000'000) + "ms");
    if (checkpointDevice >= 0) out.emplace_back("checkpointDevice", std::to_string(checkpointDevice));
  }
  return out;
}

const std::vector<const char*>& captureVariables() {
  static const std::vector<const char*> names = {
      kOutput,    kMode,     kInclude,  kExclude,        kSkip,       kMaxLaunches,     kLevel,
      kPieceSize, kBuffer,   kFlush,    kTiming,         kHash,       kCheckpointEvery, kTrigger,
      kRing,      kRingDisk, kReadback, kWriterPriority, kWriterCpus, kCheckpointDevice};
  return names;
}

std::string TriggerSet::text() const {
  std::string out;
  auto add = [&](const std::string& item) { out += (out.empty() ? "" : ",") + item; };
  if (error) {
    add("error");
  }
  if (signal) {
    add("signal");
  }
  if (exit) {
    add("exit");
  }
  if (hangSeconds != 0) {
    add("hang=" + std::to_string(hangSeconds));
  }
  if (api) {
    add("api");
  }
  return out;
}

bool parseTriggerList(std::string_view text, TriggerSet& out, std::string& bad) {
  TriggerSet parsed;
  size_t at = 0;
  for (;;) {
    const size_t comma = text.find(',', at);
    const std::string_view item =
        text.substr(at, comma == std::string_view::npos ? std::string_view::npos : comma - at);
    if (item == "error") {
      parsed.error = true;
    } else if (item == "signal") {
      parsed.signal = true;
    } else if (item == "exit") {
      parsed.exit = true;
    } else if (item == "api") {
      parsed.api = true;
    } else if (item.substr(0, 5) == "hang=") {
      const auto seconds = parseUnsigned(item.substr(5));
      if (!seconds || *seconds == 0 || *seconds > kMaxHangSeconds) {
        bad = std::string(item);
        return false;
      }
      parsed.hangSeconds = static_cast<uint32_t>(*seconds);
    } else {
      bad = std::string(item);
      return false;
    }
    if (comma == std::string_view::npos) {
      break;
    }
    at = comma + 1;
  }
  out = parsed;
  return true;
}

bool parseCheckpointInterval(std::string_view text, uint64_t& ns, uint64_t& launches) {
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') {
    ++digits;
  }
  const auto number = parseUnsigned(text.substr(0, digits));
  if (!number || *number == 0) {
    return false;
  }
  const std::string_view unit = text.substr(digits);
  if (unit == "launches" || unit == "launch") {
    launches = *number;
    ns = 0;
    return true;
  }
  uint64_t scale = 0;
  if (unit == "us") {
    scale = 1'000;
  } else if (unit == "ms") {
    scale = 1'000'000;
  } else if (unit == "s") {
    scale = 1'000'000'000;
  } else if (unit == "m" || unit == "min") {
    scale = 60'000'000'000;
  } else {
    return false;
  }
  if (*number > std::numeric_limits<uint64_t>::max() / scale) {
    return false;
  }
  ns = *number * scale;
  launches = 0;
  return true;
}

std::optional<uint64_t> parseByteCount(std::string_view text) {
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') {
    ++digits;
  }
  const auto number = parseUnsigned(text.substr(0, digits));
  if (!number) {
    return std::nullopt;
  }
  std::string_view suffix = text.substr(digits);
  unsigned shift = 0;
  if (!suffix.empty()) {
    switch (suffix.front()) {
      case 'k':
      case 'K':
        shift = 10;
        break;
      case 'm':
      case 'M':
        shift = 20;
        break;
      case 'g':
      case 'G':
        shift = 30;
        break;
      default:
        return std::nullopt;
    }
    suffix.remove_prefix(1);
    if (!(suffix.empty() || suffix == "B" || suffix == "iB")) {
      return std::nullopt;
    }
  }
  if (shift != 0 && *number > (std::numeric_limits<uint64_t>::max() >> shift)) {
    return std::nullopt;
  }
  return *number << shift;
}

std::optional<CaptureOptions> readCaptureOptions(const VariableLookup& lookup) {
  const auto value = [&](const char* name) -> std::string {
    const char* v = lookup(name);
    return v != nullptr ? std::string(v) : std::string();
  };
  CaptureOptions options;
  options.output = value(kOutput);
  if (options.output.empty()) {
    return std::nullopt;
  }
  // Placeholders are checked now, not when a child process expands them.
  expandOutputPath(options.output, 1, "host", "0");

  if (const std::string mode = value(kMode); !mode.empty()) {
    if (mode == "full") {
      options.mode = CaptureMode::kFull;
    } else if (mode == "pre") {
      options.mode = CaptureMode::kPreOnly;
    } else if (mode == "metadata") {
      options.mode = CaptureMode::kMetadata;
    } else if (mode == "checkpoint") {
      options.mode = CaptureMode::kCheckpoint;
    } else {
      throw OptionError(kMode, mode, "expected full, pre, metadata or checkpoint");
    }
  }
  if (const std::string every = value(kCheckpointEvery); !every.empty()) {
    if (!parseCheckpointInterval(every, options.checkpointEveryNs, options.checkpointEveryLaunches)) {
      throw OptionError(kCheckpointEvery, every,
                        "expected a nonzero duration (500ms, 2s, 1m) or number of launches (1000launches)");
    }
  }

  if (const std::string device = value(kCheckpointDevice); !device.empty()) {
    const auto parsed = parseUnsigned(device);
    if (!parsed || *parsed > kMaxDeviceOrdinal) {
      throw OptionError(kCheckpointDevice, device, "expected a device ordinal, 0 to 1023");
    }
    if (options.mode != CaptureMode::kCheckpoint) {
      throw OptionError(
          kCheckpointDevice, device,
          std::string("applies to KCAP_MODE=checkpoint (the mode is ") + captureModeName(options.mode) + ")");
    }
    options.checkpointDevice = static_cast<int>(*parsed);
  }

  options.include = value(kInclude);
  options.includePattern = compile(kInclude, options.include);
  options.exclude = value(kExclude);
  options.excludePattern = compile(kExclude, options.exclude);

  if (const std::string skip = value(kSkip); !skip.empty()) {
    const auto parsed = parseUnsigned(skip);
    if (!parsed) {
      throw OptionError(kSkip, skip, "expected a number of launches (0 or more)");
    }
    options.skip = *parsed;
  }
  if (const std::string max = value(kMaxLaunches); !max.empty()) {
    const auto parsed = parseUnsigned(max);
    if (!parsed) {
      throw OptionError(kMaxLaunches, max, "expected a number of launches (0 or more)");
    }
    options.maxLaunches = *parsed;
  }
  if (const std::string level = value(kLevel); !level.empty()) {
    int parsed = 0;
    const char* end = level.data() + level.size();
    const auto [ptr, ec] = std::from_chars(level.data(), end, parsed);
    if (ec != std::errc() || ptr != end || parsed < ZSTD_minCLevel() || parsed > ZSTD_maxCLevel()) {
      throw OptionError(
          kLevel, level,
          "expected a zstd level from " + std::to_string(ZSTD_minCLevel()) + " to " + std::to_string(ZSTD_maxCLevel()));
    }
    options.zstdLevel = parsed;
  }
  if (const std::string piece = value(kPieceSize); !piece.empty()) {
    const auto parsed = parseByteCount(piece);
    if (!parsed || *parsed < format::kMinPieceSize || *parsed > format::kMaxPieceSize) {
      throw OptionError(kPieceSize, piece, "expected a size from 4K to 64M (bytes, or with a K or M suffix)");
    }
    options.pieceSize = static_cast<uint32_t>(*parsed);
  }
  if (const std::string buffer = value(kBuffer); !buffer.empty()) {
    const auto parsed = parseByteCount(buffer);
    if (!parsed || *parsed < kMinBufferBytes || *parsed > kMaxBufferBytes) {
      throw OptionError(kBuffer, buffer, "expected a size from 64M to 1024G (bytes, or with a K, M or G suffix)");
    }
    options.bufferBytes = *parsed;
  }
  if (const std::string readback = value(kReadback); !readback.empty()) {
    const auto parsed = parseByteCount(readback);
    if (!parsed || *parsed > kMaxReadbackBytes) {
      throw OptionError(kReadback, readback,
                        "expected a size up to 64G (bytes, or with a K, M or G suffix); 0: wait for each call");
    }
    options.readbackBytes = *parsed;
  }
  if (const std::string flush = value(kFlush); !flush.empty()) {
    if (flush != "launch" && flush != "batch") {
      throw OptionError(kFlush, flush, "expected launch (each launch's record in the file before it runs) or batch");
    }
    options.flush = flush == "launch" ? FlushPolicy::kLaunch : FlushPolicy::kBatch;
  }
  if (const std::string timing = value(kTiming); !timing.empty()) {
    if (timing != "0" && timing != "1") {
      throw OptionError(kTiming, timing, "expected 1 (record GPU durations) or 0");
    }
    options.timing = timing == "1";
  }
  if (const std::string hash = value(kHash); !hash.empty()) {
    if (hash != "device" && hash != "host") {
      throw OptionError(kHash, hash, "expected device (hash large ranges where they lie first) or host");
    }
    options.hashOnDevice = hash == "device";
  }
  if (const std::string priority = value(kWriterPriority); !priority.empty()) {
    if (priority != "normal" && priority != "idle") {
      throw OptionError(kWriterPriority, priority,
                        "expected normal or idle (the writer's threads run only on CPU the program leaves)");
    }
    options.idleWriter = priority == "idle";
  }
  if (const std::string cpus = value(kWriterCpus); !cpus.empty()) {
    options.writerCpus = parseWriterCpus(cpus);
  }
  if (const std::string ring = value(kRing); !ring.empty()) {
    const auto parsed = parseUnsigned(ring);
    if (!parsed || *parsed == 0 || *parsed > kMaxRingCheckpoints) {
      throw OptionError(kRing, ring,
                        "expected a number of checkpoints from 1 to " + std::to_string(kMaxRingCheckpoints));
    }
    options.ringCheckpoints = static_cast<uint32_t>(*parsed);
  }
  if (const std::string disk = value(kRingDisk); !disk.empty()) {
    const auto parsed = parseByteCount(disk);
    if (!parsed || (*parsed != 0 && (*parsed < kMinRingDiskBytes || *parsed > kMaxRingDiskBytes))) {
      throw OptionError(kRingDisk, disk,
                        "expected 0 (no ring file) or a size from 1M to 65536G (bytes, or with a K, M or G suffix)");
    }
    options.ringDiskBytes = *parsed;
  }
  if (const std::string trigger = value(kTrigger); !trigger.empty()) {
    std::string bad;
    if (!parseTriggerList(trigger, options.triggers, bad)) {
      throw OptionError(kTrigger, trigger,
                        "'" + bad + "' is not a trigger (expected error, signal, exit, api or hang=SECONDS, 1 to " +
                            std::to_string(kMaxHangSeconds) + ")");
    }
    // The ring is cut at checkpoints: without them it would hold
    // everything or nothing.
    if (options.mode != CaptureMode::kCheckpoint) {
      throw OptionError(
          kTrigger, trigger,
          std::string("triggers need KCAP_MODE=checkpoint (the mode is ") + captureModeName(options.mode) + ")");
    }
  }
  if (options.idleWriter && options.mode != CaptureMode::kMetadata && options.mode != CaptureMode::kCheckpoint) {
    throw OptionError(kWriterPriority, value(kWriterPriority),
                      std::string("cannot be used with KCAP_MODE=") + captureModeName(options.mode) +
                          ": its launches wait for the writer, which the machine's other work could then starve");
  }
  if (options.mode == CaptureMode::kCheckpoint) {
    // Replay re-executes every launch between two checkpoints: a launch left
    // out of the trace would be missing from what it rebuilds.
    for (const auto& [variable, set] :
         {std::pair{kInclude, !options.include.empty()}, std::pair{kExclude, !options.exclude.empty()},
          std::pair{kSkip, options.skip != 0},
          std::pair{kMaxLaunches, options.maxLaunches != std::numeric_limits<uint64_t>::max()}}) {
      if (set) {
        throw OptionError(variable, value(variable),
                          "cannot be used with KCAP_MODE=checkpoint: replay re-executes every launch, so every "
                          "launch is recorded");
      }
    }
  }
  return options;
}

std::string rankFromEnvironment(const VariableLookup& lookup) {
  for (const char* name : format::kRankVariables) {
    const char* value = lookup(name);
    if (value != nullptr && value[0] != '\0') {
      return value;
    }
  }
  return "0";
}

std::string expandOutputPath(const std::string& pattern, long pid, std::string_view host, std::string_view rank) {
  std::string out;
  out.reserve(pattern.size() + 16);
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '%') {
      out += pattern[i];
      continue;
    }
    if (i + 1 == pattern.size()) {
      throw OptionError(kOutput, pattern, "ends with a lone '%' (use %% for a percent sign)");
    }
    switch (pattern[++i]) {
      case 'p':
        out += std::to_string(pid);
        break;
      case 'h':
        out += host;
        break;
      case 'r':
        out += rank;
        break;
      case '%':
        out += '%';
        break;
      default:
        throw OptionError(kOutput, pattern,
                          std::string("unknown placeholder %") + pattern[i] + " (known: %p, %h, %r, %%)");
    }
  }
  return out;
}

bool outputHasPid(const std::string& pattern) {
  for (size_t i = 0; i + 1 < pattern.size(); ++i) {
    if (pattern[i] == '%') {
      if (pattern[i + 1] == 'p') {
        return true;
      }
      ++i;  // skip the placeholder character (%% included)
    }
  }
  return false;
}

std::string withPidSuffix(const std::string& path, long pid) {
  const size_t slash = path.rfind('/');
  const size_t name = slash == std::string::npos ? 0 : slash + 1;
  const size_t dot = path.rfind('.');
  const std::string tag = "." + std::to_string(pid);
  if (dot == std::string::npos || dot <= name) {
    return path + tag;
  }
  return path.substr(0, dot) + tag + path.substr(dot);
}

}  // namespace kcap
