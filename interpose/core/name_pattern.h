// Kernel-name patterns for the shim's filters (KCAP_INCLUDE, KCAP_EXCLUDE).
//
// The shim has its own small matcher rather than a regular-expression
// library: it is preloaded into arbitrary programs, and a C++ library it
// depends on would sit in their global symbol scope and interpose on a
// program that links another version of it. And kernel names are matched
// in time linear in their length: the pattern becomes a Thompson NFA, whose
// set of states is simulated byte by byte along the name (no backtracking,
// no recursion on the name, memory bounded by the pattern).
//
// Syntax: what RE2 and ECMAScript agree on, byte by byte:
//   a literal byte; `.` (any byte but \n); classes [abc] [a-z] [^...], with
//   escapes inside (\] \- \\ \d ...); \d \w \s \D \W \S (ASCII; \s is
//   [\t\n\f\r ]); \f \n \r \t \v \xHH; a backslash before punctuation: that
//   character; ^ and $ (start and end of the name); alternation |; groups
//   ( ) and (?: ); quantifiers * + ? {n} {n,} {n,m} (counts up to 1000) and
//   their lazy forms *? +? ?? {n,m}? (a yes/no search cannot tell them apart).
// Everything else (backreferences, lookaround, named groups, flags, \b,
// POSIX classes, a bare `{` that is no quantifier) is refused when parsed,
// with the byte position of the problem.
//
// A pattern matches if it matches anywhere in the name, unless anchored.
// search() takes time O(name length x states) and memory O(states).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace kcap {

// What is wrong with a pattern, and where: "at position N: ...".
class NamePatternError : public std::runtime_error {
 public:
  NamePatternError(size_t position, const std::string& problem);
  size_t position() const { return position_; }

 private:
  size_t position_;
};

class NamePattern {
 public:
  // Groups nested deeper are refused: the parser recurses once per level,
  // and the shim may parse on a program thread with a small stack.
  static constexpr size_t kMaxNesting = 100;
  // Patterns whose program would have more states are refused: they bound
  // search()'s time per byte and its memory.
  static constexpr size_t kMaxStates = 100000;
  // The largest count of {n}, {n,}, {n,m} (RE2's limit too).
  static constexpr uint32_t kMaxRepeat = 1000;

  // Throws NamePatternError.
  explicit NamePattern(std::string_view source);

  // True if the pattern matches somewhere in `name`. Thread-safe.
  bool search(std::string_view name) const;

  size_t states() const { return program_.size(); }

 private:
  friend class NamePatternCompiler;  // name_pattern.cpp: parses a pattern into the program

  enum class Op : uint8_t {
    kByte,   // consume the byte `x`
    kSet,    // consume a byte of sets_[x]
    kSplit,  // go on at both `x` and `y`
    kJump,   // go on at `x`
    kBegin,  // go on only at the start of the name
    kEnd,    // go on only at its end
    kMatch,
  };
  struct Instruction {
    Op op;
    uint32_t x;
    uint32_t y;
  };
  using ByteSet = std::array<uint64_t, 4>;

  std::vector<Instruction> program_;  // kByte, kSet, kBegin, kEnd go on at the next instruction
  std::vector<ByteSet> sets_;
};

}  // namespace kcap
