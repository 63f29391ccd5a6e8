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

}  // namespace kcap::tools
