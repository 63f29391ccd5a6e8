#include "outcome.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace kcap::replay {

const char* verdictName(Verdict verdict) {
  switch (verdict) {
    case Verdict::kReproduced:
      return "REPRODUCED";
    case Verdict::kDiffers:
      return "DIFFERS";
    case Verdict::kUnverified:
      return "RAN (not verified)";
    case Verdict::kFault:
      return "FAULT";
    case Verdict::kHang:
      return "HANG";
    case Verdict::kError:
      return "ERROR";
    case Verdict::kSkipped:
      return "SKIPPED";
  }
  return "?";
}

const char* memoryPathName(MemoryPath path) {
  switch (path) {
    case MemoryPath::kNone:
      return "none";
    case MemoryPath::kFixed:
      return "fixed-va";
    case MemoryPath::kRelocated:
      return "relocated";
    case MemoryPath::kMixed:
      return "fixed-va+relocated";
  }
  return "?";
}

const char* checkStatusName(CheckStatus status) {
  switch (status) {
    case CheckStatus::kClean:
      return "clean";
    case CheckStatus::kFinding:
      return "finding";
    case CheckStatus::kNotRun:
      return "not-run";
    case CheckStatus::kError:
      return "error";
  }
  return "?";
}

// Encoding: the outcome as one line of JSON, then a line `end`. A replay
// process that dies while writing leaves no `end`, or a line that does not
// parse: either way no outcome.
namespace {

using Json = nlohmann::json;

// Text from a trace (kernel names, labels) need not be UTF-8, which JSON
// strings must be: each byte is carried as the code point of the same value
// (ISO 8859-1), so that every byte comes back as it was.
std::string bytesAsUtf8(const std::string& bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (const char c : bytes) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x80) {
      out += c;
    } else {
      out += static_cast<char>(0xc0 | (byte >> 6));
      out += static_cast<char>(0x80 | (byte & 0x3f));
    }
  }
  return out;
}

std::optional<std::string> bytesFromUtf8(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const auto lead = static_cast<unsigned char>(text[i]);
    if (lead < 0x80) {
      out += text[i];
    } else if ((lead == 0xc2 || lead == 0xc3) && i + 1 < text.size()) {
      out += static_cast<char>(((lead & 0x03) << 6) | (static_cast<unsigned char>(text[++i]) & 0x3f));
    } else {
      return std::nullopt;  // not what bytesAsUtf8 writes
    }
  }
  return out;
}

// JSON has no infinities or NaN (an element-wise maximum may be one): those
// go as text that strtod reads back.
Json number(double value) {
  if (std::isfinite(value)) return value;
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", value);
  return std::string(buf);
}

double numberFrom(const Json& value) {
  if (value.is_string()) return std::strtod(value.get_ref<const std::string&>().c_str(), nullptr);
  return value.get<double>();
}

std::string textFrom(const Json& object, const char* key) {
  const auto it = object.find(key);
  if (it == object.end()) return {};
  auto bytes = bytesFromUtf8(it->get<std::string>());
  if (!bytes) throw std::invalid_argument("not an encoded text");
  return std::move(*bytes);
}

template <typename T>
T uintFrom(const Json& object, const char* key, T fallback = 0) {
  const auto it = object.find(key);
  return it == object.end() ? fallback : it->get<T>();
}

Json encodeBuffer(const BufferReport& b) {
  Json buffer = {{"address", b.address},
                 {"size", b.size},
                 {"label", bytesAsUtf8(b.label)},
                 {"differingBytes", b.differingBytes},
                 {"withinTolerance", b.withinTolerance}};
  if (b.firstOffset) buffer["firstOffset"] = *b.firstOffset;
  if (b.stats) {
    const ElementStats& s = *b.stats;
    buffer["stats"] = {{"type", static_cast<int>(s.type)},     {"elements", s.elements},
                       {"mismatches", s.mismatches},           {"maxAbsError", number(s.maxAbsError)},
                       {"maxRelError", number(s.maxRelError)}, {"maxUlp", number(s.maxUlp)},
                       {"nanExpected", s.nanExpected},         {"nanActual", s.nanActual},
                       {"infExpected", s.infExpected},         {"infActual", s.infActual}};
    if (s.worstElement) buffer["stats"]["worstElement"] = *s.worstElement;
  }
  return buffer;
}

BufferReport decodeBuffer(const Json& buffer) {
  BufferReport b;
  b.address = uintFrom<uint64_t>(buffer, "address");
  b.size = uintFrom<uint64_t>(buffer, "size");
  b.label = textFrom(buffer, "label");
  b.differingBytes = uintFrom<uint64_t>(buffer, "differingBytes");
  b.withinTolerance = buffer.value("withinTolerance", false);
  if (buffer.contains("firstOffset")) b.firstOffset = buffer.at("firstOffset").get<uint64_t>();
  if (buffer.contains("stats")) {
    const Json& stats = buffer.at("stats");
    ElementStats s;
    const int type = stats.at("type").get<int>();
    if (type < 0 || type > static_cast<int>(DType::kU64)) throw std::invalid_argument("no such dtype");
    s.type = static_cast<DType>(type);
    s.elements = uintFrom<uint64_t>(stats, "elements");
    s.mismatches = uintFrom<uint64_t>(stats, "mismatches");
    s.maxAbsError = numberFrom(stats.at("maxAbsError"));
    s.maxRelError = numberFrom(stats.at("maxRelError"));
    s.maxUlp = numberFrom(stats.at("maxUlp"));
    s.nanExpected = uintFrom<uint64_t>(stats, "nanExpected");
    s.nanActual = uintFrom<uint64_t>(stats, "nanActual");
    s.infExpected = uintFrom<uint64_t>(stats, "infExpected");
    s.infActual = uintFrom<uint64_t>(stats, "infActual");
    if (stats.contains("worstElement")) s.worstElement = stats.at("worstElement").get<uint64_t>();
    b.stats = s;
  }
  return b;
}

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

}  // namespace

std::string escapeField(const std::string& text) { return escapeImpl(text); }
std::string unescapeField(const std::string& text) { return unescapeImpl(text); }

std::string encodeOutcome(const LaunchOutcome& o) {
  Json outcome = {{"launchIndex", o.launchIndex},
                  {"kernel", bytesAsUtf8(o.kernel)},
                  {"grid", {o.grid[0], o.grid[1], o.grid[2]}},
                  {"block", {o.block[0], o.block[1], o.block[2]}},
                  {"sharedMemBytes", o.sharedMemBytes},
                  {"verdict", static_cast<int>(o.verdict)},
                  {"memory", static_cast<int>(o.memory)},
                  {"code", bytesAsUtf8(o.code)},
                  {"detail", bytesAsUtf8(o.detail)},
                  {"restoredBytes", o.restoredBytes},
                  {"uploadedBytes", o.uploadedBytes},
                  {"readBackBytes", o.readBackBytes},
                  {"restoreNs", o.restoreNs},
                  {"placeNs", o.placeNs},
                  {"restoreWaitNs", o.restoreWaitNs},
                  {"timesNs", o.timesNs}};
  if (o.recordedDurationNs) outcome["recordedDurationNs"] = *o.recordedDurationNs;
  Json buffers = Json::array();
  for (const BufferReport& b : o.buffers) buffers.push_back(encodeBuffer(b));
  outcome["buffers"] = std::move(buffers);
  Json checks = Json::array();
  for (const CheckFinding& c : o.checks) {
    Json details = Json::array();
    for (const std::string& d : c.details) details.push_back(bytesAsUtf8(d));
    checks.push_back({{"name", bytesAsUtf8(c.name)},
                      {"status", static_cast<int>(c.status)},
                      {"summary", bytesAsUtf8(c.summary)},
                      {"details", std::move(details)}});
  }
  outcome["checks"] = std::move(checks);
  if (o.graph) {
    Json lines = Json::array();
    for (const std::string& line : o.nodeLines) lines.push_back(bytesAsUtf8(line));
    outcome["graph"] = true;
    outcome["nodeLines"] = std::move(lines);
  }
  // dump() escapes line breaks inside strings: the document is one line.
  return outcome.dump() + "\nend\n";
}

std::optional<LaunchOutcome> decodeOutcome(const std::string& text) {
  const size_t eol = text.find('\n');
  if (eol == std::string::npos || text.compare(eol, std::string::npos, "\nend\n") != 0) return std::nullopt;
  const Json outcome = Json::parse(text.substr(0, eol), nullptr, /*allow_exceptions=*/false);
  if (!outcome.is_object()) return std::nullopt;
  try {
    LaunchOutcome o;
    o.launchIndex = outcome.at("launchIndex").get<uint64_t>();
    o.kernel = textFrom(outcome, "kernel");
    for (size_t i = 0; i < 3; ++i) {
      o.grid[i] = outcome.at("grid").at(i).get<uint32_t>();
      o.block[i] = outcome.at("block").at(i).get<uint32_t>();
    }
    o.sharedMemBytes = uintFrom<uint32_t>(outcome, "sharedMemBytes");
    const int verdict = outcome.at("verdict").get<int>();
    const int memory = outcome.at("memory").get<int>();
    if (verdict < 0 || verdict > static_cast<int>(Verdict::kSkipped) || memory < 0 ||
        memory > static_cast<int>(MemoryPath::kMixed)) {
      return std::nullopt;
    }
    o.verdict = static_cast<Verdict>(verdict);
    o.memory = static_cast<MemoryPath>(memory);
    o.code = textFrom(outcome, "code");
    o.detail = textFrom(outcome, "detail");
    o.restoredBytes = uintFrom<uint64_t>(outcome, "restoredBytes");
    o.uploadedBytes = uintFrom<uint64_t>(outcome, "uploadedBytes");
    o.readBackBytes = uintFrom<uint64_t>(outcome, "readBackBytes");
    o.restoreNs = uintFrom<uint64_t>(outcome, "restoreNs");
    o.placeNs = uintFrom<uint64_t>(outcome, "placeNs");
    o.restoreWaitNs = uintFrom<uint64_t>(outcome, "restoreWaitNs");
    if (outcome.contains("recordedDurationNs")) {
      o.recordedDurationNs = outcome.at("recordedDurationNs").get<uint64_t>();
    }
    if (outcome.contains("timesNs")) o.timesNs = outcome.at("timesNs").get<std::vector<uint64_t>>();
    for (const Json& buffer : outcome.value("buffers", Json::array())) o.buffers.push_back(decodeBuffer(buffer));
    for (const Json& check : outcome.value("checks", Json::array())) {
      CheckFinding c;
      c.name = textFrom(check, "name");
      const int status = check.at("status").get<int>();
      if (status < 0 || status > static_cast<int>(CheckStatus::kError)) return std::nullopt;
      c.status = static_cast<CheckStatus>(status);
      c.summary = textFrom(check, "summary");
      for (const Json& d : check.value("details", Json::array())) {
        auto bytes = bytesFromUtf8(d.get<std::string>());
        if (!bytes) return std::nullopt;
        c.details.push_back(std::move(*bytes));
      }
      o.checks.push_back(std::move(c));
    }
    o.graph = outcome.value("graph", false);
    for (const Json& line : outcome.value("nodeLines", Json::array())) {
      auto bytes = bytesFromUtf8(line.get<std::string>());
      if (!bytes) return std::nullopt;
      o.nodeLines.push_back(std::move(*bytes));
    }
    return o;
  } catch (const std::exception&) {  // a member missing or of the wrong type
    return std::nullopt;
  }
}

}  // namespace kcap::replay
