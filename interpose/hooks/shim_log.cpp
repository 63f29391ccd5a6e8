#include "hooks/shim_log.h"

#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace kcap {

void logMessage(const char* format, ...) noexcept {
  char line[512] = "kcap: ";
  const std::size_t prefix = std::strlen(line);
  va_list args;
  va_start(args, format);
  const int n = std::vsnprintf(line + prefix, sizeof line - prefix - 1, format, args);
  va_end(args);
  if (n < 0) {
    return;
  }
  std::size_t length = prefix + static_cast<std::size_t>(n);
  if (length > sizeof line - 2) {
    length = sizeof line - 2;  // truncated
  }
  line[length++] = '\n';
  // One write so that concurrent lines do not interleave; nothing useful to
  // do if stderr is gone.
  [[maybe_unused]] const ssize_t written = ::write(STDERR_FILENO, line, length);
}

bool debugLogging() noexcept {
  // Read at first use: the shim may be entered before its constructors.
  static const bool enabled = [] {
    const char* value = std::getenv("KCAP_DEBUG");
    return value != nullptr && value[0] != '\0' && value[0] != '0';
  }();
  return enabled;
}

}  // namespace kcap
