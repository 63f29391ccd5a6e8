#include "errors.h"

namespace kcap::format {

std::string describeAt(const std::string& path, uint64_t offset, const std::string& what) {
  return path + ": at byte " + std::to_string(offset) + ": " + what;
}

}  // namespace kcap::format
