// The versions of loaded CUDA libraries, as traceBegin lists them: asked of
// the library itself, and only of one the process has loaded.
#include "library_versions.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

namespace kcap {
namespace {

const std::string* find(const LibraryVersions& v, const std::string& name) {
  const auto it =
      std::find_if(v.libraries.begin(), v.libraries.end(), [&](const auto& kv) { return kv.first == name; });
  return it != v.libraries.end() ? &it->second : nullptr;
}

TEST(LibraryVersions, VersionCodesAsText) {
  EXPECT_EQ(versionText(22703), "2.27.3");      // NCCL from 2.9
  EXPECT_EQ(versionText(2708, true), "2.7.8");  // NCCL before 2.9
  EXPECT_EQ(versionText(91000), "9.10.0");      // cuDNN 9
  EXPECT_EQ(versionText(8907, true), "8.9.7");  // cuDNN 8
  EXPECT_EQ(versionText(130100), "13.1.0");     // cuBLASLt
  EXPECT_EQ(versionText(0), "");
  EXPECT_EQ(versionText(-1), "");
}

// A library is listed once it is loaded, never loaded to be listed.
TEST(LibraryVersions, ListsALoadedLibraryByItsOwnAnswer) {
  EXPECT_EQ(find(loadedLibraryVersions(), "nccl"), nullptr) << "listed before it was loaded";
  void* nccl = dlopen(KCAP_TEST_FAKE_NCCL, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(nccl, nullptr) << dlerror();
  const LibraryVersions loaded = loadedLibraryVersions();
  const std::string* version = find(loaded, "nccl");
  ASSERT_NE(version, nullptr);
  EXPECT_EQ(*version, "2.27.3");
  dlclose(nccl);
  EXPECT_EQ(find(loadedLibraryVersions(), "nccl"), nullptr) << "still listed once unloaded";
}

}  // namespace
}  // namespace kcap
