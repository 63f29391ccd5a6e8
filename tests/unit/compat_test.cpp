// tests/data/compat-v1.kcap is a trace written once (by kcap_make_sample
// --preset compat, format version 1) and committed. It is never regenerated:
// these assertions pin its content, so a change to the schema, the container
// or the reader that stops old files from reading the same way fails here.
// If this test fails, fix the change, not the test (the evolution rule in
// format/kcap.capnp: fields are only ever added).
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "event_visitor.h"
#include "hash.h"
#include "trace_files.h"
#include "trace_reader.h"
#include "trace_summary.h"

namespace kcap::test {
namespace {

using schema::Event;

const std::string kCompatPath = std::string(KCAP_TEST_DATA_DIR) + "/compat-v1.kcap";

std::string str(capnp::Text::Reader text) { return std::string(text.cStr(), text.size()); }

std::string hex(const std::vector<uint8_t>& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (uint8_t b : bytes) {
    out += digits[b >> 4];
    out += digits[b & 15];
  }
  return out;
}

std::string hex(capnp::Data::Reader data) { return hex(std::vector<uint8_t>(data.begin(), data.end())); }

std::string hashOf(const std::vector<uint8_t>& bytes) { return format::contentHash(bytes.data(), bytes.size()).hex(); }

float floatAt(const std::vector<uint8_t>& bytes, size_t index) {
  float f;
  std::memcpy(&f, bytes.data() + index * 4, 4);
  return f;
}

// The event types of the file, in seq order (Event::Which values).
const std::vector<int> kKinds = {0,  16, 2,  4,  2,  4,  5,  10, 6,  6,  6,  6,  6,  6,  6,  6,  8,
                                 9,  8,  8,  11, 12, 13, 11, 12, 13, 11, 12, 13, 15, 10, 11, 12, 10,
                                 14, 10, 10, 10, 8,  7,  7,  7,  7,  7,  7,  7,  7,  3,  10, 16, 1};

TEST(CompatV1, FileLevelFacts) {
  auto reader = format::TraceReader::open(kCompatPath);
  EXPECT_EQ(reader->fileSize(), 27022u);
  EXPECT_EQ(reader->header().formatVersion, 1u);
  EXPECT_STREQ(reader->header().writerVersion, "kcap 0.1.0");
  EXPECT_TRUE(reader->indexed());
  EXPECT_FALSE(reader->torn());
  EXPECT_TRUE(reader->problems().empty());
  size_t records = 0, blobs = 0;
  for (const auto& c : reader->chunks()) {
    EXPECT_EQ(reader->verifyChunk(c), "") << "chunk at " << c.offset;
    (c.kind == format::ChunkKind::kRecords ? records : blobs)++;
  }
  EXPECT_EQ(records, 3u);
  EXPECT_EQ(blobs, 17u);
  EXPECT_EQ(reader->blobCount(), 17u);
}

TEST(CompatV1, EventSequence) {
  auto events = readAllEvents(kCompatPath);
  ASSERT_EQ(events.size(), 51u);
  ASSERT_EQ(kKinds.size(), 51u);
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(events[i].get().getSeq(), i);
    EXPECT_EQ(static_cast<int>(events[i].get().which()), kKinds[i]) << "seq " << i;
  }
  EXPECT_EQ(events[0].get().getTimeNs(), 3400u);
  EXPECT_EQ(events[26].get().getThreadId(), 41247u);
  EXPECT_EQ(events[50].get().getTimeNs(), 168488u);
}

TEST(CompatV1, TraceBeginAndEnd) {
  auto events = readAllEvents(kCompatPath);
  ASSERT_EQ(events.size(), 51u);
  auto b = events[0].get().getTraceBegin();
  EXPECT_EQ(str(b.getHostName()), "gpu-node-07");
  EXPECT_EQ(b.getProcessId(), 41230u);
  ASSERT_EQ(b.getArgv().size(), 5u);
  EXPECT_EQ(str(b.getArgv()[1]), "train.py");
  EXPECT_EQ(str(b.getArgv()[4]), "--steps=3");
  ASSERT_EQ(b.getEnvironment().size(), 4u);
  EXPECT_EQ(str(b.getEnvironment()[0].getKey()), "CUDA_VISIBLE_DEVICES");
  EXPECT_EQ(str(b.getEnvironment()[0].getValue()), "0,1");
  EXPECT_EQ(b.getDriverVersion(), 13000);
  EXPECT_EQ(b.getRuntimeVersion(), 12080);
  ASSERT_EQ(b.getDevices().size(), 2u);
  EXPECT_EQ(str(b.getDevices()[0].getName()), "NVIDIA H200");
  EXPECT_EQ(hex(b.getDevices()[0].getUuid()), "83e680b96849cc53e8d7f06993c31d6e");
  EXPECT_EQ(b.getDevices()[0].getComputeCapabilityMajor(), 9);
  EXPECT_EQ(b.getDevices()[0].getTotalMemoryBytes(), 150754820096ull);
  EXPECT_EQ(b.getDevices()[0].getMultiprocessorCount(), 132);
  EXPECT_EQ(str(b.getDevices()[0].getPciBusId()), "0000:3b:00.0");
  EXPECT_EQ(str(b.getDevices()[1].getName()), "NVIDIA A100-SXM4-80GB");
  EXPECT_EQ(hex(b.getDevices()[1].getUuid()), "31bd976a46f878cbf9a67b77c06ec103");
  EXPECT_EQ(b.getDevices()[1].getComputeCapabilityMajor(), 8);
  EXPECT_EQ(b.getStartUnixNs(), 1764480000123456789ull);
  EXPECT_EQ(b.getCaptureMode(), schema::CaptureMode::FULL);
  EXPECT_EQ(str(b.getKcapVersion()), "0.1.0");
  ASSERT_EQ(b.getLibraries().size(), 2u);
  EXPECT_EQ(str(b.getLibraries()[0].getValue()), "2.9.0+cu130");

  auto end = events[50].get().getTraceEnd();
  EXPECT_EQ(end.getReason(), schema::EndReason::EXIT);
  EXPECT_EQ(end.getEventCount(), 50u);
  EXPECT_EQ(end.getLaunchCount(), 4u);
  EXPECT_EQ(str(end.getMessage()), "normal exit");
  EXPECT_EQ(events[1].get().getMessage().getLevel(), schema::Message::Level::INFO);
  EXPECT_EQ(events[49].get().getMessage().getLevel(), schema::Message::Level::WARNING);
}

TEST(CompatV1, CodeAndBindings) {
  auto reader = format::TraceReader::open(kCompatPath);
  auto events = readAllEvents(kCompatPath);
  ASSERT_EQ(events.size(), 51u);
  auto axpy = events[2].get().getModuleLoad();
  EXPECT_EQ(axpy.getHandle(), 0x55d0c8a10000ull);
  EXPECT_EQ(axpy.getApi(), schema::LoadApi::MODULE_LOAD_DATA);
  EXPECT_EQ(axpy.getImageKind(), schema::ImageKind::FATBIN);
  auto image = reader->readContent(axpy.getImage());
  EXPECT_EQ(image.size(), 7696u);
  EXPECT_EQ(hashOf(image), "3eb54f71dd9a7ce582b713de78d73007");
  EXPECT_EQ(hex(std::vector<uint8_t>(image.begin(), image.begin() + 4)), "50ed55ba");  // fatbin magic

  auto lib = events[4].get().getModuleLoad();
  EXPECT_TRUE(lib.getIsLibrary());
  EXPECT_EQ(lib.getApi(), schema::LoadApi::LIBRARY_LOAD_DATA);
  EXPECT_EQ(hashOf(reader->readContent(lib.getImage())), "16580688b6d6dcaa9903512beb0ed2ca");
  ASSERT_EQ(lib.getGlobals().size(), 2u);
  EXPECT_EQ(str(lib.getGlobals()[0].getName()), "coeffs");
  EXPECT_EQ(lib.getGlobals()[0].getSize(), 64u);
  EXPECT_EQ(str(lib.getGlobals()[1].getName()), "call_count");
  ASSERT_EQ(lib.getJitOptions().size(), 2u);
  EXPECT_EQ(lib.getJitOptions()[1].getValue(), 4u);

  auto bind = events[3].get().getFunctionBind();
  EXPECT_EQ(str(bind.getName()), "axpy");
  EXPECT_EQ(bind.getHandle(), 0x55d0c8a1f1a0ull);
  ASSERT_EQ(bind.getParams().size(), 4u);
  EXPECT_EQ(bind.getParams()[3].getOffset(), 24u);
  EXPECT_EQ(bind.getParams()[3].getSize(), 4u);
  auto kernel = events[5].get().getFunctionBind();
  EXPECT_EQ(str(kernel.getName()), "poly_eval");
  EXPECT_TRUE(kernel.getIsKernel());
  EXPECT_EQ(kernel.getApi(), schema::BindApi::LIBRARY_GET_KERNEL);
  auto attr = events[6].get().getFunctionAttribute();
  EXPECT_EQ(attr.getApi(), schema::AttributeApi::KERNEL_SET_ATTRIBUTE);
  EXPECT_EQ(attr.getAttribute(), 8);
  EXPECT_EQ(attr.getValue(), 65536);
  auto unload = events[47].get().getModuleUnload();
  EXPECT_EQ(unload.getHandle(), 0x55d0c8a30000ull);
}

TEST(CompatV1, MemoryAndLaunches) {
  auto reader = format::TraceReader::open(kCompatPath);
  auto events = readAllEvents(kCompatPath);
  ASSERT_EQ(events.size(), 51u);
  auto alloc = events[8].get().getAlloc();
  EXPECT_EQ(alloc.getKind(), schema::AllocKind::MEM_ALLOC);
  EXPECT_EQ(alloc.getAddress(), 0x7fa3c0000000ull);
  EXPECT_EQ(alloc.getSize(), 6144u);
  EXPECT_EQ(events[15].get().getAlloc().getKind(), schema::AllocKind::VMM_MAP);

  auto copy = events[16].get().getMemcpy();
  EXPECT_EQ(copy.getDirection(), schema::CopyDirection::HOST_TO_DEVICE);
  auto x = reader->readContent(copy.getData());
  ASSERT_EQ(x.size(), 6144u);
  EXPECT_EQ(hashOf(x), "d078587471ed75a94f408ba01e65ae1b");
  EXPECT_EQ(hex(std::vector<uint8_t>(x.begin(), x.begin() + 8)), "0040494000c02240");  // 3.14453125f, 2.54296875f
  EXPECT_EQ(floatAt(x, 0), 3.14453125f);
  EXPECT_EQ(hashOf(reader->readContent(events[19].get().getMemcpy().getData())), "f04b7ab3afa451a7a39e37eaf320c9eb");
  EXPECT_EQ(events[17].get().getMemset().getCount(), 1536u);

  auto launch = events[20].get().getLaunch();
  EXPECT_EQ(launch.getLaunchIndex(), 0u);
  EXPECT_EQ(str(launch.getKernelName()), "axpy");
  EXPECT_EQ(launch.getFunction(), 0x55d0c8a1f1a0ull);
  EXPECT_EQ(launch.getGridX(), 6u);
  EXPECT_EQ(launch.getGridY(), 1u);
  EXPECT_EQ(launch.getGridZ(), 1u);
  EXPECT_EQ(launch.getBlockX(), 256u);
  EXPECT_EQ(launch.getBlockY(), 1u);
  EXPECT_EQ(launch.getBlockZ(), 1u);
  EXPECT_EQ(hex(launch.getParams()), "0000003f00000000000000c0a37f0000000020c0a37f000000060000");
  ASSERT_EQ(launch.getPointers().size(), 2u);
  EXPECT_EQ(launch.getPointers()[1].getOffset(), 16u);
  EXPECT_EQ(launch.getPointers()[1].getValue(), 0x7fa3c0200000ull);
  ASSERT_EQ(launch.getPre().size(), 2u);
  EXPECT_EQ(reader->readContent(launch.getPre()[0].getContent()), x);
  EXPECT_EQ(reader->readContent(launch.getPre()[1].getContent()), std::vector<uint8_t>(6144, 0));
  auto post = reader->readContent(events[21].get().getLaunchEnd().getPost()[0].getContent());
  EXPECT_EQ(hashOf(post), "f940bea74575b27cb72c740e5b06a05d");
  EXPECT_EQ(floatAt(post, 0), 0.5f * 3.14453125f);
  // After the second launch y = 0.5x + 0.5x = x: the same pieces as x.
  auto post2 = events[24].get().getLaunchEnd().getPost()[0].getContent();
  EXPECT_EQ(post2.getPieces()[0].getHigh(), copy.getData().getPieces()[0].getHigh());
  auto timing = events[22].get().getKernelTiming();
  EXPECT_EQ(timing.getLaunchIndex(), 0u);
  EXPECT_GT(timing.getEndNs(), timing.getStartNs());

  auto poly = events[26].get().getLaunch();
  EXPECT_EQ(str(poly.getKernelName()), "poly_eval");
  EXPECT_EQ(poly.getApi(), schema::LaunchApi::LAUNCH_KERNEL_EX);
  EXPECT_EQ(poly.getGridX(), 12u);
  EXPECT_EQ(poly.getBlockX(), 128u);
  EXPECT_EQ(poly.getSharedMemBytes(), 1024u);
  ASSERT_EQ(poly.getAttributes().size(), 2u);
  EXPECT_EQ(poly.getAttributes()[0].getId(), 4);
  EXPECT_EQ(poly.getAttributes()[0].getValue().size(), 64u);
  ASSERT_EQ(poly.getPre().size(), 4u);
  EXPECT_EQ(poly.getPre()[2].getKind(), schema::MemoryKind::MODULE_GLOBAL);
  EXPECT_EQ(hashOf(reader->readContent(poly.getPre()[2].getContent())), "9280f4aadf9d9b97be439d6e8273da20");
  auto polyPost = events[27].get().getLaunchEnd().getPost();
  ASSERT_EQ(polyPost.size(), 2u);
  EXPECT_EQ(hashOf(reader->readContent(polyPost[0].getContent())), "0098a263abb49268d619192c506377b5");
  EXPECT_EQ(hex(reader->readContent(polyPost[1].getContent())), "0c000000");  // call_count == 12 blocks

  EXPECT_EQ(str(events[29].get().getApiError().getResultName()), "CUDA_ERROR_NOT_FOUND");
  EXPECT_EQ(events[29].get().getApiError().getResult(), 500);
  EXPECT_TRUE(events[31].get().getLaunch().getCapturing());
  EXPECT_EQ(events[31].get().getLaunch().getPre().size(), 0u);
  EXPECT_EQ(events[34].get().getGraphLaunch().getGraphExec(), 0x55d0c8b01230ull);
  EXPECT_EQ(events[30].get().getSync().getOp(), schema::SyncKind::STREAM_BEGIN_CAPTURE);
}

TEST(CompatV1, ReadsTheSameWithoutItsIndex) {
  // Old files cut short (no index) must scan to the same events.
  auto bytes = readFileBytes(kCompatPath);
  RawLayout layout = walkChunks(bytes);
  ASSERT_TRUE(layout.hasTrailer);
  bytes.resize(layout.chunks.back().offset);
  TempDir dir;
  writeFileBytes(dir.file("noindex.kcap"), bytes);
  auto scanned = readAllEvents(dir.file("noindex.kcap"));
  auto indexed = readAllEvents(kCompatPath);
  ASSERT_EQ(scanned.size(), indexed.size());
  for (size_t i = 0; i < scanned.size(); ++i) EXPECT_EQ(eventBytes(scanned[i].get()), eventBytes(indexed[i].get()));
}

// visitEvent hands each event to the handler of its kind, as which() names it.
TEST(CompatV1, VisitEventDispatchesEveryKindToItsHandler) {
  auto reader = format::TraceReader::open(kCompatPath);
  std::vector<int> kinds;
  reader->forEachEvent([&](const format::EventRef& ref) {
    const int kind = format::visitEvent(
        ref.event, format::Overloaded{
                       [](schema::TraceBegin::Reader) { return static_cast<int>(Event::TRACE_BEGIN); },
                       [](schema::TraceEnd::Reader) { return static_cast<int>(Event::TRACE_END); },
                       [](schema::Launch::Reader) { return static_cast<int>(Event::LAUNCH); },
                       [](schema::Memcpy::Reader) { return static_cast<int>(Event::MEMCPY); },
                       [](format::UnknownEvent) { return -1; },
                       [&](const auto&) { return static_cast<int>(format::eventKind(ref.event)); },
                   });
    kinds.push_back(kind);
    return true;
  });
  EXPECT_EQ(kinds, kKinds);
}

// The summary `kcap info` prints, built by the library.
TEST(CompatV1, SummaryCountsWhatInfoReports) {
  auto reader = format::TraceReader::open(kCompatPath);
  const format::TraceSummary s = format::summarizeTrace(*reader);
  EXPECT_EQ(s.events, 51u);
  EXPECT_EQ(s.lastTimeNs, 168488u);
  ASSERT_TRUE(s.traceBegin());
  EXPECT_EQ(str(s.traceBegin()->getHostName()), "gpu-node-07");
  ASSERT_TRUE(s.end);
  EXPECT_EQ(s.end->reason, "exit");
  EXPECT_EQ(s.end->launchCount, 4u);
  ASSERT_EQ(s.modules.size(), 2u);
  EXPECT_EQ(s.modules[1].globals, 2u);
  EXPECT_TRUE(s.modules[1].isLibrary);
  EXPECT_EQ(s.functionBinds, 2u);
  EXPECT_EQ(s.launches, 4u);
  EXPECT_EQ(s.capturedIntoGraph, 1u);
  const auto kernels = format::kernelsByCount(s);
  ASSERT_EQ(kernels.size(), 2u);
  EXPECT_EQ(kernels[0]->name, "axpy");
  EXPECT_EQ(kernels[0]->launches, 3u);
  EXPECT_EQ(format::medianNs(kernels[0]->durationsNs), 2384u);
  EXPECT_EQ(s.timedTotalNs, 7152u);
  EXPECT_EQ(s.allocTotal.count, 8u);
  EXPECT_EQ(s.peakLiveBytes, 2181120u);
  EXPECT_EQ(s.allocByKind.at("vmmCreate").bytes, 2097152u);
  EXPECT_EQ(s.memcpyTotal.bytes, 16448u);
  EXPECT_EQ(s.memcpyCapturedBytes, 10304u);
  EXPECT_EQ(s.memsetTotal.bytes, 6144u);
  EXPECT_EQ(s.contentRaw, 83848u);
  EXPECT_EQ(s.contentRawByType.at("launch"), 36932u);
  EXPECT_EQ(s.blobChunks, 17u);
  EXPECT_EQ(s.blobRaw, 46920u);
  EXPECT_EQ(s.recordChunks, 3u);
  const auto types = format::eventTypesByCount(s);
  ASSERT_FALSE(types.empty());
  EXPECT_EQ(types.front(), std::make_pair(std::string("alloc"), uint64_t{8}));
}

}  // namespace
}  // namespace kcap::test
