// `kcap info` on the committed compatibility trace (tests/data/compat-v1.kcap):
// its storage figures, read from the file's chunks, pinned in the JSON and
// in the text a user reads.
#include "process_runner.h"

#include <gtest/gtest.h>

#include <string>

namespace kcap_test {
namespace {

const std::string kCompat = std::string(KCAP_TEST_DATA_DIR) + "/compat-v1.kcap";

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(Info, StorageFiguresOfTheCompatibilityTrace) {
  const Outcome json = kcapOnDouble({"info", "--json", kCompat});
  ASSERT_EQ(json.exitCode, 0) << json.describe();
  for (const char* part : {"\"raw\":83848", "\"launch\":36932", "\"launchEnd\":18436", "\"memcpy\":10304",
                           "\"moduleLoad\":18176", "\"unique\":46920", "\"stored\":23011", "\"savedByDedup\":36928",
                           "\"records\":{\"raw\":8464,\"stored\":2740}", "\"blobs\":17", "\"records\":3"}) {
    EXPECT_TRUE(has(json.out, part)) << part << "\n" << json.out;
  }
  const Outcome text = kcapOnDouble({"info", kCompat});
  ASSERT_EQ(text.exitCode, 0) << text.describe();
  for (const char* line :
       {"Content referenced (raw)  81.9 KiB  83,848 bytes", "Unique (blob pieces)      45.8 KiB  17 blobs",
        "Stored (compressed)       22.5 KiB  23,011 bytes", "Compression ratio            2.04x",
        "Saved by dedup            36.1 KiB  raw - unique", "Records (raw)             8.27 KiB  3 record chunks"}) {
    EXPECT_TRUE(has(text.out, line)) << line << "\n" << text.out;
  }
}

}  // namespace
}  // namespace kcap_test
