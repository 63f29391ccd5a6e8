// What the replay-time checkers (checkers.h) share: the ranges a launch
// outputs, labelled as the reports name them; one replay from the recorded
// pre-state; byte differences counted. Each checker lives in a file of its
// own (check_*.cpp) and is listed in checkers.cpp's table.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "checkers.h"
#include "hex_text.h"

namespace kcap::replay::checks {

// The checkers, in the order checkers() lists them.
CheckFinding determinism(CheckTarget& t);  // check_determinism.cpp
CheckFinding unwritten(CheckTarget& t);    // check_unwritten.cpp
CheckFinding uninit(CheckTarget& t);       // check_uninit.cpp
CheckFinding alias(CheckTarget& t);        // check_alias.cpp
CheckFinding overrun(CheckTarget& t);      // check_overrun.cpp

// Which parameter a pointer word belongs to (index in the parameter layout).
std::optional<uint32_t> paramIndexOf(schema::Launch::Reader e, uint32_t wordOffset);
// "param 2 (0x7f00, 4096 bytes)", or "buffer (...)" when no pointer parameter points into it.
std::string rangeText(schema::Launch::Reader e, uint64_t address, uint64_t size);

struct Range {
  uint64_t address = 0, size = 0;
  std::string label;
};

// Device ranges of the recorded post-state (module globals too: they are outputs).
std::vector<Range> outputRanges(CheckTarget& t);
std::vector<std::vector<uint8_t>> readAll(CheckTarget& t, const std::vector<Range>& ranges);
// One replay from the recorded pre-state, `before` run just before the
// launch; the outputs it left.
std::vector<std::vector<uint8_t>> replayOnce(CheckTarget& t, const std::vector<Range>& ranges,
                                             const std::function<void()>& before = {});

// Recorded addresses of stored pointer words: never poisoned (the kernel
// would follow a poisoned pointer anywhere).
bool inPointerWord(schema::Launch::Reader e, uint64_t address);
// False, with `f` marked not run, when the trace holds no post-state of the launch.
bool hasPostState(CheckTarget& t, CheckFinding& f);

// Differing bytes of a range: how many, and the first.
struct Diff {
  uint64_t bytes = 0;
  std::optional<uint64_t> first;
  void add(uint64_t offset) {
    ++bytes;
    if (!first) first = offset;
  }
};
// "param 2 (...): 12 bytes WHAT, first at offset 40"
std::string diffText(const Range& r, const Diff& d, const char* what);

}  // namespace kcap::replay::checks
