// The shim's only output channel: one line on stderr, prefixed "kcap: ".
//
// The shim lives inside someone else's process, so it says little: internal
// failures are reported once (KCAP_LOG_ONCE) and never repeated per call.
// Writing uses a single write(2) of a stack buffer: no stdio locks, no
// allocation, usable from any thread at any time (including before the
// shim's constructors and during exit).
#pragma once

#include <atomic>

namespace kcap {

[[gnu::format(printf, 1, 2)]] void logMessage(const char* format, ...) noexcept;

// KCAP_DEBUG=1: also report observations that are not failures (how the
// driver answered lookups), for checking the shim on a new driver.
bool debugLogging() noexcept;

}  // namespace kcap

// Logs the first time this statement runs, never again.
#define KCAP_LOG_ONCE(...)                                                                        \
  do {                                                                                            \
    static std::atomic<bool> kcap_logged_{false};                                                 \
    if (!kcap_logged_.exchange(true, std::memory_order_relaxed)) ::kcap::logMessage(__VA_ARGS__); \
  } while (0)

// The same, only with KCAP_DEBUG=1.
#define KCAP_DEBUG_ONCE(...)                                \
  do {                                                      \
    if (::kcap::debugLogging()) KCAP_LOG_ONCE(__VA_ARGS__); \
  } while (0)
