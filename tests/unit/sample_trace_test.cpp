// The sample trace generator itself: every event type, real images, repeated
// snapshots that dedup, deterministic bytes, memory that obeys the kernels.
#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "sample_trace.h"
#include "trace_files.h"
#include "trace_reader.h"

namespace kcap::test {
namespace {

using schema::Event;

std::vector<float> asFloats(const std::vector<uint8_t>& bytes) {
  std::vector<float> out(bytes.size() / 4);
  std::memcpy(out.data(), bytes.data(), out.size() * 4);
  return out;
}

TEST(SampleTrace, HoldsEveryEventTypeAndReadsCleanly) {
  TempDir dir;
  const auto path = dir.file("sample.kcap");
  SampleOptions options;
  writeSampleTrace(path, options);
  auto reader = format::TraceReader::open(path);
  EXPECT_TRUE(reader->indexed());
  EXPECT_FALSE(reader->torn());
  EXPECT_TRUE(reader->problems().empty());
  EXPECT_LT(reader->fileSize(), 300u << 10);

  std::set<Event::Which> kinds;
  uint64_t referencedBytes = 0, count = 0;
  reader->forEachEvent([&](const format::EventRef& ref) {
    EXPECT_EQ(ref.event.getSeq(), count++);
    kinds.insert(ref.event.which());
    forEachContent(ref.event, [&](schema::Content::Reader c) {
      referencedBytes += c.getSize();
      EXPECT_EQ(reader->readContent(c).size(), c.getSize());
    });
    return true;
  });
  EXPECT_EQ(count, sampleEventCount(options));
  EXPECT_EQ(kinds.size(), static_cast<size_t>(Event::MESSAGE) + 1) << "every union member";

  uint64_t blobRaw = 0;
  size_t blobs = 0, records = 0;
  for (const auto& c : reader->chunks()) {
    EXPECT_EQ(reader->verifyChunk(c), "") << c.offset;
    if (c.kind == format::ChunkKind::kBlob) {
      blobRaw += c.rawSize;
      ++blobs;
      EXPECT_LE(c.rawSize, options.pieceSize);
    } else {
      ++records;
    }
  }
  EXPECT_GT(blobs, 5u);
  EXPECT_GT(records, 2u);
  EXPECT_LT(blobRaw, referencedBytes) << "repeated snapshots should be stored once";
}

TEST(SampleTrace, AxpyMemoryIsConsistentAndSnapshotsDedup) {
  TempDir dir;
  const auto path = dir.file("sample.kcap");
  SampleOptions options;
  options.axpyLaunches = 3;
  writeSampleTrace(path, options);
  auto events = readAllEvents(path);
  auto reader = format::TraceReader::open(path);
  std::vector<uint8_t> xCopied;
  std::vector<std::vector<uint8_t>> yPre, yPost, xPre;
  for (const auto& owned : events) {
    auto e = owned.get();
    if (e.isMemcpy() && e.getMemcpy().getDst() == kSampleX) xCopied = reader->readContent(e.getMemcpy().getData());
    if (e.isLaunch() && e.getLaunch().getKernelName() == "axpy" && !e.getLaunch().getCapturing()) {
      auto pre = e.getLaunch().getPre();
      ASSERT_EQ(pre.size(), 2u);
      EXPECT_EQ(pre[0].getAddress(), kSampleX);
      xPre.push_back(reader->readContent(pre[0].getContent()));
      yPre.push_back(reader->readContent(pre[1].getContent()));
      EXPECT_EQ(e.getLaunch().getGridX(), (options.elements + kSampleBlock - 1) / kSampleBlock);
    }
    if (e.isLaunchEnd() && yPost.size() < yPre.size()) {
      yPost.push_back(reader->readContent(e.getLaunchEnd().getPost()[0].getContent()));
    }
  }
  ASSERT_EQ(yPre.size(), 3u);
  ASSERT_EQ(yPost.size(), 3u);
  ASSERT_EQ(xCopied.size(), options.elements * 4u);
  for (size_t k = 0; k < 3; ++k) {
    EXPECT_EQ(xPre[k], xCopied);
    if (k > 0) {
      EXPECT_EQ(yPre[k], yPost[k - 1]);
    }
    auto x = asFloats(xPre[k]), y0 = asFloats(yPre[k]), y1 = asFloats(yPost[k]);
    for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(y1[i], kSampleAlpha * x[i] + y0[i]) << "launch " << k << " i " << i;
  }
  EXPECT_EQ(yPre[0], std::vector<uint8_t>(options.elements * 4u, 0));
}

TEST(SampleTrace, EmbedsTheRealKernelImages) {
  if (!haveKernelImages()) GTEST_SKIP() << "built without kernels/";
  TempDir dir;
  const auto path = dir.file("sample.kcap");
  writeSampleTrace(path, SampleOptions{});
  auto reader = format::TraceReader::open(path);
  std::vector<std::vector<uint8_t>> images;
  reader->forEachEvent([&](const format::EventRef& ref) {
    if (ref.event.isModuleLoad()) images.push_back(reader->readContent(ref.event.getModuleLoad().getImage()));
    return true;
  });
  ASSERT_EQ(images.size(), 2u);
  EXPECT_EQ(images[0], readFileBytes(defaultKernelsDir() + "/axpy.fatbin"));
  EXPECT_EQ(images[1], readFileBytes(defaultKernelsDir() + "/constant.fatbin"));
  uint32_t magic = 0;
  std::memcpy(&magic, images[0].data(), 4);
  EXPECT_EQ(magic, 0xBA55ED50u);
}

TEST(SampleTrace, IsDeterministic) {
  TempDir dir;
  SampleOptions options;
  options.realImages = false;
  writeSampleTrace(dir.file("a.kcap"), options);
  writeSampleTrace(dir.file("b.kcap"), options);
  options.seed = 2;
  writeSampleTrace(dir.file("c.kcap"), options);
  EXPECT_EQ(readFileBytes(dir.file("a.kcap")), readFileBytes(dir.file("b.kcap")));
  EXPECT_NE(readFileBytes(dir.file("a.kcap")), readFileBytes(dir.file("c.kcap")));
}

TEST(SampleTrace, NotOrderlyLeavesNoIndexAndNoTraceEnd) {
  TempDir dir;
  const auto path = dir.file("killed.kcap");
  SampleOptions options;
  options.realImages = false;
  options.orderly = false;
  writeSampleTrace(path, options);
  auto reader = format::TraceReader::open(path);
  EXPECT_FALSE(reader->indexed());
  EXPECT_FALSE(reader->torn());
  bool sawEnd = false;
  uint64_t n = reader->forEachEvent([&](const format::EventRef& ref) {
    sawEnd |= ref.event.isTraceEnd();
    return true;
  });
  EXPECT_FALSE(sawEnd);
  EXPECT_EQ(n, sampleEventCount(options));
}

}  // namespace
}  // namespace kcap::test
