#include "replay_report.h"

namespace kcap::tools {

std::string bufferLine(const replay::BufferReport& b, const char* expected, const char* actual) {
  std::string line = b.label + " (" + hex(b.address) + ", " + humanSize(b.size) + "): ";
  if (b.differingBytes == 0) return line + "identical";
  line += withCommas(b.differingBytes) + " of " + withCommas(b.size) + " bytes differ, first at offset " +
          withCommas(b.firstOffset.value_or(0)) + " (" + hex(b.firstOffset.value_or(0)) + ")";
  if (b.stats) {
    const auto& s = *b.stats;
    const auto n = [](uint64_t v) { return static_cast<unsigned long long>(v); };
    line +=
        strf("; as %s: %llu of %llu elements differ, max abs %.4g, max rel %.4g, max ulp %.0f",
             replay::dtypeName(s.type).c_str(), n(s.mismatches), n(s.elements), s.maxAbsError, s.maxRelError, s.maxUlp);
    if (s.nanExpected || s.nanActual)
      line += strf(", NaN %llu %s / %llu %s", n(s.nanExpected), expected, n(s.nanActual), actual);
    if (s.infExpected || s.infActual)
      line += strf(", Inf %llu %s / %llu %s", n(s.infExpected), expected, n(s.infActual), actual);
    if (s.worstElement) line += strf(", worst at element %llu", n(*s.worstElement));
    if (b.withinTolerance) line += " (within --tolerance)";
  }
  return line;
}

Json buffersJson(const std::vector<replay::BufferReport>& buffers) {
  Json list = Json::array();
  for (const auto& b : buffers) {
    Json buffer;
    buffer["label"] = b.label;
    buffer["address"] = b.address;
    buffer["size"] = b.size;
    buffer["differingBytes"] = b.differingBytes;
    buffer["firstDifferingOffset"] = b.firstOffset ? Json(*b.firstOffset) : Json();
    if (b.stats) {
      const auto& s = *b.stats;
      buffer["stats"] = {{"dtype", replay::dtypeName(s.type)},  {"elements", s.elements},
                         {"mismatches", s.mismatches},          {"maxAbsError", s.maxAbsError},
                         {"maxRelError", s.maxRelError},        {"maxUlp", s.maxUlp},
                         {"nanRecorded", s.nanExpected},        {"nanReplayed", s.nanActual},
                         {"infRecorded", s.infExpected},        {"infReplayed", s.infActual},
                         {"withinTolerance", b.withinTolerance}};
    }
    list.push_back(std::move(buffer));
  }
  return list;
}

std::string graphLaunchLine(const replay::LaunchOutcome& o) {
  std::string line = "graph launch " + std::to_string(o.launchIndex) + " (" + printable(o.kernel) +
                     "): " + replay::verdictName(o.verdict);
  if (o.verdict == replay::Verdict::kReproduced || o.verdict == replay::Verdict::kDiffers) {
    size_t differing = 0;
    for (const auto& b : o.buffers) differing += b.differingBytes != 0 ? 1 : 0;
    line += ", " + std::to_string(o.buffers.size()) + (o.buffers.size() == 1 ? " range" : " ranges") + " compared";
    if (differing != 0) line += ", " + std::to_string(differing) + " differ";
  }
  if (!o.detail.empty()) line += ": " + printable(o.detail);
  return line;
}

Json graphLaunchesJson(const std::vector<replay::LaunchOutcome>& outcomes) {
  Json list = Json::array();
  for (const auto& o : outcomes) {
    if (!o.graph) continue;
    list.push_back({{"graphLaunchIndex", o.launchIndex},
                    {"graph", o.kernel},
                    {"verdict", replay::verdictName(o.verdict)},
                    {"detail", o.detail},
                    {"memory", replay::memoryPathName(o.memory)},
                    {"code", o.code},
                    {"nodes", o.nodeLines},
                    {"buffers", buffersJson(o.buffers)},
                    {"restoredBytes", o.restoredBytes},
                    {"restoreNs", o.restoreNs},
                    {"placeNs", o.placeNs}});
  }
  return list;
}

}  // namespace kcap::tools
