// Addresses in replay's messages.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace kcap::replay {

// "0x7f00": an address as replay's messages print it.
inline std::string hexText(uint64_t value) {
  char text[24];
  std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(value));
  return text;
}

}  // namespace kcap::replay
