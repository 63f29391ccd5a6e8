// The one exception type of the trace library. Messages name the file and,
// where there is one, the byte offset of the problem.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace kcap::format {

class FormatError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// "PATH: at byte OFFSET: WHAT"
std::string describeAt(const std::string& path, uint64_t offset, const std::string& what);

}  // namespace kcap::format
