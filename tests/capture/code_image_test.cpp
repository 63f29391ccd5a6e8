// Code images: the real fatbins, cubins and PTX of kernels/ (built by nvcc),
// handed over as a loader gets them (a pointer, no size).
#include "code_image.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace kcap::image {
namespace {

#ifdef KCAP_KERNELS_DIR
std::vector<uint8_t> kernelFile(const std::string& name) {
  const std::string path = std::string(KCAP_KERNELS_DIR) + "/" + name;
  std::vector<uint8_t> bytes;
  if (std::FILE* in = std::fopen(path.c_str(), "rb")) {
    uint8_t chunk[4096];
    size_t n = 0;
    while ((n = std::fread(chunk, 1, sizeof chunk, in)) > 0) {
      bytes.insert(bytes.end(), chunk, chunk + n);
    }
    std::fclose(in);
  }
  EXPECT_FALSE(bytes.empty()) << path;
  return bytes;
}
#define NEED_KERNELS()
#else
std::vector<uint8_t> kernelFile(const std::string&) { return {}; }
#define NEED_KERNELS() GTEST_SKIP() << "kernels/ is not built (KCAP_BUILD_KERNELS=OFF)"
#endif

std::vector<uint8_t> asVector(Bytes bytes) { return {bytes.begin(), bytes.end()}; }

// cudart's __fatDeviceText.
struct Wrapper {
  uint32_t magic;
  uint32_t version;
  const void* fatbin;
  const void* extra;
};

TEST(CodeImage, FatbinCubinAndPtxExtents) {
  NEED_KERNELS();
  const auto fatbin = kernelFile("constant.fatbin");
  const auto found = identify(fatbin.data());
  ASSERT_TRUE(found);
  EXPECT_EQ(found->kind, Kind::kFatbin);
  EXPECT_EQ(asVector(found->bytes), fatbin);

  const auto cubin = kernelFile("reduce.sm_90.cubin");
  const auto elf = identify(cubin.data());
  ASSERT_TRUE(elf);
  EXPECT_EQ(elf->kind, Kind::kCubin);
  EXPECT_EQ(asVector(elf->bytes), cubin);
  EXPECT_EQ(elfSize(cubin.data()), cubin.size());

  auto ptx = kernelFile("axpy.ptx");
  ptx.push_back(0);
  const auto text = identify(ptx.data());
  ASSERT_TRUE(text);
  EXPECT_EQ(text->kind, Kind::kPtx);
  EXPECT_EQ(asVector(text->bytes), ptx);  // with its terminator
}

TEST(CodeImage, FatbinWrappersResolveToTheirFatbins) {
  NEED_KERNELS();
  const auto constant = kernelFile("constant.fatbin");
  const auto axpy = kernelFile("axpy.fatbin");
  const auto reduce = kernelFile("reduce.fatbin");
  const Wrapper plain{kFatbinWrapperMagic, 1, constant.data(), nullptr};
  const auto one = identify(&plain);
  ASSERT_TRUE(one);
  EXPECT_EQ(one->kind, Kind::kFatbinWrapper);
  EXPECT_EQ(asVector(one->bytes), constant);
  EXPECT_TRUE(one->extra.empty());

  const void* extra[] = {axpy.data(), reduce.data(), nullptr};
  const Wrapper rdc{kFatbinWrapperMagic, 2, constant.data(), extra};
  const auto two = identify(&rdc);
  ASSERT_TRUE(two);
  ASSERT_EQ(two->extra.size(), 2u);
  EXPECT_EQ(asVector(two->extra[0]), axpy);
  EXPECT_EQ(asVector(two->extra[1]), reduce);

  const Wrapper broken{kFatbinWrapperMagic, 1, "not a fatbin", nullptr};
  EXPECT_FALSE(identify(&broken));
}

TEST(CodeImage, FatbinEntriesAndCompressedPtx) {
  NEED_KERNELS();
  const auto fatbin = kernelFile("constant.fatbin");
  const auto entries = fatbinEntries(Bytes(fatbin));
  ASSERT_EQ(entries.size(), 3u);  // compute_80 PTX, sm_80 and sm_90 SASS
  std::vector<uint32_t> arches;
  for (const FatbinEntry& entry : entries) {
    arches.push_back(entry.arch);
    const auto contents = entryContents(entry);
    ASSERT_TRUE(contents) << "entry for sm_" << entry.arch;
    if (entry.kind == 2) {
      EXPECT_EQ(std::memcmp(contents->data(),
                            "\x7f"
                            "ELF",
                            4),
                0);
    } else {
      EXPECT_TRUE(entry.compressed());  // CUDA 13 compresses PTX
      const std::string text(contents->begin(), contents->end());
      EXPECT_NE(text.find(".const .align 4 .b8 coeffs[64];"), std::string::npos);
    }
  }
  std::sort(arches.begin(), arches.end());
  EXPECT_EQ(arches, (std::vector<uint32_t>{80, 80, 90}));
}

TEST(CodeImage, GlobalNamesFromEveryKindOfImage) {
  NEED_KERNELS();
  const std::vector<std::string> expected = {"call_count", "coeffs"};
  const auto fatbin = kernelFile("constant.fatbin");
  EXPECT_EQ(globalNames(*identify(fatbin.data())), expected);
  const auto cubin = kernelFile("constant.sm_90.cubin");
  EXPECT_EQ(globalNames(*identify(cubin.data())), expected);  // local symbols in a whole-program build
  auto ptx = kernelFile("constant.ptx");
  ptx.push_back(0);
  EXPECT_EQ(globalNames(*identify(ptx.data())), expected);
  const Wrapper wrapper{kFatbinWrapperMagic, 1, fatbin.data(), nullptr};
  EXPECT_EQ(globalNames(*identify(&wrapper)), expected);
  const auto axpy = kernelFile("axpy.fatbin");
  EXPECT_TRUE(globalNames(*identify(axpy.data())).empty());
  // The extra fatbins of a relocatable-device-code wrapper count too.
  const void* extra[] = {fatbin.data(), nullptr};
  const Wrapper rdc{kFatbinWrapperMagic, 2, axpy.data(), extra};
  EXPECT_EQ(globalNames(*identify(&rdc)), expected);
}

TEST(CodeImage, PtxDeclarations) {
  const std::string ptx =
      ".version 8.0\n.target sm_80\n.address_size 64\n"
      ".visible .global .align 8 .u64 table[4] = {1, 2, 3, 4};\n"
      "\t.const .align 4 .f32 scale;\n"
      ".extern .global .align 4 .u32 elsewhere;\n"
      ".visible .entry k(.param .u64 p) {\n\tld.global.f32 %f1, [%rd1];\n\tret;\n}\n";
  EXPECT_EQ(ptxGlobalNames(ptx), (std::vector<std::string>{"scale", "table"}));
}

TEST(CodeImage, BuffersOfKnownSizeAreNeverOverrun) {
  NEED_KERNELS();
  auto fatbin = kernelFile("axpy.fatbin");
  // A file cut short: the declared size is beyond the buffer.
  const std::vector<uint8_t> cut(fatbin.begin(), fatbin.begin() + 100);
  const auto found = identify(Bytes(cut));
  ASSERT_TRUE(found);
  EXPECT_EQ(found->kind, Kind::kFatbin);
  EXPECT_EQ(found->bytes.size(), cut.size());
  EXPECT_LE(fatbinEntries(Bytes(cut)).size(), 1u);
  for (size_t size : {0u, 10u, 64u, 200u}) {
    const std::vector<uint8_t> part(fatbin.begin(), fatbin.begin() + static_cast<long>(size));
    const auto names = globalNames(Image{Kind::kFatbin, Bytes(part), {}});
    EXPECT_TRUE(names.empty());
  }
  const auto cubin = kernelFile("constant.sm_90.cubin");
  for (size_t size : {0u, 63u, 64u, 1000u, 4000u}) {
    EXPECT_TRUE(elfGlobalNames(Bytes(cubin.data(), size)).empty()) << size;
  }
  EXPECT_FALSE(identify(Bytes()).has_value());
}

}  // namespace
}  // namespace kcap::image
