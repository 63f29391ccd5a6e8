// Comparing replayed memory with recorded memory. Pure logic: no driver.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kcap::replay {

struct ByteDiff {
  uint64_t differingBytes = 0;
  std::optional<uint64_t> firstOffset;  // of the first differing byte
  bool same() const { return differingBytes == 0; }
};

ByteDiff compareBytes(const uint8_t* expected, const uint8_t* actual, size_t size);

enum class DType { kF64, kF32, kF16, kBf16, kE4m3, kE5m2, kI8, kU8, kI16, kU16, kI32, kU32, kI64, kU64 };

// "f32", "fp16", "half", "bf16", "fp8_e4m3" / "e4m3", "e5m2", "i32", "int32", "u8", ...
std::optional<DType> parseDType(std::string_view name);
std::string dtypeName(DType type);
size_t dtypeSize(DType type);

// Element-wise error statistics of `actual` against `expected`, both read as
// `type` (a trailing partial element is ignored). NaN compared with NaN and
// equal infinities count as equal; an element where exactly one side is NaN
// or Inf (or infinities of opposite sign) counts as a mismatch with infinite
// error. ULP distance is measured in the type's own precision; integers
// report their absolute difference as ULPs.
struct ElementStats {
  DType type = DType::kF32;
  uint64_t elements = 0;
  uint64_t mismatches = 0;  // elements not bitwise equal (after the NaN rule)
  double maxAbsError = 0;
  double maxRelError = 0;  // |a - e| / |e|, over elements with e != 0
  double maxUlp = 0;
  uint64_t nanExpected = 0, nanActual = 0;
  uint64_t infExpected = 0, infActual = 0;
  std::optional<uint64_t> worstElement;  // index of the largest absolute error
};

ElementStats elementStats(DType type, const uint8_t* expected, const uint8_t* actual, size_t size);

// A pass threshold for --tolerance: "1e-3" (absolute), "rel=1e-2", "ulp=4";
// several joined by commas all have to hold.
struct Tolerance {
  std::optional<double> absolute, relative, ulp;
  bool accepts(const ElementStats& stats) const;
};
std::optional<Tolerance> parseTolerance(std::string_view text);

struct BufferReport;   // outcome.h
struct ReplayOptions;  // replay_options.h

// One compared range, `expected` against `actual` (`size` bytes each): fills
// the report's differing bytes and first offset, and where they differ its
// element statistics (as --param-dtype for `param`, the parameter pointing
// into the range, else --dtype) and whether --tolerance accepts them. True
// when the range counts as differing.
bool compareRange(BufferReport& report, const uint8_t* expected, const uint8_t* actual, uint64_t size,
                  std::optional<uint32_t> param, const ReplayOptions& options);

// The same for a range compared in parts: those pieces of it whose hashes
// on the device differ from the recorded ones (post_state.cpp). Each part is
// added at its byte offset in the range (a multiple of the element size),
// in increasing order; the others are known equal. Element statistics then
// cover the parts compared: NaNs and infinities in the pieces left out are
// on both sides alike and not counted.
class RangeComparison {
 public:
  RangeComparison(BufferReport& report, uint64_t size, std::optional<uint32_t> param, const ReplayOptions& options);
  void add(const uint8_t* expected, const uint8_t* actual, uint64_t size, uint64_t offset);
  // True when the range counts as differing (as compareRange).
  bool finish();

 private:
  BufferReport& report_;
  uint64_t size_;
  std::optional<DType> type_;
  const ReplayOptions& options_;
};

}  // namespace kcap::replay
