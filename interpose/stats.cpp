#include "stats.h"

#include "function_registry.h"
#include "shim_log.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace kcap {

namespace detail {
std::atomic<std::uint64_t> g_call_counts[kHookCount] = {};
std::atomic<int> g_counting{kUndecided};

int decide_counting() noexcept
{
    const char* path = std::getenv("KCAP_STATS_FILE");
    const int state = path != nullptr && path[0] != '\0' ? kOn : kOff;
    g_counting.store(state, std::memory_order_relaxed);
    return state;
}
}  // namespace detail

std::uint64_t call_count(HookId id) noexcept
{
    return detail::g_call_counts[slot_of(id)].load(std::memory_order_relaxed);
}

namespace {

void write_stats(const char* path)
{
    std::FILE* out = std::fopen(path, "w");
    if (out == nullptr) {
        log_message("cannot write KCAP_STATS_FILE %s: %s", path, std::strerror(errno));
        return;
    }
    std::fprintf(out, "kcap-stats 1\n");
    for (std::size_t i = 0; i < kHookCount; ++i) {
        const auto id = static_cast<HookId>(i);
        if (const std::uint64_t calls = call_count(id)) {
            std::fprintf(out, "call %s %llu\n", spec(id).symbol.data(),
                         static_cast<unsigned long long>(calls));
        }
    }
    for (const auto& [name, launches] : FunctionRegistry::instance().launch_counts()) {
        std::fprintf(out, "kernel %s %llu\n", name.c_str(), static_cast<unsigned long long>(launches));
    }
    if (std::fclose(out) != 0) {
        log_message("cannot write KCAP_STATS_FILE %s: %s", path, std::strerror(errno));
    }
}

// Runs when the shim is unloaded at exit, after the program's own exit
// handlers. Threads the program left running may still be counting.
[[gnu::destructor]] void write_stats_at_exit() noexcept
{
    const char* path = std::getenv("KCAP_STATS_FILE");
    if (!counting() || path == nullptr || path[0] == '\0') {
        return;
    }
    try {
        write_stats(path);
    } catch (...) {
        log_message("cannot write KCAP_STATS_FILE %s: out of memory", path);
    }
}

}  // namespace
}  // namespace kcap
