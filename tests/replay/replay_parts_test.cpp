// replay/'s pure parts besides comparison, without a driver: reservation
// groups and the address map (memory_plan.h), the outcome encoding between
// processes (outcome.h), which code of the real images of kernels/ runs on a
// given GPU (image_choice.h), which launches a sequence submits back to back,
// which encode made a tensor map, and the rows of a recorded 2D or 3D copy
// (trace_model.h). Last, the driver double has every function replay looks
// up (driver.h's lists), so the end-to-end tests exercise all of them.
#include "compare.h"
#include "driver.h"
#include "image_choice.h"
#include "memory_plan.h"
#include "outcome.h"
#include "replayer.h"
#include "trace_model.h"
#include "trace_reader.h"
#include "trace_writer.h"
#include "process_runner.h"
#include "trace_files.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <capnp/message.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace {

using namespace kcap::replay;

// ---- memory plan ------------------------------------------------------------------------------

constexpr uint64_t kGranule = 0x1000;

TEST(MemoryPlan, OverlappingRegionsShareAGroup) {
  const auto groups = planGroups({{0x10400, 0x800}, {0x10000, 0x800}, {0x10000, 0x800}}, kGranule);
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0].start, 0x10000u);
  EXPECT_EQ(groups[0].size, 0x1000u);
  EXPECT_EQ(groups[0].regions.size(), 3u);
  EXPECT_EQ(groups[0].regions[0].address, 0x10000u);  // sorted
  EXPECT_TRUE(groups[0].contains(0x10FFF));
  EXPECT_FALSE(groups[0].contains(0x11000));
  EXPECT_FALSE(groups[0].contains(0xFFFF));
}

TEST(MemoryPlan, RegionsInTheNextGranuleJoinDistantOnesDoNot) {
  // 0x11800 lies in the granule right after the first group: joined.
  // 0x13000 leaves one empty granule (0x12000) between: its own group.
  const auto groups = planGroups({{0x13000, 0x10}, {0x10000, 0x100}, {0x11800, 0x100}, {0x80000, 0x2001}}, kGranule);
  ASSERT_EQ(groups.size(), 3u);
  EXPECT_EQ(groups[0].start, 0x10000u);
  EXPECT_EQ(groups[0].size, 0x2000u);
  EXPECT_EQ(groups[0].regions.size(), 2u);
  EXPECT_EQ(groups[1].start, 0x13000u);
  EXPECT_EQ(groups[1].size, 0x1000u);
  EXPECT_EQ(groups[2].start, 0x80000u);
  EXPECT_EQ(groups[2].size, 0x3000u);  // rounded up to whole granules
}

TEST(MemoryPlan, AlignsOutwardAndDropsEmptyRegions) {
  const auto groups = planGroups({{0x10FF0, 0x20}, {0x50000, 0}}, kGranule);
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0].start, 0x10000u);
  EXPECT_EQ(groups[0].size, 0x2000u);  // straddles a granule boundary
  EXPECT_TRUE(planGroups({}, kGranule).empty());
  // a region inside an earlier, larger one extends nothing
  const auto nested = planGroups({{0x20000, 0x4000}, {0x21000, 0x10}}, kGranule);
  ASSERT_EQ(nested.size(), 1u);
  EXPECT_EQ(nested[0].size, 0x4000u);
}

TEST(AddressMap, TranslatesInsideSpansOnly) {
  AddressMap map;
  EXPECT_TRUE(map.identity());
  EXPECT_FALSE(map.translate(0x10000));
  map.add(0x40000, 0x1000, 0x40000);
  EXPECT_TRUE(map.identity());
  map.add(0x10000, 0x2000, 0x90000);
  EXPECT_FALSE(map.identity());
  EXPECT_EQ(map.translate(0x10000), std::optional<uint64_t>(0x90000));
  EXPECT_EQ(map.translate(0x11FFF), std::optional<uint64_t>(0x91FFF));
  EXPECT_FALSE(map.translate(0x12000));  // one past the end
  EXPECT_FALSE(map.translate(0xFFFF));   // one before the start
  EXPECT_EQ(map.translate(0x40000), std::optional<uint64_t>(0x40000));
  EXPECT_EQ(map.translate(0x40FFF), std::optional<uint64_t>(0x40FFF));
  EXPECT_FALSE(map.translate(0x41000));
  EXPECT_FALSE(map.translate(0));
  EXPECT_FALSE(map.translate(UINT64_MAX));
  map.clear();
  EXPECT_FALSE(map.translate(0x10000));
  EXPECT_TRUE(map.identity());
}

// ---- outcome encoding -------------------------------------------------------------------------

LaunchOutcome sampleOutcome() {
  LaunchOutcome o;
  o.launchIndex = 123456789012ull;
  o.kernel = "void ns::k<int, 3>(float*) %41 a=b\nsecond\tline\r\x01";
  o.kernel += '\0';
  o.kernel += "tail";
  o.grid[0] = 4, o.grid[1] = 5, o.grid[2] = 6;
  o.block[0] = 256, o.block[1] = 2, o.block[2] = 1;
  o.sharedMemBytes = 49152;
  o.verdict = Verdict::kDiffers;
  o.detail = "first = 100%\nsecond line";
  o.memory = MemoryPath::kMixed;
  o.restoredBytes = 1ull << 33;
  o.restoreNs = 123456789;
  o.placeNs = 987654321;
  o.restoreWaitNs = 55555;
  o.code = "override /tmp/a b=c.fatbin (SASS sm_90)";
  o.timesNs = {1500, 1200, 9000000000ull};
  o.recordedDurationNs = 1400;
  BufferReport plain;
  plain.address = 0x7f0000001000ull;
  plain.size = 4000;
  plain.label = "param 1";
  o.buffers.push_back(plain);
  BufferReport differs;
  differs.address = 0x7f0000002000ull;
  differs.size = 4096;
  differs.label = "global my=var %";
  differs.differingBytes = 3;
  differs.firstOffset = 400;
  differs.withinTolerance = true;
  ElementStats s;
  s.type = DType::kBf16;
  s.elements = 2048;
  s.mismatches = 2;
  s.maxAbsError = 0.1;  // not exact in binary: the encoding must keep every bit
  s.maxRelError = 1.0 / 3.0;
  s.maxUlp = std::numeric_limits<double>::infinity();
  s.nanExpected = 1, s.nanActual = 2, s.infExpected = 3, s.infActual = 4;
  s.worstElement = 200;
  differs.stats = s;
  o.buffers.push_back(differs);
  return o;
}

TEST(Outcome, RoundTripKeepsEveryField) {
  const LaunchOutcome o = sampleOutcome();
  const std::string text = encodeOutcome(o);
  // one line of JSON, then `end`: nothing of the names leaks a newline
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 2);
  EXPECT_EQ(text.find('\0'), std::string::npos);
  const auto back = decodeOutcome(text);
  ASSERT_TRUE(back) << text;
  EXPECT_EQ(back->launchIndex, o.launchIndex);
  EXPECT_EQ(back->kernel, o.kernel);
  EXPECT_EQ(back->grid[0], 4u);
  EXPECT_EQ(back->grid[1], 5u);
  EXPECT_EQ(back->grid[2], 6u);
  EXPECT_EQ(back->block[0], 256u);
  EXPECT_EQ(back->block[1], 2u);
  EXPECT_EQ(back->block[2], 1u);
  EXPECT_EQ(back->sharedMemBytes, 49152u);
  EXPECT_EQ(back->verdict, Verdict::kDiffers);
  EXPECT_EQ(back->detail, o.detail);
  EXPECT_EQ(back->memory, MemoryPath::kMixed);
  EXPECT_EQ(back->code, o.code);
  EXPECT_EQ(back->timesNs, o.timesNs);
  EXPECT_EQ(back->recordedDurationNs, o.recordedDurationNs);
  EXPECT_EQ(back->restoredBytes, o.restoredBytes);
  EXPECT_EQ(back->restoreNs, o.restoreNs);
  EXPECT_EQ(back->placeNs, o.placeNs);
  EXPECT_EQ(back->restoreWaitNs, o.restoreWaitNs);
  ASSERT_EQ(back->buffers.size(), 2u);
  const BufferReport& p = back->buffers[0];
  EXPECT_EQ(p.address, 0x7f0000001000ull);
  EXPECT_EQ(p.size, 4000u);
  EXPECT_EQ(p.label, "param 1");
  EXPECT_EQ(p.differingBytes, 0u);
  EXPECT_FALSE(p.firstOffset);
  EXPECT_FALSE(p.stats);
  EXPECT_FALSE(p.withinTolerance);
  const BufferReport& d = back->buffers[1];
  EXPECT_EQ(d.label, "global my=var %");
  EXPECT_EQ(d.differingBytes, 3u);
  EXPECT_EQ(d.firstOffset, std::optional<uint64_t>(400));
  EXPECT_TRUE(d.withinTolerance);
  ASSERT_TRUE(d.stats);
  EXPECT_EQ(d.stats->type, DType::kBf16);
  EXPECT_EQ(d.stats->elements, 2048u);
  EXPECT_EQ(d.stats->mismatches, 2u);
  EXPECT_EQ(d.stats->maxAbsError, 0.1);
  EXPECT_EQ(d.stats->maxRelError, 1.0 / 3.0);
  EXPECT_TRUE(std::isinf(d.stats->maxUlp));
  EXPECT_EQ(d.stats->nanExpected, 1u);
  EXPECT_EQ(d.stats->nanActual, 2u);
  EXPECT_EQ(d.stats->infExpected, 3u);
  EXPECT_EQ(d.stats->infActual, 4u);
  EXPECT_EQ(d.stats->worstElement, std::optional<uint64_t>(200));
}

TEST(Outcome, TextThatIsNotUtf8SurvivesByteForByte) {
  LaunchOutcome o;
  o.kernel =
      "k\xff\xc3(\xc2\x9b"
      "2J\xe2\x80\xae";  // bytes that are not UTF-8, a C1 control, a bidi override
  o.code = std::string("\x80\x00\x7f", 3);
  const auto back = decodeOutcome(encodeOutcome(o));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->kernel, o.kernel);
  EXPECT_EQ(back->code, o.code);
}

TEST(Outcome, EveryVerdictAndMemoryPathSurvives) {
  for (int v = 0; v <= static_cast<int>(Verdict::kSkipped); ++v) {
    for (int m = 0; m <= static_cast<int>(MemoryPath::kMixed); ++m) {
      LaunchOutcome o;
      o.launchIndex = static_cast<uint64_t>(v) * 10 + static_cast<uint64_t>(m);
      o.verdict = static_cast<Verdict>(v);
      o.memory = static_cast<MemoryPath>(m);
      const auto back = decodeOutcome(encodeOutcome(o));
      ASSERT_TRUE(back);
      EXPECT_EQ(back->verdict, o.verdict);
      EXPECT_EQ(back->memory, o.memory);
      EXPECT_EQ(back->launchIndex, o.launchIndex);
      EXPECT_TRUE(back->kernel.empty());
      EXPECT_TRUE(back->buffers.empty());
      EXPECT_TRUE(back->timesNs.empty());
      EXPECT_FALSE(back->recordedDurationNs);
    }
  }
  EXPECT_STREQ(verdictName(Verdict::kReproduced), "REPRODUCED");
  EXPECT_STREQ(verdictName(Verdict::kDiffers), "DIFFERS");
  EXPECT_STREQ(verdictName(Verdict::kHang), "HANG");
  EXPECT_STREQ(memoryPathName(MemoryPath::kFixed), "fixed-va");
  EXPECT_STREQ(memoryPathName(MemoryPath::kRelocated), "relocated");
}

TEST(Outcome, MalformedInputIsRejected) {
  const std::string good = encodeOutcome(sampleOutcome());
  ASSERT_TRUE(decodeOutcome(good));
  EXPECT_FALSE(decodeOutcome(""));
  EXPECT_FALSE(decodeOutcome("garbage\n"));
  EXPECT_FALSE(decodeOutcome("end\n"));  // no outcome
  const std::string minimal = R"({"launchIndex":1,"grid":[1,1,1],"block":[1,1,1],"verdict":0,"memory":0})";
  EXPECT_TRUE(decodeOutcome(minimal + "\nend\n"));
  EXPECT_FALSE(decodeOutcome(minimal + "\n"));                               // no end
  EXPECT_FALSE(decodeOutcome(good.substr(0, good.size() - 4)));              // cut before "end"
  EXPECT_FALSE(decodeOutcome(good.substr(0, good.size() / 2) + "\nend\n"));  // cut inside the document
  EXPECT_FALSE(decodeOutcome(R"({"launchIndex":1,"verdict":0,"memory":0})"
                             "\nend\n"));  // no grid
  EXPECT_FALSE(decodeOutcome(R"({"launchIndex":1,"grid":[1,1,1],"block":[1,1,1],"verdict":7,"memory":0})"
                             "\nend\n"));  // no such verdict
  EXPECT_FALSE(decodeOutcome(R"({"launchIndex":1,"grid":[1,1,1],"block":[1,1,1],"verdict":0,"memory":4})"
                             "\nend\n"));  // no such memory path
  EXPECT_FALSE(decodeOutcome(R"({"launchIndex":1,"grid":[1,1,1],"block":[1,1,1],"verdict":0,"memory":0,)"
                             R"("buffers":[{"stats":{"type":14}}]})"
                             "\nend\n"));  // no such dtype
  EXPECT_FALSE(decodeOutcome(R"({"launchIndex":"one","grid":[1,1,1],"block":[1,1,1],"verdict":0,"memory":0})"
                             "\nend\n"));  // a member of the wrong type
  EXPECT_FALSE(decodeOutcome(minimal + "\nsurprise\nend\n"));
}

// ---- image choice, on the real images of kernels/ ----------------------------------------------------

std::vector<uint8_t> kernelBytes(const std::string& name) {
  return kcap::test::readFileBytes(kcap_test::kernelFile(name));
}

TEST(ImageChoice, FatbinPicksTheBestSass) {
  const auto fatbin = kernelBytes("axpy.fatbin");
  ASSERT_FALSE(fatbin.empty());
  EXPECT_EQ(imageContents(fatbin), "sm_80, sm_90 SASS; compute_80 PTX");
  ImageChoice c = chooseCode(fatbin, 90, false);
  EXPECT_TRUE(c.runnable) << c.why;
  EXPECT_EQ(c.description, "SASS sm_90");
  EXPECT_TRUE(c.ptx.empty());
  c = chooseCode(fatbin, 86, false);
  EXPECT_TRUE(c.runnable);
  EXPECT_EQ(c.description, "SASS sm_80");  // same major, not newer
  c = chooseCode(fatbin, 80, false);
  EXPECT_EQ(c.description, "SASS sm_80");
  c = chooseCode(fatbin, 100, false);
  EXPECT_TRUE(c.runnable);
  EXPECT_EQ(c.description, "PTX compute_80 (JIT)");  // no SASS of major 10: the PTX
}

TEST(ImageChoice, AnOlderGpuCannotRunItAndIsToldWhy) {
  const ImageChoice c = chooseCode(kernelBytes("axpy.fatbin"), 75, false);
  EXPECT_FALSE(c.runnable);
  EXPECT_TRUE(c.description.empty());
  EXPECT_NE(c.why.find("sm_80, sm_90 SASS; compute_80 PTX"), std::string::npos) << c.why;
  EXPECT_NE(c.why.find("this GPU is sm_75"), std::string::npos) << c.why;
}

TEST(ImageChoice, ForcePtxGivesThePtxText) {
  const ImageChoice c = chooseCode(kernelBytes("axpy.fatbin"), 90, true);
  ASSERT_TRUE(c.runnable) << c.why;
  EXPECT_EQ(c.description, "PTX compute_80 (forced JIT)");
  ASSERT_GT(c.ptx.size(), 100u);
  EXPECT_EQ(c.ptx.back(), 0);
  const std::string text(reinterpret_cast<const char*>(c.ptx.data()), c.ptx.size() - 1);
  EXPECT_EQ(text.find('\0'), std::string::npos);
  EXPECT_TRUE(text[0] == '/' || text[0] == '.' || std::isspace(static_cast<unsigned char>(text[0])))
      << text.substr(0, 40);
  EXPECT_NE(text.find(".version"), std::string::npos);
  EXPECT_NE(text.find(".target sm_80"), std::string::npos);
  EXPECT_NE(text.find(".entry axpy"), std::string::npos);
  // an older GPU cannot JIT compute_80 either
  EXPECT_FALSE(chooseCode(kernelBytes("axpy.fatbin"), 75, true).runnable);
}

TEST(ImageChoice, CubinAndPtxFiles) {
  const auto cubin = kernelBytes("axpy.sm_90.cubin");
  EXPECT_EQ(imageContents(cubin), "cubin");
  ImageChoice c = chooseCode(cubin, 90, false);
  EXPECT_TRUE(c.runnable);
  EXPECT_EQ(c.description, "cubin");
  c = chooseCode(cubin, 90, true);
  EXPECT_FALSE(c.runnable);
  EXPECT_NE(c.why.find("cubin"), std::string::npos) << c.why;
  EXPECT_NE(c.why.find("no PTX"), std::string::npos) << c.why;

  auto ptx = kernelBytes("axpy.ptx");
  ptx.push_back(0);  // as a program hands PTX to the driver
  EXPECT_EQ(imageContents(ptx), "PTX");
  c = chooseCode(ptx, 90, false);
  EXPECT_TRUE(c.runnable);
  EXPECT_EQ(c.description, "PTX (JIT)");

  const std::vector<uint8_t> junk = {0x01, 0x02, 0xFE, 0x00, 0x33, 0x44, 0x55, 0x66};  // no format's start
  EXPECT_EQ(imageContents(junk), "unrecognised image");
  c = chooseCode(junk, 90, false);
  EXPECT_FALSE(c.runnable);
  EXPECT_FALSE(c.why.empty());
}

// ---- which launches a sequence submits back to back ---------------------------------------

// A trace of launches (and memcpys) written with the format library, read
// back as the TraceModel replay uses.
class SyntheticTrace {
 public:
  struct Launch {
    uint64_t stream = 7;
    bool programmaticSerialization = false;
    bool memcpyBefore = false;                   // a recorded copy between it and the launch before
    std::vector<uint8_t> pre = {1}, post = {1};  // one range at 0x1000: its bytes before and after
  };
  explicit SyntheticTrace(const std::vector<Launch>& launches) : path_(dir_.file("t.kcap")) {
    auto writer = kcap::format::TraceWriter::create(path_);
    uint64_t index = 0;
    for (const Launch& l : launches) {
      if (l.memcpyBefore) {
        capnp::MallocMessageBuilder message;
        auto copy = message.initRoot<kcap::schema::Event>().initMemcpy();
        copy.setDirection(kcap::schema::CopyDirection::DEVICE_TO_DEVICE);
        copy.setDst(0x1000), copy.setSrc(0x2000), copy.setSize(1), copy.setStream(l.stream);
        writer->append(message);
      }
      capnp::MallocMessageBuilder message;
      auto launch = message.initRoot<kcap::schema::Event>().initLaunch();
      launch.setLaunchIndex(index);
      launch.setStream(l.stream);
      launch.setKernelName("k");
      if (l.programmaticSerialization) {
        auto attribute = launch.initAttributes(1)[0];
        attribute.setId(CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION);
        CUlaunchAttributeValue value{};
        value.programmaticStreamSerializationAllowed = 1;
        attribute.setValue(kj::arrayPtr(reinterpret_cast<const kj::byte*>(&value), sizeof value));
      }
      auto pre = launch.initPre(1)[0];
      pre.setAddress(0x1000);
      writer->storeContent(l.pre.data(), l.pre.size(), pre.initContent());
      writer->append(message);
      capnp::MallocMessageBuilder endMessage;
      auto end = endMessage.initRoot<kcap::schema::Event>().initLaunchEnd();
      end.setLaunchIndex(index++);
      auto post = end.initPost(1)[0];
      post.setAddress(0x1000);
      writer->storeContent(l.post.data(), l.post.size(), post.initContent());
      writer->append(endMessage);
    }
    writer->close();
    reader_ = kcap::format::TraceReader::open(path_);
    model_ = std::make_unique<TraceModel>(TraceModel::load(*reader_));
  }
  const TraceModel& model() const { return *model_; }
  const LaunchRecord& launch(uint64_t index) const { return *model_->launch(index); }

 private:
  kcap::test::TempDir dir_{"kcap-synthetic"};
  std::string path_;
  std::unique_ptr<kcap::format::TraceReader> reader_;
  std::unique_ptr<TraceModel> model_;
};

TEST(SequenceOverlap, OnlyAProgrammaticLaunchRightBehindOnTheSameStreamStartsBeforeTheEnd) {
  SyntheticTrace::Launch plain, dependent, otherStream, afterCopy;
  dependent.programmaticSerialization = true;
  otherStream.programmaticSerialization = true;
  otherStream.stream = 8;
  afterCopy.programmaticSerialization = true;
  afterCopy.memcpyBefore = true;
  const SyntheticTrace t({plain, dependent, plain, otherStream, afterCopy});
  EXPECT_TRUE(startsBeforeEnd(t.model(), t.launch(0), t.launch(1)));
  EXPECT_FALSE(startsBeforeEnd(t.model(), t.launch(1), t.launch(2))) << "no attribute";
  EXPECT_FALSE(startsBeforeEnd(t.model(), t.launch(2), t.launch(3))) << "another stream";
  EXPECT_FALSE(startsBeforeEnd(t.model(), t.launch(3), t.launch(4))) << "a recorded copy between";
}

TEST(SequenceOverlap, RangesChangedAreThoseWhosePostStateDiffersFromThePreState) {
  SyntheticTrace::Launch same, changed;
  changed.post = {2};
  const SyntheticTrace t({same, changed});
  EXPECT_TRUE(rangesChangedBy(t.launch(0)).empty());
  EXPECT_EQ(rangesChangedBy(t.launch(1)), (std::set<uint64_t>{0x1000}));
}

// ---- which recorded encode made a tensor map ----------------------------------------------

TEST(TensorMapLookup, FindsTheNewestSuccessfulEncodeBeforeTheLaunchWithTheSameBytes) {
  kcap::test::TempDir dir("kcap-tensor-maps");
  const std::string path = dir.file("t.kcap");
  std::vector<uint8_t> first(128), second(128);
  for (size_t i = 0; i < 128; ++i) {
    first[i] = static_cast<uint8_t>(i);
    second[i] = static_cast<uint8_t>(255 - i);
  }
  {
    auto writer = kcap::format::TraceWriter::create(path);
    // seq 0: first; 1: a failure (no map); 2: first again; 3: second; 4: 64 bytes (damaged)
    const auto encode = [&](const std::vector<uint8_t>& map, int32_t result) {
      capnp::MallocMessageBuilder message;
      auto e = message.initRoot<kcap::schema::Event>().initTensorMapEncode();
      e.setApi(kcap::schema::TensorMapApi::TILED);
      e.setRank(1);
      e.setResult(result);
      if (!map.empty()) {
        e.setMap(kj::arrayPtr(reinterpret_cast<const kj::byte*>(map.data()), map.size()));
      }
      writer->append(message);
    };
    encode(first, 0);
    encode({}, 1);
    encode(first, 0);
    encode(second, 0);
    encode(std::vector<uint8_t>(first.begin(), first.begin() + 64), 0);
    writer->close();
  }
  auto reader = kcap::format::TraceReader::open(path);
  const TraceModel model = TraceModel::load(*reader);
  const auto seqOf = [&](const std::vector<uint8_t>& map, uint64_t before) -> int64_t {
    const StoredEvent* found = model.tensorMapEncodeFor(map.data(), map.size(), before);
    return found == nullptr ? -1 : static_cast<int64_t>(found->seq());
  };
  EXPECT_EQ(seqOf(first, 0), -1) << "nothing before seq 0";
  EXPECT_EQ(seqOf(first, 1), 0);
  EXPECT_EQ(seqOf(first, 2), 0);
  EXPECT_EQ(seqOf(first, 3), 2) << "the newest before the launch";
  EXPECT_EQ(seqOf(first, 100), 2);
  EXPECT_EQ(seqOf(second, 3), -1);
  EXPECT_EQ(seqOf(second, 4), 3);
  std::vector<uint8_t> unknown(128, 0);
  EXPECT_EQ(seqOf(unknown, 100), -1) << "a map no encode made";
  EXPECT_EQ(seqOf(std::vector<uint8_t>(first.begin(), first.begin() + 64), 100), -1) << "not 128 bytes";
}

// ---- the rows of a recorded 2D or 3D copy ---------------------------------------------------

TEST(CopyRows, TwoDimensionalCopiesHaveOneSliceThreeDimensionalOnesTheirDepth) {
  capnp::MallocMessageBuilder message;
  auto copy = message.initRoot<kcap::schema::Memcpy>();
  copy.setDst(0x10000), copy.setSrc(0x20000);
  copy.setWidth(40), copy.setHeight(3), copy.setDstPitch(512), copy.setSrcPitch(64);
  auto flat = copyRows(copy.asReader());
  ASSERT_TRUE(flat.has_value());
  EXPECT_EQ(flat->slices, 1u);  // depth 0: 2D
  EXPECT_EQ(flat->dstAt(2, 0), 1024u);
  EXPECT_EQ(flat->srcAt(2, 0), 128u);
  EXPECT_EQ(flat->packedAt(2, 0), 80u);

  copy.setDepth(2), copy.setDstHeight(4), copy.setSrcHeight(5);
  auto volume = copyRows(copy.asReader());
  ASSERT_TRUE(volume.has_value());
  EXPECT_EQ(volume->slices, 2u);
  EXPECT_EQ(volume->dstAt(1, 1), 4 * 512u + 512u);
  EXPECT_EQ(volume->srcAt(1, 1), 5 * 64u + 64u);
  EXPECT_EQ(volume->packedAt(1, 1), 4 * 40u);                    // row 1 of slice 1: packed row 3 + 1
  copy.setDepth(1), copy.setDstHeight(0), copy.setSrcHeight(0);  // depth 1 may leave the heights 0
  EXPECT_EQ(copyRows(copy.asReader())->slices, 1u);
}

TEST(CopyRows, RowsPastTheEndOfTheAddressSpaceAreRefused) {
  capnp::MallocMessageBuilder message;
  auto copy = message.initRoot<kcap::schema::Memcpy>();
  copy.setDst(0x10000), copy.setWidth(16), copy.setHeight(2), copy.setDstPitch(16);
  copy.setDepth(2), copy.setDstHeight(uint64_t{1} << 62);  // the slice pitch overflows
  EXPECT_FALSE(copyRows(copy.asReader()).has_value());
  copy.setDstHeight(2), copy.setDepth(uint64_t{1} << 60);  // the last slice overflows
  EXPECT_FALSE(copyRows(copy.asReader()).has_value());
  copy.setDepth(2), copy.setDst(std::numeric_limits<uint64_t>::max() - 32);  // the address does
  EXPECT_FALSE(copyRows(copy.asReader()).has_value());
  copy.setDst(std::numeric_limits<uint64_t>::max() - 64);  // the last row ends just inside
  EXPECT_TRUE(copyRows(copy.asReader()).has_value());
  copy.setSrcPitch(std::numeric_limits<uint64_t>::max());  // and the source side is checked too
  EXPECT_FALSE(copyRows(copy.asReader()).has_value());
  copy.setHeight(0), copy.setSrcPitch(0);  // no rows: nothing to place
  EXPECT_TRUE(copyRows(copy.asReader()).has_value());
}

// ---- the driver double has what replay needs ------------------------------------------------

#define KCAP_TEST_SYMBOL_TEXT(fn) #fn
#define KCAP_TEST_SYMBOL(fn) KCAP_TEST_SYMBOL_TEXT(fn)

TEST(DriverDouble, ExportsEveryFunctionReplayLooksUp) {
  const std::string path = kcap_test::doubleDir() + "/libcuda.so.1";
  void* library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(library, nullptr) << dlerror();
  std::vector<std::string> missing;
#define KCAP_TEST_LOOK_UP(fn)                            \
  if (dlsym(library, KCAP_TEST_SYMBOL(fn)) == nullptr) { \
    missing.push_back(KCAP_TEST_SYMBOL(fn));             \
  }
  KCAP_REPLAY_REQUIRED_FUNCTIONS(KCAP_TEST_LOOK_UP)
  KCAP_REPLAY_OPTIONAL_FUNCTIONS(KCAP_TEST_LOOK_UP)
#undef KCAP_TEST_LOOK_UP
  std::string list;
  for (const auto& name : missing) {
    list += name + " ";
  }
  EXPECT_TRUE(missing.empty()) << "the double lacks " << list;
  // the names are the ABI symbols, not the plain ones
  EXPECT_EQ(std::string(KCAP_TEST_SYMBOL(cuMemAlloc)), "cuMemAlloc_v2");
  EXPECT_EQ(std::string(KCAP_TEST_SYMBOL(cuEventElapsedTime)), "cuEventElapsedTime_v2");
  dlclose(library);
}

}  // namespace
