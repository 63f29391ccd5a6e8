// cache_prefetch.h: the write prefetch is the instruction the CPU has.
#include "cache_prefetch.h"

#include <gtest/gtest.h>

#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace kcap {
namespace {

#if defined(__x86_64__) && defined(__linux__)
// The kernel's name for CPUID 0x80000001 ECX bit 8, on the first "flags"
// line; nothing when /proc/cpuinfo cannot be read.
std::optional<bool> cpuinfoHasPrefetchW() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  if (!cpuinfo) return std::nullopt;
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line);
    std::string word;
    while (words >> word) {
      if (word == "3dnowprefetch") return true;
    }
    return false;
  }
  return false;
}

TEST(CachePrefetch, WritePrefetchFollowsTheCpuFlag) {
  const std::optional<bool> flag = cpuinfoHasPrefetchW();
  if (!flag) GTEST_SKIP() << "no /proc/cpuinfo to compare with";
  EXPECT_EQ(detail::kHasPrefetchW, *flag);
}
#endif

TEST(CachePrefetch, PrefetchingARangeLeavesItsBytes) {
  // Every line of a range that starts and ends mid-line, and the line past it.
  std::vector<uint8_t> bytes(1000);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 7);
  prefetchForWrite(bytes.data() + 3, bytes.size() - 10);
  prefetchLineForWrite(bytes.data() + bytes.size() - 1);
  for (size_t i = 0; i < bytes.size(); ++i) ASSERT_EQ(bytes[i], static_cast<uint8_t>(i * 7)) << i;
}

}  // namespace
}  // namespace kcap
