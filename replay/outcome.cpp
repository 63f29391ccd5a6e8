#include "outcome.h"

#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>

namespace kcap::replay {

const char* verdictName(Verdict verdict) {
  switch (verdict) {
    case Verdict::reproduced:
      return "REPRODUCED";
    case Verdict::differs:
      return "DIFFERS";
    case Verdict::unverified:
      return "RAN (not verified)";
    case Verdict::fault:
      return "FAULT";
    case Verdict::hang:
      return "HANG";
    case Verdict::error:
      return "ERROR";
    case Verdict::skipped:
      return "SKIPPED";
  }
  return "?";
}

const char* memoryPathName(MemoryPath path) {
  switch (path) {
    case MemoryPath::none:
      return "none";
    case MemoryPath::fixed:
      return "fixed-va";
    case MemoryPath::relocated:
      return "relocated";
    case MemoryPath::mixed:
      return "fixed-va+relocated";
  }
  return "?";
}

const char* checkStatusName(CheckStatus status) {
  switch (status) {
    case CheckStatus::clean:
      return "clean";
    case CheckStatus::finding:
      return "finding";
    case CheckStatus::notRun:
      return "not-run";
    case CheckStatus::error:
      return "error";
  }
  return "?";
}

// Encoding: one line per record, `tag key=value ...`, values percent-escaped;
// an outcome is a `launch` line, its `buffer` lines, and `end`.
namespace {

std::string escapeImpl(const std::string& text) {
  std::string out;
  for (const char c : text) {
    if (c == '%' || c == ' ' || c == '=' || c == '\n' || c == '\r' || c == '\t' || c == '\0') {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", static_cast<unsigned char>(c));
      out += buf;
    } else {
      out += c;
    }
  }
  return out;
}

std::string unescapeImpl(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size()) {
      out += static_cast<char>(std::strtoul(text.substr(i + 1, 2).c_str(), nullptr, 16));
      i += 2;
    } else {
      out += text[i];
    }
  }
  return out;
}

std::string num(double value) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", value);
  return buf;
}

std::map<std::string, std::string> fields(std::istringstream& line) {
  std::map<std::string, std::string> out;
  std::string token;
  while (line >> token) {
    const size_t eq = token.find('=');
    if (eq != std::string::npos) out[token.substr(0, eq)] = unescapeImpl(token.substr(eq + 1));
  }
  return out;
}

uint64_t u64(const std::map<std::string, std::string>& f, const char* key) {
  const auto it = f.find(key);
  return it == f.end() ? 0 : std::strtoull(it->second.c_str(), nullptr, 10);
}

double f64(const std::map<std::string, std::string>& f, const char* key) {
  const auto it = f.find(key);
  return it == f.end() ? 0 : std::strtod(it->second.c_str(), nullptr);
}

}  // namespace

std::string escapeField(const std::string& text) { return escapeImpl(text); }
std::string unescapeField(const std::string& text) { return unescapeImpl(text); }

std::string encodeOutcome(const LaunchOutcome& o) {
  std::ostringstream out;
  out << "launch index=" << o.launchIndex << " kernel=" << escapeImpl(o.kernel) << " grid=" << o.grid[0] << ','
      << o.grid[1] << ',' << o.grid[2] << " block=" << o.block[0] << ',' << o.block[1] << ',' << o.block[2]
      << " smem=" << o.sharedMemBytes << " verdict=" << static_cast<int>(o.verdict)
      << " memory=" << static_cast<int>(o.memory) << " code=" << escapeImpl(o.code)
      << " detail=" << escapeImpl(o.detail);
  out << " restored=" << o.restoredBytes << " restoreNs=" << o.restoreNs << " placeNs=" << o.placeNs
      << " restoreWaitNs=" << o.restoreWaitNs;
  if (o.recordedDurationNs) out << " recorded=" << *o.recordedDurationNs;
  if (!o.timesNs.empty()) {
    out << " times=";
    for (size_t i = 0; i < o.timesNs.size(); ++i) out << (i ? "," : "") << o.timesNs[i];
  }
  out << '\n';
  for (const BufferReport& b : o.buffers) {
    out << "buffer address=" << b.address << " size=" << b.size << " label=" << escapeImpl(b.label)
        << " diff=" << b.differingBytes << " tol=" << (b.withinTolerance ? 1 : 0);
    if (b.firstOffset) out << " first=" << *b.firstOffset;
    if (b.stats) {
      const ElementStats& s = *b.stats;
      out << " type=" << static_cast<int>(s.type) << " elements=" << s.elements << " mismatches=" << s.mismatches
          << " abs=" << num(s.maxAbsError) << " rel=" << num(s.maxRelError) << " ulp=" << num(s.maxUlp)
          << " nanE=" << s.nanExpected << " nanA=" << s.nanActual << " infE=" << s.infExpected
          << " infA=" << s.infActual;
      if (s.worstElement) out << " worst=" << *s.worstElement;
    }
    out << '\n';
  }
  for (const CheckFinding& c : o.checks) {
    out << "check name=" << escapeImpl(c.name) << " status=" << static_cast<int>(c.status)
        << " summary=" << escapeImpl(c.summary) << '\n';
    for (const std::string& d : c.details) out << "checkdetail text=" << escapeImpl(d) << '\n';
  }
  out << "end\n";
  return out.str();
}

std::optional<LaunchOutcome> decodeOutcome(const std::string& text) {
  std::istringstream lines(text);
  std::string line;
  LaunchOutcome o;
  bool sawLaunch = false, sawEnd = false;
  while (std::getline(lines, line)) {
    std::istringstream in(line);
    std::string tag;
    in >> tag;
    const auto f = fields(in);
    if (tag == "launch") {
      sawLaunch = true;
      o.launchIndex = u64(f, "index");
      o.kernel = f.count("kernel") ? f.at("kernel") : "";
      std::sscanf(f.count("grid") ? f.at("grid").c_str() : "", "%u,%u,%u", &o.grid[0], &o.grid[1], &o.grid[2]);
      std::sscanf(f.count("block") ? f.at("block").c_str() : "", "%u,%u,%u", &o.block[0], &o.block[1], &o.block[2]);
      o.sharedMemBytes = static_cast<uint32_t>(u64(f, "smem"));
      const uint64_t verdict = u64(f, "verdict");
      const uint64_t memory = u64(f, "memory");
      if (verdict > static_cast<uint64_t>(Verdict::skipped) || memory > static_cast<uint64_t>(MemoryPath::mixed)) {
        return std::nullopt;
      }
      o.verdict = static_cast<Verdict>(verdict);
      o.memory = static_cast<MemoryPath>(memory);
      o.code = f.count("code") ? f.at("code") : "";
      o.detail = f.count("detail") ? f.at("detail") : "";
      o.restoredBytes = u64(f, "restored");
      o.restoreNs = u64(f, "restoreNs");
      if (f.count("placeNs")) o.placeNs = u64(f, "placeNs");
      if (f.count("restoreWaitNs")) o.restoreWaitNs = u64(f, "restoreWaitNs");
      if (f.count("recorded")) o.recordedDurationNs = u64(f, "recorded");
      if (f.count("times")) {
        std::istringstream times(f.at("times"));
        std::string t;
        while (std::getline(times, t, ',')) o.timesNs.push_back(std::strtoull(t.c_str(), nullptr, 10));
      }
    } else if (tag == "buffer" && sawLaunch) {
      BufferReport b;
      b.address = u64(f, "address");
      b.size = u64(f, "size");
      b.label = f.count("label") ? f.at("label") : "";
      b.differingBytes = u64(f, "diff");
      b.withinTolerance = u64(f, "tol") != 0;
      if (f.count("first")) b.firstOffset = u64(f, "first");
      if (f.count("type")) {
        ElementStats s;
        const uint64_t type = u64(f, "type");
        if (type > static_cast<uint64_t>(DType::u64)) return std::nullopt;
        s.type = static_cast<DType>(type);
        s.elements = u64(f, "elements");
        s.mismatches = u64(f, "mismatches");
        s.maxAbsError = f64(f, "abs");
        s.maxRelError = f64(f, "rel");
        s.maxUlp = f64(f, "ulp");
        s.nanExpected = u64(f, "nanE");
        s.nanActual = u64(f, "nanA");
        s.infExpected = u64(f, "infE");
        s.infActual = u64(f, "infA");
        if (f.count("worst")) s.worstElement = u64(f, "worst");
        b.stats = s;
      }
      o.buffers.push_back(std::move(b));
    } else if (tag == "check" && sawLaunch) {
      CheckFinding c;
      c.name = f.count("name") ? f.at("name") : "";
      const uint64_t status = u64(f, "status");
      if (status > static_cast<uint64_t>(CheckStatus::error)) return std::nullopt;
      c.status = static_cast<CheckStatus>(status);
      c.summary = f.count("summary") ? f.at("summary") : "";
      o.checks.push_back(std::move(c));
    } else if (tag == "checkdetail" && sawLaunch && !o.checks.empty()) {
      o.checks.back().details.push_back(f.count("text") ? f.at("text") : "");
    } else if (tag == "end" && sawLaunch) {
      sawEnd = true;
      break;
    } else {
      return std::nullopt;
    }
  }
  if (!sawEnd) return std::nullopt;
  return o;
}

}  // namespace kcap::replay
