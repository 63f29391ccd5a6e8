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

void writeBuffersJson(JsonWriter& j, const std::vector<replay::BufferReport>& buffers) {
  j.beginArray("buffers");
  for (const auto& b : buffers) {
    j.beginObject()
        .value("label", b.label)
        .value("address", b.address)
        .value("size", b.size)
        .value("differingBytes", b.differingBytes);
    if (b.firstOffset)
      j.value("firstDifferingOffset", *b.firstOffset);
    else
      j.null("firstDifferingOffset");
    if (b.stats) {
      const auto& s = *b.stats;
      j.beginObject("stats")
          .value("dtype", replay::dtypeName(s.type))
          .value("elements", s.elements)
          .value("mismatches", s.mismatches)
          .value("maxAbsError", s.maxAbsError)
          .value("maxRelError", s.maxRelError)
          .value("maxUlp", s.maxUlp)
          .value("nanRecorded", s.nanExpected)
          .value("nanReplayed", s.nanActual)
          .value("infRecorded", s.infExpected)
          .value("infReplayed", s.infActual)
          .value("withinTolerance", b.withinTolerance)
          .endObject();
    }
    j.endObject();
  }
  j.endArray();
}

}  // namespace kcap::tools
