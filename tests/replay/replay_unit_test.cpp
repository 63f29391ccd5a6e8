// replay/'s comparison, without a driver: bytes and elements, dtypes and
// tolerances (compare.h), and a range compared by its differing pieces.
// replay_parts_test.cpp goes on with replay's other pure parts.
#include "compare.h"
#include "outcome.h"
#include "replay_options.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace {

using namespace kcap::replay;

// ---- compareBytes ----------------------------------------------------------------------------

TEST(CompareBytes, CountsEveryDifferingByteAndFindsTheFirst) {
  std::vector<uint8_t> expected(40);
  for (size_t i = 0; i < expected.size(); ++i) {
    expected[i] = static_cast<uint8_t>(i * 7);
  }
  std::vector<uint8_t> actual = expected;
  EXPECT_TRUE(compareBytes(expected.data(), actual.data(), actual.size()).same());
  EXPECT_FALSE(compareBytes(expected.data(), actual.data(), actual.size()).firstOffset);
  actual[11] ^= 0x01;  // inside the second 8-byte word
  actual[12] ^= 0x80;
  actual[38] ^= 0xFF;  // in the tail after the last whole word
  const ByteDiff diff = compareBytes(expected.data(), actual.data(), actual.size());
  EXPECT_FALSE(diff.same());
  EXPECT_EQ(diff.differingBytes, 3u);
  ASSERT_TRUE(diff.firstOffset);
  EXPECT_EQ(*diff.firstOffset, 11u);
}

TEST(CompareBytes, TailOnlyAndEmpty) {
  const uint8_t a[13] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13};
  uint8_t b[13];
  std::memcpy(b, a, sizeof b);
  b[12] = 0;
  const ByteDiff diff = compareBytes(a, b, sizeof a);
  EXPECT_EQ(diff.differingBytes, 1u);
  EXPECT_EQ(diff.firstOffset, std::optional<uint64_t>(12));
  EXPECT_TRUE(compareBytes(a, b, 0).same());
  EXPECT_TRUE(compareBytes(a, b, 12).same());  // the difference is past the compared size
}

// ---- element decoding, through elementStats ----------------------------------------------------

std::vector<uint8_t> bytes16(std::initializer_list<uint16_t> values) {
  std::vector<uint8_t> out;
  for (const uint16_t v : values) {
    out.push_back(static_cast<uint8_t>(v & 0xFF));
    out.push_back(static_cast<uint8_t>(v >> 8));
  }
  return out;
}

template <class T>
std::vector<uint8_t> bytesOf(std::initializer_list<T> values) {
  std::vector<uint8_t> out(values.size() * sizeof(T));
  std::memcpy(out.data(), values.begin(), out.size());
  return out;
}

ElementStats stats(DType type, const std::vector<uint8_t>& expected, const std::vector<uint8_t>& actual) {
  EXPECT_EQ(expected.size(), actual.size());
  return elementStats(type, expected.data(), actual.data(), std::min(expected.size(), actual.size()));
}

// The decoded value of one element, as |value - 0| (elementStats against zero).
double magnitude(DType type, std::vector<uint8_t> bits) {
  const std::vector<uint8_t> zero(bits.size(), 0);
  return stats(type, zero, bits).maxAbsError;
}

TEST(ElementStats, HalfDecodesNormalsSubnormalsAndTheLargest) {
  EXPECT_EQ(magnitude(DType::kF16, bytes16({0x3C00})), 1.0);
  EXPECT_EQ(magnitude(DType::kF16, bytes16({0xC000})), 2.0);  // -2
  EXPECT_EQ(magnitude(DType::kF16, bytes16({0x3555})), 1365.0 / 4096.0);
  EXPECT_EQ(magnitude(DType::kF16, bytes16({0x7BFF})), 65504.0);
  EXPECT_EQ(magnitude(DType::kF16, bytes16({0x0001})), std::ldexp(1.0, -24));     // smallest subnormal
  EXPECT_EQ(magnitude(DType::kF16, bytes16({0x03FF})), std::ldexp(1023.0, -24));  // largest subnormal
  EXPECT_EQ(magnitude(DType::kF16, bytes16({0x0400})), std::ldexp(1.0, -14));     // smallest normal
  // 1.0 against -1.0: the error keeps the sign
  const ElementStats s = stats(DType::kF16, bytes16({0x3C00}), bytes16({0xBC00}));
  EXPECT_EQ(s.maxAbsError, 2.0);
  EXPECT_EQ(s.maxRelError, 2.0);
  EXPECT_EQ(s.maxUlp, 2.0 * 0x3C00);  // through zero, +0 and -0 being one point
}

TEST(ElementStats, HalfInfinityAndNaNRules) {
  // equal infinities and NaN against NaN (any payload) are equal
  ElementStats s = stats(DType::kF16, bytes16({0x7C00, 0xFC00, 0x7E00}), bytes16({0x7C00, 0xFC00, 0x7E01}));
  EXPECT_EQ(s.elements, 3u);
  EXPECT_EQ(s.mismatches, 0u);
  EXPECT_EQ(s.infExpected, 2u);
  EXPECT_EQ(s.infActual, 2u);
  EXPECT_EQ(s.nanExpected, 1u);
  EXPECT_EQ(s.nanActual, 1u);
  // a finite value against Inf, opposite infinities, a value against NaN: infinite error
  for (const auto& [e, a] :
       std::vector<std::pair<uint16_t, uint16_t>>{{0x7BFF, 0x7C00}, {0x7C00, 0xFC00}, {0x3C00, 0x7E00}}) {
    s = stats(DType::kF16, bytes16({e}), bytes16({a}));
    EXPECT_EQ(s.mismatches, 1u) << std::hex << e << " " << a;
    EXPECT_TRUE(std::isinf(s.maxAbsError)) << std::hex << e << " " << a;
    EXPECT_TRUE(std::isinf(s.maxUlp)) << std::hex << e << " " << a;
  }
  EXPECT_EQ(s.nanActual, 1u);
  EXPECT_EQ(s.nanExpected, 0u);
}

TEST(ElementStats, BFloat16) {
  EXPECT_EQ(magnitude(DType::kBf16, bytes16({0x3F80})), 1.0);
  EXPECT_EQ(magnitude(DType::kBf16, bytes16({0x4049})), 3.140625);
  EXPECT_EQ(magnitude(DType::kBf16, bytes16({0x0001})), std::ldexp(1.0, -133));   // smallest subnormal
  EXPECT_EQ(magnitude(DType::kBf16, bytes16({0x7F7F})), std::ldexp(255.0, 120));  // largest finite
  const ElementStats s = stats(DType::kBf16, bytes16({0x3F80, 0x7F80, 0x7FC0}), bytes16({0x3F82, 0x7F80, 0xFFC1}));
  EXPECT_EQ(s.mismatches, 1u);
  EXPECT_EQ(s.maxUlp, 2.0);  // in bf16's own precision
  EXPECT_EQ(s.maxAbsError, std::ldexp(1.0, -6));
  EXPECT_EQ(s.infExpected, 1u);
  EXPECT_EQ(s.nanExpected, 1u);
  EXPECT_EQ(s.nanActual, 1u);
  EXPECT_EQ(s.worstElement, std::optional<uint64_t>(0));
}

TEST(ElementStats, Fp8E4m3HasNoInfinityAndOneNaN) {
  EXPECT_EQ(magnitude(DType::kE4m3, {0x38}), 1.0);
  EXPECT_EQ(magnitude(DType::kE4m3, {0xB8}), 1.0);    // -1
  EXPECT_EQ(magnitude(DType::kE4m3, {0x7E}), 448.0);  // the largest: exponent all ones is a number
  EXPECT_EQ(magnitude(DType::kE4m3, {0x78}), 256.0);
  EXPECT_EQ(magnitude(DType::kE4m3, {0x01}), std::ldexp(1.0, -9));  // smallest subnormal
  EXPECT_EQ(magnitude(DType::kE4m3, {0x07}), std::ldexp(7.0, -9));
  ElementStats s = stats(DType::kE4m3, {0x7F, 0xFF, 0x78}, {0x7F, 0x7F, 0x7E});
  EXPECT_EQ(s.nanExpected, 2u);  // S.1111.111
  EXPECT_EQ(s.nanActual, 2u);
  EXPECT_EQ(s.infExpected, 0u);
  EXPECT_EQ(s.infActual, 0u);
  EXPECT_EQ(s.mismatches, 1u);
  EXPECT_EQ(s.maxAbsError, 192.0);
  EXPECT_EQ(s.maxUlp, 6.0);
  EXPECT_EQ(s.worstElement, std::optional<uint64_t>(2));
}

TEST(ElementStats, Fp8E5m2HasInfinitiesAndNaNs) {
  EXPECT_EQ(magnitude(DType::kE5m2, {0x3C}), 1.0);
  EXPECT_EQ(magnitude(DType::kE5m2, {0x7B}), 57344.0);
  EXPECT_EQ(magnitude(DType::kE5m2, {0x01}), std::ldexp(1.0, -16));  // smallest subnormal
  EXPECT_EQ(magnitude(DType::kE5m2, {0x03}), std::ldexp(3.0, -16));
  const ElementStats s = stats(DType::kE5m2, {0x7C, 0xFC, 0x7D, 0x7F}, {0x7C, 0xFC, 0x7E, 0x7B});
  EXPECT_EQ(s.infExpected, 2u);
  EXPECT_EQ(s.infActual, 2u);
  EXPECT_EQ(s.nanExpected, 2u);
  EXPECT_EQ(s.nanActual, 1u);
  EXPECT_EQ(s.mismatches, 1u);  // NaN against the largest finite; the NaN pair is equal
  EXPECT_TRUE(std::isinf(s.maxAbsError));
}

TEST(ElementStats, FloatAndDoubleUlpsInTheirOwnPrecision) {
  const float one = 1.0f;
  const float next = std::nextafter(std::nextafter(one, 2.0f), 2.0f);
  ElementStats s = stats(DType::kF32, bytesOf<float>({one, 4.0f, -0.0f}), bytesOf<float>({next, 4.0f, 0.0f}));
  EXPECT_EQ(s.elements, 3u);
  EXPECT_EQ(s.mismatches, 2u);  // -0 and +0 differ in their bits, by no ULP
  EXPECT_EQ(s.maxUlp, 2.0);
  EXPECT_EQ(s.maxAbsError, static_cast<double>(next) - 1.0);
  EXPECT_EQ(s.maxRelError, static_cast<double>(next) - 1.0);
  EXPECT_EQ(s.worstElement, std::optional<uint64_t>(0));

  const double d = 1e300;
  s = stats(DType::kF64, bytesOf<double>({d, 1.0}), bytesOf<double>({std::nextafter(d, 0.0), 1.0}));
  EXPECT_EQ(s.mismatches, 1u);
  EXPECT_EQ(s.maxUlp, 1.0);
  // a trailing partial element is not compared
  std::vector<uint8_t> e = bytesOf<float>({1.0f, 2.0f}), a = e;
  e.resize(6);
  a.resize(6);
  a[5] ^= 1;
  s = stats(DType::kF32, e, a);
  EXPECT_EQ(s.elements, 1u);
  EXPECT_EQ(s.mismatches, 0u);
}

TEST(ElementStats, IntegersReportTheirDifferenceAsUlps) {
  ElementStats s = stats(DType::kI32, bytesOf<int32_t>({-5, 7, 0}), bytesOf<int32_t>({3, 7, 0}));
  EXPECT_EQ(s.mismatches, 1u);
  EXPECT_EQ(s.maxAbsError, 8.0);
  EXPECT_EQ(s.maxUlp, 8.0);
  EXPECT_EQ(s.maxRelError, 8.0 / 5.0);
  s = stats(DType::kI8, {0x80}, {0x7F});  // -128 against 127
  EXPECT_EQ(s.maxAbsError, 255.0);
  s = stats(DType::kU8, {0x80}, {0x7F});  // 128 against 127
  EXPECT_EQ(s.maxAbsError, 1.0);
  s = stats(DType::kU16, bytes16({0xFFFF}), bytes16({0x0000}));
  EXPECT_EQ(s.maxAbsError, 65535.0);
  s = stats(DType::kI16, bytes16({0xFFFF}), bytes16({0x0001}));  // -1 against 1
  EXPECT_EQ(s.maxAbsError, 2.0);
  s = stats(DType::kU32, bytesOf<uint32_t>({0xFFFFFFFFu}), bytesOf<uint32_t>({0u}));
  EXPECT_EQ(s.maxAbsError, 4294967295.0);
  s = stats(DType::kI64, bytesOf<int64_t>({-1}), bytesOf<int64_t>({1}));
  EXPECT_EQ(s.maxAbsError, 2.0);
  s = stats(DType::kU64, bytesOf<uint64_t>({1000}), bytesOf<uint64_t>({1}));
  EXPECT_EQ(s.maxAbsError, 999.0);
  EXPECT_EQ(s.nanExpected + s.nanActual + s.infExpected + s.infActual, 0u);
}

// ---- dtypes and tolerances ------------------------------------------------------------------------

TEST(DTypes, NamesAndAliases) {
  const std::vector<std::pair<std::string, DType>> names = {
      {"f64", DType::kF64},   {"fp64", DType::kF64},      {"double", DType::kF64},    {"f32", DType::kF32},
      {"fp32", DType::kF32},  {"float", DType::kF32},     {"FLOAT", DType::kF32},     {"f16", DType::kF16},
      {"fp16", DType::kF16},  {"half", DType::kF16},      {"bf16", DType::kBf16},     {"bfloat16", DType::kBf16},
      {"BF16", DType::kBf16}, {"e4m3", DType::kE4m3},     {"fp8_e4m3", DType::kE4m3}, {"fp8e4m3", DType::kE4m3},
      {"e5m2", DType::kE5m2}, {"fp8_e5m2", DType::kE5m2}, {"i8", DType::kI8},         {"int8", DType::kI8},
      {"u8", DType::kU8},     {"uint8", DType::kU8},      {"i16", DType::kI16},       {"uint16", DType::kU16},
      {"i32", DType::kI32},   {"int32", DType::kI32},     {"u32", DType::kU32},       {"i64", DType::kI64},
      {"int64", DType::kI64}, {"u64", DType::kU64},       {"uint64", DType::kU64},
  };
  for (const auto& [name, type] : names) {
    EXPECT_EQ(parseDType(name), std::optional<DType>(type)) << name;
  }
  for (const char* bad : {"", "f", "f33", "float32", "fp8", "int", "e4m3 ", " f32", "u128"}) {
    EXPECT_FALSE(parseDType(bad)) << "'" << bad << "'";
  }
  EXPECT_EQ(dtypeName(DType::kF16), "f16");
  EXPECT_EQ(dtypeName(DType::kE4m3), "e4m3");
  EXPECT_EQ(dtypeName(DType::kU64), "u64");
  EXPECT_EQ(dtypeSize(DType::kF64), 8u);
  EXPECT_EQ(dtypeSize(DType::kBf16), 2u);
  EXPECT_EQ(dtypeSize(DType::kE5m2), 1u);
  EXPECT_EQ(dtypeSize(DType::kI32), 4u);
}

TEST(Tolerance, Forms) {
  auto t = parseTolerance("1e-3");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->absolute, std::optional<double>(1e-3));
  EXPECT_FALSE(t->relative);
  EXPECT_FALSE(t->ulp);
  t = parseTolerance("abs=0.5");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->absolute, std::optional<double>(0.5));
  t = parseTolerance("rel=1e-2");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->relative, std::optional<double>(1e-2));
  EXPECT_FALSE(t->absolute);
  t = parseTolerance("ulp=4");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->ulp, std::optional<double>(4));
  t = parseTolerance("1e-3,rel=1e-2,ulp=4");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->absolute, std::optional<double>(1e-3));
  EXPECT_EQ(t->relative, std::optional<double>(1e-2));
  EXPECT_EQ(t->ulp, std::optional<double>(4));
  t = parseTolerance("0");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->absolute, std::optional<double>(0));
}

TEST(Tolerance, Rejections) {
  for (const char* bad :
       {"", "rel=", "=1", "foo=1", "-1", "rel=-0.5", "1e-3x", "abc", "nan", "ulp=nan", ",", "1e-3,,ulp=1", "rel:1"}) {
    EXPECT_FALSE(parseTolerance(bad)) << "'" << bad << "'";
  }
}

TEST(Tolerance, Accepts) {
  ElementStats s;
  s.elements = 10;
  s.mismatches = 2;
  s.maxAbsError = 1e-4;
  s.maxRelError = 1e-2;
  s.maxUlp = 3;
  EXPECT_TRUE((Tolerance{1e-3, {}, {}}.accepts(s)));
  EXPECT_TRUE((Tolerance{1e-4, {}, {}}.accepts(s)));  // inclusive
  EXPECT_FALSE((Tolerance{1e-5, {}, {}}.accepts(s)));
  EXPECT_TRUE((Tolerance{{}, 1e-2, {}}.accepts(s)));
  EXPECT_FALSE((Tolerance{{}, 1e-3, {}}.accepts(s)));
  EXPECT_TRUE((Tolerance{{}, {}, 3.0}.accepts(s)));
  EXPECT_FALSE((Tolerance{{}, {}, 2.0}.accepts(s)));
  EXPECT_FALSE((Tolerance{1e-3, 1e-2, 2.0}.accepts(s)));  // every one must hold
  EXPECT_TRUE((Tolerance{1e-3, 1e-2, 3.0}.accepts(s)));
  EXPECT_FALSE((Tolerance{}.accepts(s)));  // no threshold: only no mismatch passes
  ElementStats clean;
  clean.elements = 10;
  EXPECT_TRUE((Tolerance{}.accepts(clean)));
  // NaN where the recording had none fails whatever the thresholds
  ElementStats nan = s;
  nan.nanActual = 1;
  EXPECT_FALSE((Tolerance{1e9, 1e9, 1e9}.accepts(nan)));
  // an infinite error (Inf against a number) fails a finite threshold
  ElementStats inf = s;
  inf.maxAbsError = inf.maxRelError = inf.maxUlp = std::numeric_limits<double>::infinity();
  EXPECT_FALSE((Tolerance{1e9, {}, {}}.accepts(inf)));
}

// ---- a range compared by its differing pieces (RangeComparison) ---------------------------------

// Four pieces of 16 floats; pieces 1 and 3 differ by 2.0 each (the first
// of them must be the worst element), piece 0 holds a NaN on both sides.
TEST(RangeComparison, PiecesGiveTheWholeRangesReportButForTheNaNsLeftOut) {
  constexpr size_t kFloats = 64, kPiece = 16 * sizeof(float);
  std::vector<float> e(kFloats), a;
  for (size_t i = 0; i < kFloats; ++i) e[i] = static_cast<float>(i);
  e[3] = std::numeric_limits<float>::quiet_NaN();
  a = e;
  a[20] += 2.0f;
  a[50] -= 2.0f;
  const auto* eb = reinterpret_cast<const uint8_t*>(e.data());
  const auto* ab = reinterpret_cast<const uint8_t*>(a.data());
  ReplayOptions options;
  options.dtype = DType::kF32;

  BufferReport whole;
  EXPECT_TRUE(compareRange(whole, eb, ab, kFloats * sizeof(float), std::nullopt, options));
  BufferReport pieces;
  RangeComparison comparison(pieces, kFloats * sizeof(float), std::nullopt, options);
  for (const size_t piece : {1, 3}) comparison.add(eb + piece * kPiece, ab + piece * kPiece, kPiece, piece * kPiece);
  EXPECT_TRUE(comparison.finish());

  EXPECT_EQ(pieces.differingBytes, whole.differingBytes);
  EXPECT_EQ(pieces.firstOffset, std::optional<uint64_t>(82));  // element 20, its third byte
  EXPECT_EQ(pieces.firstOffset, whole.firstOffset);
  ASSERT_TRUE(whole.stats && pieces.stats);
  EXPECT_EQ(pieces.stats->elements, 64u);
  EXPECT_EQ(pieces.stats->mismatches, 2u);
  EXPECT_EQ(pieces.stats->mismatches, whole.stats->mismatches);
  EXPECT_EQ(pieces.stats->maxAbsError, 2.0);
  EXPECT_EQ(pieces.stats->maxUlp, whole.stats->maxUlp);
  EXPECT_EQ(pieces.stats->worstElement, std::optional<uint64_t>(20));
  EXPECT_EQ(pieces.stats->worstElement, whole.stats->worstElement);
  EXPECT_EQ(whole.stats->nanExpected, 1u);  // the pieces left out are equal, their NaNs uncounted
  EXPECT_EQ(pieces.stats->nanExpected, 0u);

  // --tolerance decides alike; nothing added is a range that does not differ.
  options.tolerance = parseTolerance("3");
  BufferReport tolerated;
  RangeComparison within(tolerated, kFloats * sizeof(float), std::nullopt, options);
  within.add(eb + 3 * kPiece, ab + 3 * kPiece, kPiece, 3 * kPiece);
  EXPECT_FALSE(within.finish());
  EXPECT_TRUE(tolerated.withinTolerance);
  BufferReport same;
  RangeComparison none(same, kFloats * sizeof(float), std::nullopt, options);
  EXPECT_FALSE(none.finish());
  EXPECT_EQ(same.differingBytes, 0u);
  EXPECT_FALSE(same.firstOffset);
}

}  // namespace
