#include "compare.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "outcome.h"
#include "replay_options.h"

namespace kcap::replay {

ByteDiff compareBytes(const uint8_t* expected, const uint8_t* actual, size_t size) {
  ByteDiff diff;
  size_t i = 0;
  // Equal 8-byte words are the common case: skip them quickly.
  for (; i + 8 <= size; i += 8) {
    uint64_t a, b;
    std::memcpy(&a, expected + i, 8);
    std::memcpy(&b, actual + i, 8);
    if (a == b) continue;
    for (size_t j = i; j < i + 8; ++j) {
      if (expected[j] != actual[j]) {
        if (!diff.firstOffset) diff.firstOffset = j;
        ++diff.differingBytes;
      }
    }
  }
  for (; i < size; ++i) {
    if (expected[i] != actual[i]) {
      if (!diff.firstOffset) diff.firstOffset = i;
      ++diff.differingBytes;
    }
  }
  return diff;
}

namespace {

struct Names {
  const char* name;
  DType type;
};
constexpr Names kNames[] = {
    {"f64", DType::kF64},       {"fp64", DType::kF64},     {"double", DType::kF64},    {"f32", DType::kF32},
    {"fp32", DType::kF32},      {"float", DType::kF32},    {"f16", DType::kF16},       {"fp16", DType::kF16},
    {"half", DType::kF16},      {"bf16", DType::kBf16},    {"bfloat16", DType::kBf16}, {"e4m3", DType::kE4m3},
    {"fp8_e4m3", DType::kE4m3}, {"fp8e4m3", DType::kE4m3}, {"e5m2", DType::kE5m2},     {"fp8_e5m2", DType::kE5m2},
    {"fp8e5m2", DType::kE5m2},  {"i8", DType::kI8},        {"int8", DType::kI8},       {"u8", DType::kU8},
    {"uint8", DType::kU8},      {"i16", DType::kI16},      {"int16", DType::kI16},     {"u16", DType::kU16},
    {"uint16", DType::kU16},    {"i32", DType::kI32},      {"int32", DType::kI32},     {"u32", DType::kU32},
    {"uint32", DType::kU32},    {"i64", DType::kI64},      {"int64", DType::kI64},     {"u64", DType::kU64},
    {"uint64", DType::kU64},
};

// A small float format: sign, `exp` exponent bits, `mant` mantissa bits.
struct MiniFloat {
  int exp, mant, bias;
  bool hasInf;  // e4m3 (fn) has no infinities; its NaN is all exponent and mantissa bits set
};

double decodeMini(uint32_t bits, MiniFloat f) {
  const uint32_t mantMask = (1u << f.mant) - 1;
  const uint32_t expMask = (1u << f.exp) - 1;
  const bool negative = (bits >> (f.exp + f.mant)) & 1u;
  const uint32_t e = (bits >> f.mant) & expMask;
  const uint32_t m = bits & mantMask;
  double value;
  if (f.hasInf && e == expMask) {
    value = m == 0 ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  } else if (!f.hasInf && e == expMask && m == mantMask) {
    value = std::numeric_limits<double>::quiet_NaN();
  } else if (e == 0) {
    value = std::ldexp(static_cast<double>(m), 1 - f.bias - f.mant);
  } else {
    value = std::ldexp(static_cast<double>(m | (1u << f.mant)), static_cast<int>(e) - f.bias - f.mant);
  }
  return negative ? -value : value;
}

constexpr MiniFloat kHalf{5, 10, 15, true};
constexpr MiniFloat kE4m3{4, 3, 7, false};
constexpr MiniFloat kE5m2{5, 2, 15, true};

template <typename T>
T load(const uint8_t* p) {
  T value;
  std::memcpy(&value, p, sizeof value);
  return value;
}

bool isFloat(DType t) {
  return t == DType::kF64 || t == DType::kF32 || t == DType::kF16 || t == DType::kBf16 || t == DType::kE4m3 ||
         t == DType::kE5m2;
}

// The element's bits, zero-extended.
uint64_t bitsOf(DType t, const uint8_t* p) {
  switch (dtypeSize(t)) {
    case 1:
      return p[0];
    case 2:
      return load<uint16_t>(p);
    case 4:
      return load<uint32_t>(p);
    default:
      return load<uint64_t>(p);
  }
}

double valueOf(DType t, const uint8_t* p) {
  switch (t) {
    case DType::kF64:
      return load<double>(p);
    case DType::kF32:
      return load<float>(p);
    case DType::kF16:
      return decodeMini(load<uint16_t>(p), kHalf);
    case DType::kBf16: {
      const uint32_t bits = uint32_t{load<uint16_t>(p)} << 16;
      float f;
      std::memcpy(&f, &bits, 4);
      return f;
    }
    case DType::kE4m3:
      return decodeMini(p[0], kE4m3);
    case DType::kE5m2:
      return decodeMini(p[0], kE5m2);
    case DType::kI8:
      return static_cast<int8_t>(p[0]);
    case DType::kU8:
      return p[0];
    case DType::kI16:
      return load<int16_t>(p);
    case DType::kU16:
      return load<uint16_t>(p);
    case DType::kI32:
      return load<int32_t>(p);
    case DType::kU32:
      return load<uint32_t>(p);
    case DType::kI64:
      return static_cast<double>(load<int64_t>(p));
    case DType::kU64:
      return static_cast<double>(load<uint64_t>(p));
  }
  return 0;
}

// Sign-magnitude float bits mapped onto a line where neighbours differ by 1.
int64_t orderedKey(uint64_t bits, size_t bytes) {
  const unsigned width = static_cast<unsigned>(bytes * 8);
  const uint64_t sign = uint64_t{1} << (width - 1);
  const uint64_t magnitude = bits & (sign - 1);
  return (bits & sign) != 0 ? -static_cast<int64_t>(magnitude) : static_cast<int64_t>(magnitude);
}

}  // namespace

std::optional<DType> parseDType(std::string_view name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const Names& n : kNames) {
    if (lower == n.name) return n.type;
  }
  return std::nullopt;
}

std::string dtypeName(DType type) {
  for (const Names& n : kNames) {
    if (n.type == type) return n.name;
  }
  return "?";
}

size_t dtypeSize(DType type) {
  switch (type) {
    case DType::kF64:
    case DType::kI64:
    case DType::kU64:
      return 8;
    case DType::kF32:
    case DType::kI32:
    case DType::kU32:
      return 4;
    case DType::kF16:
    case DType::kBf16:
    case DType::kI16:
    case DType::kU16:
      return 2;
    default:
      return 1;
  }
}

ElementStats elementStats(DType type, const uint8_t* expected, const uint8_t* actual, size_t size) {
  ElementStats stats;
  stats.type = type;
  const size_t width = dtypeSize(type);
  stats.elements = size / width;
  double worst = -1;
  for (uint64_t i = 0; i < stats.elements; ++i) {
    const uint8_t* pe = expected + i * width;
    const uint8_t* pa = actual + i * width;
    const uint64_t be = bitsOf(type, pe), ba = bitsOf(type, pa);
    const double e = valueOf(type, pe), a = valueOf(type, pa);
    if (std::isnan(e)) ++stats.nanExpected;
    if (std::isnan(a)) ++stats.nanActual;
    if (std::isinf(e)) ++stats.infExpected;
    if (std::isinf(a)) ++stats.infActual;
    if (be == ba || (std::isnan(e) && std::isnan(a))) continue;
    ++stats.mismatches;
    double abs, rel, ulp;
    if (std::isnan(e) || std::isnan(a) || std::isinf(e) || std::isinf(a)) {
      abs = rel = ulp = (e == a) ? 0.0 : std::numeric_limits<double>::infinity();
      if (e == a) {  // +0 / -0 style bit differences of equal infinities cannot happen; keep it simple
        --stats.mismatches;
        continue;
      }
    } else {
      abs = std::fabs(a - e);
      rel = e != 0 ? abs / std::fabs(e) : 0.0;
      ulp = isFloat(type) ? static_cast<double>(std::llabs(orderedKey(ba, width) - orderedKey(be, width))) : abs;
    }
    stats.maxAbsError = std::max(stats.maxAbsError, abs);
    stats.maxRelError = std::max(stats.maxRelError, rel);
    stats.maxUlp = std::max(stats.maxUlp, ulp);
    if (abs > worst) {
      worst = abs;
      stats.worstElement = i;
    }
  }
  return stats;
}

bool Tolerance::accepts(const ElementStats& stats) const {
  if (stats.nanActual != stats.nanExpected) return false;
  if (absolute && !(stats.maxAbsError <= *absolute)) return false;
  if (relative && !(stats.maxRelError <= *relative)) return false;
  if (ulp && !(stats.maxUlp <= *ulp)) return false;
  return absolute || relative || ulp || stats.mismatches == 0;
}

std::optional<Tolerance> parseTolerance(std::string_view text) {
  Tolerance tolerance;
  while (!text.empty()) {
    const size_t comma = text.find(',');
    if (comma != std::string_view::npos && comma + 1 == text.size()) return std::nullopt;  // "1e-3,"
    std::string_view item = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
    std::optional<double>* slot = &tolerance.absolute;
    if (const size_t eq = item.find('='); eq != std::string_view::npos) {
      const std::string_view key = item.substr(0, eq);
      item = item.substr(eq + 1);
      if (key == "abs")
        slot = &tolerance.absolute;
      else if (key == "rel")
        slot = &tolerance.relative;
      else if (key == "ulp")
        slot = &tolerance.ulp;
      else
        return std::nullopt;
    }
    const std::string number(item);
    char* end = nullptr;
    const double value = std::strtod(number.c_str(), &end);
    if (number.empty() || end != number.c_str() + number.size() || !(value >= 0)) return std::nullopt;
    *slot = value;
  }
  if (!tolerance.absolute && !tolerance.relative && !tolerance.ulp) return std::nullopt;
  return tolerance;
}

bool compareRange(BufferReport& report, const uint8_t* expected, const uint8_t* actual, uint64_t size,
                  std::optional<uint32_t> param, const ReplayOptions& options) {
  RangeComparison comparison(report, size, param, options);
  comparison.add(expected, actual, size, 0);
  return comparison.finish();
}

RangeComparison::RangeComparison(BufferReport& report, uint64_t size, std::optional<uint32_t> param,
                                 const ReplayOptions& options)
    : report_(report), size_(size), type_(options.dtype), options_(options) {
  if (param) {
    if (const auto it = options.paramDtypes.find(*param); it != options.paramDtypes.end()) type_ = it->second;
  }
  report_.differingBytes = 0;
  report_.firstOffset.reset();
  report_.stats.reset();
}

void RangeComparison::add(const uint8_t* expected, const uint8_t* actual, uint64_t size, uint64_t offset) {
  const ByteDiff diff = compareBytes(expected, actual, size);
  if (diff.same()) return;
  report_.differingBytes += diff.differingBytes;
  if (!report_.firstOffset) report_.firstOffset = offset + *diff.firstOffset;
  if (!type_) return;
  const ElementStats part = elementStats(*type_, expected, actual, size);
  if (!report_.stats) {
    report_.stats = part;
    if (part.worstElement) report_.stats->worstElement = offset / dtypeSize(*type_) + *part.worstElement;
    return;
  }
  ElementStats& all = *report_.stats;
  // The first element of the largest error, as one pass over the range would find it.
  if (part.worstElement && (!all.worstElement || part.maxAbsError > all.maxAbsError)) {
    all.worstElement = offset / dtypeSize(*type_) + *part.worstElement;
  }
  all.mismatches += part.mismatches;
  all.maxAbsError = std::max(all.maxAbsError, part.maxAbsError);
  all.maxRelError = std::max(all.maxRelError, part.maxRelError);
  all.maxUlp = std::max(all.maxUlp, part.maxUlp);
  all.nanExpected += part.nanExpected, all.nanActual += part.nanActual;
  all.infExpected += part.infExpected, all.infActual += part.infActual;
}

bool RangeComparison::finish() {
  if (report_.differingBytes == 0) return false;
  if (report_.stats) report_.stats->elements = size_ / dtypeSize(report_.stats->type);
  report_.withinTolerance = options_.tolerance && report_.stats && options_.tolerance->accepts(*report_.stats);
  return !report_.withinTolerance;
}

}  // namespace kcap::replay
