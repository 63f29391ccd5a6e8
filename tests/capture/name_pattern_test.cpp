// NamePattern, the shim's kernel-name matcher (interpose/core/name_pattern.h):
// its verdicts against expected ones and against RE2's (a search, byte by
// byte: RE2::PartialMatch with Latin-1 encoding) on a table and on random
// patterns of its syntax; what it refuses and where; its limits; and names
// of a million bytes on a thread with a small stack, which an engine that
// recurses on the name could not survive.
#include "capture_options.h"
#include "name_pattern.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <re2/re2.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace kcap {
namespace {

RE2::Options re2Options() {
  RE2::Options options;
  options.set_log_errors(false);
  options.set_encoding(RE2::Options::EncodingLatin1);
  return options;
}

bool re2Search(const RE2& re, const std::string& name) {
  return RE2::PartialMatch(re2::StringPiece(name.data(), name.size()), re);
}

// A CUTLASS-style mangled name, as kernel names of GEMM libraries are.
const std::string kCutlass =
    "_ZN7cutlass6KernelINS_4gemm6kernel4GemmINS1_11threadblock12MmaPipelinedINS1_9GemmShapeILi128ELi128ELi8EEENS_"
    "9transform11threadblock22PredicatedTileIteratorINS_11MatrixShapeILi128ELi8EEEfNS_6layout8RowMajorELi1ENS8_"
    "30PitchLinearStripminedThreadMapINSD_16PitchLinearShapeILi8ELi128EEELi256ELi1EEELi1EEENS9_19RegularTileIterator"
    "IS8_fNSD_11ColumnMajorELi1ENS8_33TransposePitchLinearThreadMapSimtISI_EELi4EEEEEvNT_6ParamsE";
const std::string kSm90 =
    "sm90_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_"
    "segment_k_off_kernel__5x_cublas";

struct Case {
  const char* pattern;
  std::string name;
  bool matches;
};

const std::vector<Case>& table() {
  static const std::vector<Case> cases = {
      {"gemm", "sm90_gemm_kernel", true},
      {"gemm", "GEMM", false},
      {"^gemm", "sm90_gemm_kernel", false},
      {"^sm90_", "sm90_gemm_kernel", true},
      {"kernel$", "sm90_gemm_kernel", true},
      {"kernel$", "sm90_gemm_kernel_v2", false},
      {"^axpy$", "axpy", true},
      {"^axpy$", "axpy2", false},
      {"^$", "", true},
      {"^$", "a", false},
      {"", "anything", true},
      {"gemm|attn", "flash_attn_fwd", true},
      {"gemm|attn", "softmax", false},
      {"^(gemm|attn)$", "attn", true},
      {"^(gemm|attn)$", "xattn", false},
      {"^(?:nccl|cub)", "ncclKernel_AllReduce", true},
      {"^(?:nccl|cub)", "_Z4ncclv", false},
      {"a.c", "abc", true},
      {"a.c", "a\nc", false},
      {"a[^x]c", "a\nc", true},
      {"a\\.c", "abc", false},
      {"a\\.c", "a.c", true},
      {"[0-9]+x[0-9]+", "tilesize128x256x64", true},
      {"[0-9]+x[0-9]+", "tilesize128_256", false},
      {"\\d{3}x\\d{3}", kSm90, true},
      {"\\d{4}", kSm90, false},
      {"[A-Z]{4,}", "GEMM_kernel", true},
      {"[A-Z]{4,}", "GEMm_kernel", false},
      {"^[_a-zA-Z][_a-zA-Z0-9]*$", "_Z4axpyfPKfPfi", true},
      {"^[_a-zA-Z][_a-zA-Z0-9]*$", "axpy<float>", false},
      {"[^a-z_0-9]", "axpy_2", false},
      {"[^a-z_0-9]", "axpy<2>", true},
      {"\\w+<\\w+>", "axpy<float>", true},
      {"\\W", "axpy_float", false},
      {"\\s", "void axpy", true},
      {"\\S\\s\\S", "a  b", false},
      {"\\D\\d", "axpy2", true},
      {"\\D\\d", "12345", false},
      {"x{2}", "axpy", false},
      {"x{2}", "axxpy", true},
      {"^a{2,3}$", "aaa", true},
      {"^a{2,3}$", "aaaa", false},
      {"^a{0}$", "", true},
      {"^(ab){2,}$", "ababab", true},
      {"^(ab){2,}$", "aba", false},
      {"^(a|ab)(c|bcd)(d*)$", "abcd", true},
      {"a*?b", "aaab", true},
      {"^a+?$", "aaa", true},
      {"^a??b$", "b", true},
      {"^a{1,2}?b$", "aaab", false},
      {"(a|aa)*b", "aaaaaaaaab", true},
      {"(a|aa)*c", "aaaaaaaaab", false},
      {"^(a*)*$", "aaaa", true},
      {"^(a*)*b$", "aaaa", false},
      {"^(|a)+$", "aaa", true},
      {"^()$", "", true},
      {"a^b", "a^b", false},
      {"a\\^b", "a^b", true},
      {"\\$", "cost$", true},
      {"\\(\\)", "f()", true},
      {"[\\]]", "a]b", true},
      {"[a\\-z]", "-", true},
      {"[a\\-z]", "m", false},
      {"[a-]", "-", true},
      {"[-a]", "-", true},
      {"[\\d_]+$", "kernel_2_3", true},
      {"]", "a]", true},
      {"}", "a}", true},
      {"\\x41\\x42", "xABx", true},
      {"\\t", "a\tb", true},
      {"\\xff", std::string("a\xff", 2), true},
      {".", std::string("\xff", 1), true},
      {"\\W", std::string("\x80", 1), true},
      {"[^a]", std::string("\x80", 1), true},
      {"cutlass.*Gemm", kCutlass, true},
      {"^_ZN7cutlass", kCutlass, true},
      {"GemmShapeILi(64|128)ELi(64|128)ELi(8|16)E", kCutlass, true},
      {"GemmShapeILi(64|256)E", kCutlass, false},
      {"(?:Li\\d+E){3}", kCutlass, true},
      {"(?:Li\\d+E){5}", kCutlass, false},
      {"^_Z.*ParamsE$", kCutlass, true},
      {"^_Z.*Params$", kCutlass, false},
      {"sm(80|90)_.*gemm.*tn", kSm90, true},
      {"sm(80|90)_.*gemm.*_nt_", kSm90, false},
      {"tilesize\\d+x\\d+x\\d+_warpgroupsize[0-9x]+_", kSm90, true},
      {"(cublas|cutlass)$", kSm90, true},
  };
  return cases;
}

TEST(NamePattern, TableAgreesWithExpectedAndWithRe2) {
  for (const Case& c : table()) {
    const NamePattern pattern(c.pattern);
    const RE2 re(c.pattern, re2Options());
    ASSERT_TRUE(re.ok()) << c.pattern << ": " << re.error();
    const std::string shown = c.name.size() > 60 ? c.name.substr(0, 60) + "..." : c.name;
    EXPECT_EQ(re2Search(re, c.name), c.matches) << "RE2: " << c.pattern << " on " << shown;
    EXPECT_EQ(pattern.search(c.name), c.matches) << c.pattern << " on " << shown;
  }
}

// Patterns of the syntax, at random: literals, escapes, classes, groups,
// alternation, quantifiers, anchors; over a small alphabet so that they match
// the random names below often enough to tell engines apart.
class Generator {
 public:
  explicit Generator(uint32_t seed) : random_(seed) {}

  std::string pattern() { return alternation(0); }

  std::string name() {
    static const char alphabet[] = {'a', 'b', 'c', 'x', '0', '7', '_', '.', '-', '*', ' ', '\n', ']', '\xff'};
    std::string out;
    for (int i = pick(12); i > 0; --i) {
      out += alphabet[pick(sizeof alphabet)];
    }
    return out;
  }

 private:
  int pick(size_t n) { return static_cast<int>(random_() % n); }

  std::string alternation(int depth) {
    std::string out = concatenation(depth);
    for (int i = pick(4) == 0 ? 1 + pick(2) : 0; i > 0; --i) {
      out += "|" + concatenation(depth);
    }
    return out;
  }

  std::string concatenation(int depth) {
    std::string out;
    for (int i = pick(4); i >= 0; --i) {
      out += piece(depth);
    }
    return out;
  }

  std::string piece(int depth) {
    if (pick(12) == 0) {
      return pick(2) == 0 ? "^" : "$";  // anchors take no quantifier
    }
    std::string out = atom(depth);
    if (pick(3) == 0) {
      static const char* const quantifiers[] = {"*", "+", "?", "{0}", "{1}", "{2}", "{0,}", "{2,}", "{0,1}", "{1,3}"};
      out += quantifiers[pick(std::size(quantifiers))];
      if (pick(4) == 0) {
        out += "?";
      }
    }
    return out;
  }

  std::string atom(int depth) {
    switch (pick(depth < 3 ? 10 : 8)) {
      case 0:
      case 1:
      case 2:
        return std::string(1, "abcx07_"[pick(7)]);
      case 3:
        return ".";
      case 4: {
        static const char* const escapes[] = {"\\d", "\\w", "\\s", "\\D",   "\\W",   "\\S",  "\\.", "\\*",
                                              "\\-", "\\]", "\\n", "\\x61", "\\xff", "\\\\", "\\{", "\\|"};
        return escapes[pick(std::size(escapes))];
      }
      case 5:
      case 6:
        return bracket();
      case 7:
        return std::string(1, "abc"[pick(3)]);
      default:
        return (pick(2) == 0 ? "(" : "(?:") + alternation(depth + 1) + ")";
    }
  }

  std::string bracket() {
    std::string out = pick(3) == 0 ? "[^" : "[";
    for (int i = pick(3); i >= 0; --i) {
      switch (pick(7)) {
        case 0:
          out += "a-c";
          break;
        case 1:
          out += "0-9";
          break;
        case 2:
          out += "\\d";
          break;
        case 3:
          out += "\\]";
          break;
        case 4:
          out += "_.";
          break;
        case 5:
          out += "\\-";
          break;
        default:
          out += std::string(1, "abx*"[pick(4)]);
          break;
      }
    }
    return out + (pick(4) == 0 ? "-]" : "]");  // a bare - only last
  }

  std::mt19937 random_;
};

TEST(NamePattern, RandomPatternsAgreeWithRe2) {
  Generator generator(20251202);
  size_t matched = 0, compared = 0;
  for (int p = 0; p < 3000; ++p) {
    const std::string source = generator.pattern();
    const RE2 re(source, re2Options());
    ASSERT_TRUE(re.ok()) << source << ": " << re.error();  // the generator keeps to the syntax
    std::unique_ptr<NamePattern> pattern;
    ASSERT_NO_THROW(pattern = std::make_unique<NamePattern>(source)) << source;
    for (int n = 0; n < 25; ++n) {
      const std::string name = generator.name();
      const bool expected = re2Search(re, name);
      ASSERT_EQ(pattern->search(name), expected) << "pattern \"" << source << "\" on \"" << name << "\"";
      matched += expected ? 1 : 0;
      ++compared;
    }
  }
  // Both verdicts are common: the comparison tells engines apart.
  EXPECT_GT(matched, compared / 10);
  EXPECT_LT(matched, compared - compared / 10);
}

std::string refusal(const std::string& source) {
  try {
    NamePattern pattern(source);
  } catch (const NamePatternError& e) {
    return e.what();
  }
  return "accepted";
}

TEST(NamePattern, RefusesWhatIsNotInTheSyntaxNamingThePosition) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"(unclosed", "at position 0: missing ) for this ("},
      {"a)", "at position 1: unmatched )"},
      {"gemm(?=_sm90)", "at position 4: (? other than (?: is not supported"},
      {"(?!x)", "at position 0: (? other than (?: is not supported"},
      {"(?<name>x)", "at position 0: (? other than (?: is not supported"},
      {"(?P<name>x)", "at position 0: (? other than (?: is not supported"},
      {"(?i)gemm", "at position 0: (? other than (?: is not supported"},
      {"(a)\\1", "at position 3: \\1 is not supported"},
      {"\\bgemm", "at position 0: \\b is not supported"},
      {"\\pL", "at position 0: \\p is not supported"},
      {"\\x4", "at position 0: \\x needs two hex digits"},
      {"abc\\", "at position 3: \\ at the end of the pattern"},
      {"*a", "at position 0: nothing to repeat before *"},
      {"a|+", "at position 2: nothing to repeat before +"},
      {"(|?)", "at position 2: nothing to repeat before ?"},
      {"{2}", "at position 0: nothing to repeat before {"},
      {"a**", "at position 2: a quantifier cannot follow another"},
      {"a{2}{3}", "at position 4: a quantifier cannot follow another"},
      {"a*??", "at position 3: a quantifier cannot follow another"},
      {"^*", "at position 1: nothing to repeat (^ and $ take no quantifier)"},
      {"a{", "at position 1: expected {n}, {n,} or {n,m}"},
      {"a{,5}", "at position 1: expected {n}, {n,} or {n,m}"},
      {"a{x}", "at position 1: expected {n}, {n,} or {n,m}"},
      {"a{2,1}", "at position 1: invalid repetition {2,1}"},
      {"a{1001}", "at position 1: repetition count above 1000"},
      {"a{1,99999999999}", "at position 1: repetition count above 1000"},
      {"[a", "at position 0: missing ] for this ["},
      {"x[]", "at position 2: ] first in a class"},
      {"[^]a]", "at position 2: ] first in a class"},
      {"[z-a]", "at position 1: invalid range z-a"},
      {"[\\d-z]", "at position 1: a range cannot begin or end with a class like \\d"},
      {"[[:alpha:]]", "at position 1: [ in a class"},
      {"(a{1000}){1000}", "at position 9: the pattern is too large (more than 100000 states)"},
  };
  for (const auto& [source, message] : cases) {
    EXPECT_EQ(refusal(source).rfind(message, 0), 0u) << source << " -> " << refusal(source);
  }
}

TEST(NamePattern, LimitsOfNestingAndSize) {
  const auto nested = [](size_t depth) { return std::string(depth, '(') + "a" + std::string(depth, ')'); };
  EXPECT_TRUE(NamePattern(nested(NamePattern::kMaxNesting)).search("xay"));
  EXPECT_EQ(refusal(nested(NamePattern::kMaxNesting + 1)), "at position 100: groups nested more than 100 deep");
  EXPECT_EQ(refusal(nested(100000)), "at position 100: groups nested more than 100 deep");

  EXPECT_TRUE(NamePattern("^a{1000}$").search(std::string(1000, 'a')));
  EXPECT_FALSE(NamePattern("^a{1000}$").search(std::string(999, 'a')));
  EXPECT_LE(NamePattern("(a{10}){1000}").states(), NamePattern::kMaxStates);
  const std::string tooLarge = refusal(std::string(NamePattern::kMaxStates, 'a'));
  EXPECT_EQ(tooLarge.rfind("at position 0: the pattern is too large", 0), 0u) << tooLarge;
}

// The pattern's verdicts on names of a million bytes, computed on a thread
// with a 256 KiB stack: an engine that recursed once per byte of the name
// would overflow it.
struct LongNames {
  std::vector<std::pair<std::string, bool>> verdicts;  // pattern source, verdict
  double seconds = 0;
};

void* searchLongNames(void* argument) {
  auto& result = *static_cast<LongNames*>(argument);
  const std::string as(1000000, 'a');
  const std::string asThenB = as + "b";
  const auto start = std::chrono::steady_clock::now();
  for (const char* source : {"a.*b", "(a|aa)*b"}) {
    const NamePattern pattern(source);
    result.verdicts.emplace_back(std::string(source) + " on a...a", pattern.search(as));
    result.verdicts.emplace_back(std::string(source) + " on a...ab", pattern.search(asThenB));
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return nullptr;
}

TEST(NamePattern, MillionByteNamesOnASmallStackInLinearTime) {
  LongNames result;
  pthread_attr_t attributes;
  ASSERT_EQ(pthread_attr_init(&attributes), 0);
  ASSERT_EQ(pthread_attr_setstacksize(&attributes, 256 * 1024), 0);
  pthread_t thread;
  ASSERT_EQ(pthread_create(&thread, &attributes, searchLongNames, &result), 0);
  ASSERT_EQ(pthread_join(thread, nullptr), 0);
  pthread_attr_destroy(&attributes);

  const std::vector<std::pair<std::string, bool>> expected = {
      {"a.*b on a...a", false}, {"a.*b on a...ab", true}, {"(a|aa)*b on a...a", false}, {"(a|aa)*b on a...ab", true}};
  EXPECT_EQ(result.verdicts, expected);
  // Linear: four searches of 10^6 bytes through programs of a few states
  // take seconds even in a Debug sanitizer build; time quadratic in the
  // name would be hours.
  EXPECT_LT(result.seconds, 120.0);
}

// KCAP_INCLUDE and KCAP_EXCLUDE are NamePatterns: what they refuse is an
// OptionError naming the variable, the value and the position.
TEST(NamePattern, CaptureOptionsFiltersUseIt) {
  const auto read = [](const char* variable, const char* value) {
    return readCaptureOptions([&](const char* name) -> const char* {
      if (std::strcmp(name, "KCAP_OUTPUT") == 0) {
        return "t.kcap";
      }
      return std::strcmp(name, variable) == 0 ? value : nullptr;
    });
  };
  try {
    read("KCAP_INCLUDE", "gemm(?=_sm90)");
    ADD_FAILURE() << "lookahead accepted";
  } catch (const OptionError& e) {
    EXPECT_EQ(e.variable(), "KCAP_INCLUDE");
    const std::string expected = "not a valid regular expression (at position 4: (? other than (?: is not supported";
    EXPECT_EQ(e.reason().rfind(expected, 0), 0u) << e.reason();
  }
  const auto options = read("KCAP_EXCLUDE", "^(?:nccl|cub)\\w*$");
  ASSERT_TRUE(options);
  EXPECT_FALSE(options->selects("ncclKernel_AllReduce_Sum"));
  EXPECT_TRUE(options->selects("ncclKernel<float>"));  // not \w* to the end
  EXPECT_TRUE(options->selects(kCutlass));
  const std::string huge = "nccl" + std::string(1000000, 'x');
  EXPECT_FALSE(options->selects(huge));
}

}  // namespace
}  // namespace kcap
