// What the `kcap replay` tests (replay_cli_test.cpp, replay_sequence_test.cpp,
// replay_checks_test.cpp) share: the exit codes, recording with the shim,
// replay against the driver double, reading its table and JSON, and the
// suite of traces recorded once for them.
#pragma once

#include "process_runner.h"
#include "recorded_traces.h"

#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <string>
#include <vector>

namespace kcap_test::replay_cli {

inline constexpr int kExitOk = 0, kExitTrace = 1, kExitUsage = 2, kExitDiffers = 3, kExitFault = 4;

inline std::string replayProgram() { return KCAP_TEST_REPLAY_PROGRAM; }

inline size_t occurrences(const std::string& text, const std::string& what) {
  size_t count = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) {
    ++count;
  }
  return count;
}

// The shim with KCAP_OUTPUT, for programs that end badly.
inline Outcome recordWithShim(const std::string& path, const std::string& program, const std::vector<std::string>& args,
                              std::map<std::string, std::string> env = {}) {
  env["KCAP_OUTPUT"] = path;
  return kcap_test::run({program, args, std::move(env), true});
}

inline Outcome replay(const std::vector<std::string>& args, std::map<std::string, std::string> env = {}) {
  std::vector<std::string> all = {"replay"};
  all.insert(all.end(), args.begin(), args.end());
  return kcapOnDouble(all, std::move(env));
}

// The table row of launch N: the line starting with its index.
inline std::string row(const std::string& out, uint64_t launch) {
  const std::regex pattern("(^|\n)( *" + std::to_string(launch) + "  [^\n]*)");
  std::smatch match;
  return std::regex_search(out, match, pattern) ? match[2].str() : std::string();
}

// The JSON object of launch N in --json output (launches are objects in an
// array; buffers are nested objects without further nesting of launches).
inline std::string jsonLaunch(const std::string& json, uint64_t launch) {
  const std::string key = "{\"launchIndex\":" + std::to_string(launch) + ",";
  const size_t start = json.find(key);
  if (start == std::string::npos) {
    return {};
  }
  int depth = 0;
  bool inString = false;
  for (size_t i = start; i < json.size(); ++i) {
    const char c = json[i];
    if (inString) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        inString = false;
      }
    } else if (c == '"') {
      inString = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (--depth == 0) {
        return json.substr(start, i + 1 - start);
      }
    }
  }
  return {};
}

// A structural check of a JSON document: brackets balance outside strings,
// strings close, nothing follows the top-level value but a newline.
inline bool balancedJson(const std::string& json) {
  std::vector<char> stack;
  bool inString = false;
  size_t end = 0;
  for (size_t i = 0; i < json.size(); ++i) {
    const char c = json[i];
    if (inString) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        inString = false;
      } else if (static_cast<unsigned char>(c) < 0x20) {
        return false;  // control characters must be escaped
      }
      continue;
    }
    if (c == '"') {
      inString = true;
    } else if (c == '{' || c == '[') {
      stack.push_back(c == '{' ? '}' : ']');
    } else if (c == '}' || c == ']') {
      if (stack.empty() || stack.back() != c) {
        return false;
      }
      stack.pop_back();
      if (stack.empty()) {
        end = i + 1;
        break;
      }
    }
  }
  return !inString && stack.empty() && end != 0 && json.substr(end) == "\n" && json[0] == '{';
}

class Replay : public RecordedTraces<Replay> {
 protected:
  static std::string sequence() { return scenario("sequence"); }
  static std::string pdl() { return scenario("pdl"); }
  static std::string pitched() { return scenario("pitched"); }
  static std::string volume() { return scenario("volume"); }
  static std::string changedAxpy() { return kernelFile("axpy_changed.fatbin"); }
};

inline const std::vector<std::string> kDirectKernels = {"axpy",       "axpy",         "axpy",
                                                        "reduce_sum", "scale_struct", "poly_eval"};

// The double's "device memory" is host memory of the recording process. Under
// AddressSanitizer that is ASan's heap, whose addresses the replay process's
// own ASan allocator holds: the double refuses them, so replay relocates and
// must say why. In an ordinary build they are free and kept.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kRecordedAddressesFree = false;
#else
inline constexpr bool kRecordedAddressesFree = true;
#endif
inline const std::string kMemoryColumn = kRecordedAddressesFree ? "fixed-va" : "relocated";

inline void expectRecordedAddressPath(const std::string& launchJson) {
  if (kRecordedAddressesFree) {
    EXPECT_NE(launchJson.find("\"memory\":\"fixed-va\""), std::string::npos) << launchJson;
  } else {
    // ("fixed-va+relocated" when some regions were mmap'd by the double,
    // as VMM mappings are, and so kept.)
    EXPECT_TRUE(launchJson.find("\"memory\":\"relocated\"") != std::string::npos ||
                launchJson.find("\"memory\":\"fixed-va+relocated\"") != std::string::npos)
        << launchJson;
    EXPECT_NE(launchJson.find("\"detail\":\"recorded addresses not granted: cuMemAddressReserve("), std::string::npos)
        << launchJson;
  }
}

}  // namespace kcap_test::replay_cli
