// Every event type of the schema union, written with every field set to a
// distinct non-default value, read back field by field: from the indexed file
// and from a copy whose footer index was cut off (the scanning path).
#include <gtest/gtest.h>

#include <unistd.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <capnp/message.h>

#include "trace_files.h"
#include "trace_reader.h"
#include "trace_writer.h"

namespace kcap::test {
namespace {

using schema::Event;

std::vector<uint8_t> pattern(size_t size, uint8_t salt) {
  std::vector<uint8_t> bytes(size);
  for (size_t i = 0; i < size; ++i) bytes[i] = static_cast<uint8_t>((i * 131 + salt * 7 + (i >> 8)) & 0xff);
  return bytes;
}

std::string str(capnp::Text::Reader text) { return std::string(text.cStr(), text.size()); }
std::vector<uint8_t> vec(capnp::Data::Reader data) { return std::vector<uint8_t>(data.begin(), data.end()); }

constexpr uint32_t kPiece = 4096;

// Content stored by the writer in the trace under test.
const std::vector<uint8_t> kImage = pattern(3 * kPiece + 100, 1);
const std::vector<uint8_t> kExtraImage0 = pattern(777, 2);
const std::vector<uint8_t> kExtraImage1 = pattern(kPiece, 3);
const std::vector<uint8_t> kCopyData = pattern(kPiece + 1, 4);
const std::vector<uint8_t> kPre0 = pattern(2 * kPiece, 5);
const std::vector<uint8_t> kPre1 = pattern(9, 6);
const std::vector<uint8_t> kPost0 = pattern(kPiece - 1, 7);
const std::vector<uint8_t> kParams = pattern(44, 8);
const std::vector<uint8_t> kAttr0 = pattern(64, 9);
const std::vector<uint8_t> kAttr1 = pattern(64, 10);
const std::vector<uint8_t> kUuid0 = pattern(16, 11);
const std::vector<uint8_t> kUuid1 = pattern(16, 12);

class RoundTrip : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("kcap-roundtrip");
    writeAll(dir_->file("all.kcap"));
    // The same file as a killed writer leaves it: no index, no trailer.
    auto bytes = readFileBytes(dir_->file("all.kcap"));
    RawLayout layout = walkChunks(bytes);
    // Not ASSERTs: a failure in SetUpTestSuite shows as every test skipped;
    // SetUp() fails each test with it instead.
    if (!layout.hasTrailer || layout.chunks.empty() || layout.chunks.back().kind != format::ChunkKind::kIndex) {
      setupProblem_ = "the written file does not end with an index chunk and a trailer";
      return;
    }
    bytes.resize(layout.chunks.back().offset);
    writeFileBytes(dir_->file("scanned.kcap"), bytes);
  }
  void SetUp() override { ASSERT_TRUE(setupProblem_.empty()) << setupProblem_; }
  static inline std::string setupProblem_;
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
    written_.clear();
  }

  static void writeAll(const std::string& path);

  // Runs `check` on the event of type `which` read from both files, after
  // checking the fields every event has and that the message read back is
  // byte-identical to the one written.
  void checkBoth(Event::Which which, const std::function<void(Event::Reader, format::TraceReader&)>& check) {
    for (const char* name : {"all.kcap", "scanned.kcap"}) {
      SCOPED_TRACE(name);
      auto reader = format::TraceReader::open(dir_->file(name));
      EXPECT_EQ(reader->indexed(), std::string(name) == "all.kcap");
      EXPECT_TRUE(reader->problems().empty());
      EXPECT_FALSE(reader->torn());
      int found = 0;
      uint64_t expectSeq = 0;
      reader->forEachEvent([&](const format::EventRef& ref) {
        EXPECT_EQ(ref.event.getSeq(), expectSeq++);
        if (ref.event.which() != which) return true;
        ++found;
        const auto& written = written_.at(which);
        Event::Reader original = written.message->getRoot<Event>().asReader();
        EXPECT_EQ(ref.event.getSeq(), written.seq);
        EXPECT_EQ(ref.event.getTimeNs(), original.getTimeNs());
        EXPECT_EQ(ref.event.getThreadId(), original.getThreadId());
        EXPECT_NE(ref.event.getTimeNs(), 0u);
        EXPECT_NE(ref.event.getThreadId(), 0u);
        EXPECT_EQ(eventBytes(ref.event), eventBytes(original));
        check(ref.event, *reader);
        return true;
      });
      EXPECT_EQ(found, 1);
      EXPECT_EQ(expectSeq, written_.size());
    }
  }

  struct Written {
    std::unique_ptr<capnp::MallocMessageBuilder> message;
    uint64_t seq = 0;
  };
  static TempDir* dir_;
  static std::map<Event::Which, Written> written_;
};

TempDir* RoundTrip::dir_ = nullptr;
std::map<Event::Which, RoundTrip::Written> RoundTrip::written_;

void RoundTrip::writeAll(const std::string& path) {
  format::TraceWriter::Options options;
  options.pieceSize = kPiece;
  options.batchBytes = 512;  // several record chunks
  auto writer = format::TraceWriter::create(path, options);
  uint32_t n = 0;
  auto add = [&](const std::function<void(Event::Builder)>& fill) {
    auto message = std::make_unique<capnp::MallocMessageBuilder>();
    auto event = message->initRoot<Event>();
    ++n;
    event.setSeq(999999);  // the writer overwrites it
    event.setTimeNs(1000000007ull * n);
    event.setThreadId(70000 + n);
    fill(event);
    Written w;
    w.seq = writer->append(*message);
    Event::Which which = message->getRoot<Event>().which();
    w.message = std::move(message);
    ASSERT_EQ(written_.count(which), 0u);
    written_.emplace(which, std::move(w));
  };
  auto store = [&](schema::Content::Builder out, const std::vector<uint8_t>& bytes) {
    writer->storeContent(bytes.data(), bytes.size(), out);
  };

  add([&](Event::Builder e) {
    auto b = e.initTraceBegin();
    b.setHostName("host-α.example");
    b.setProcessId(4242);
    auto argv = b.initArgv(3);
    argv.set(0, "/usr/bin/python3");
    argv.set(1, "-c");
    argv.set(2, "print('a b')");
    auto env = b.initEnvironment(2);
    env[0].setKey("CUDA_VISIBLE_DEVICES");
    env[0].setValue("1,0");
    env[1].setKey("KCAP_MODE");
    env[1].setValue("full");
    b.setDriverVersion(13010);
    b.setRuntimeVersion(12090);
    auto devices = b.initDevices(2);
    devices[0].setOrdinal(0);
    devices[0].setName("Device Zero");
    devices[0].setUuid(kj::arrayPtr(kUuid0.data(), kUuid0.size()));
    devices[0].setComputeCapabilityMajor(9);
    devices[0].setComputeCapabilityMinor(0);
    devices[0].setTotalMemoryBytes(150754820096ull);
    devices[0].setMultiprocessorCount(132);
    devices[0].setPciBusId("0000:3b:00.0");
    devices[1].setOrdinal(1);
    devices[1].setName("Device One");
    devices[1].setUuid(kj::arrayPtr(kUuid1.data(), kUuid1.size()));
    devices[1].setComputeCapabilityMajor(8);
    devices[1].setComputeCapabilityMinor(6);
    devices[1].setTotalMemoryBytes(25769803776ull);
    devices[1].setMultiprocessorCount(84);
    devices[1].setPciBusId("0000:86:00.0");
    b.setStartUnixNs(1764480000123456789ull);
    b.setStartMonotonicNs(98765432100000ull);
    b.setKcapVersion("9.8.7-test");
    b.setCaptureMode(schema::CaptureMode::PRE_ONLY);
    auto opts = b.initOptions(1);
    opts[0].setKey("max-snapshot");
    opts[0].setValue("64M");
    auto libs = b.initLibraries(1);
    libs[0].setKey("torch");
    libs[0].setValue("2.9.0");
  });
  add([&](Event::Builder e) {
    auto m = e.initModuleLoad();
    m.setHandle(0x5500000000a1ull);
    m.setIsLibrary(true);
    m.setApi(schema::LoadApi::CUDART_REGISTER_FAT_BINARY);
    m.setImageKind(schema::ImageKind::FATBIN_WRAPPER);
    store(m.initImage(), kImage);
    m.setPath("/opt/kernels/k.fatbin");
    auto jit = m.initJitOptions(2);
    jit[0].setOption(3);
    jit[0].setValue(0xfffffffffffffff0ull);
    jit[1].setOption(11);
    jit[1].setValue(17);
    m.setContext(0x5500000000c1ull);
    m.setDevice(3);
    m.setResult(218);
    auto globals = m.initGlobals(2);
    globals[0].setName("table");
    globals[0].setAddress(0x7f0000001000ull);
    globals[0].setSize(1024);
    globals[1].setName("_ZN2ns7counterE");
    globals[1].setAddress(0x7f0000002000ull);
    globals[1].setSize(8);
    auto extra = m.initExtraImages(2);
    store(extra[0], kExtraImage0);
    store(extra[1], kExtraImage1);
  });
  add([&](Event::Builder e) {
    auto u = e.initModuleUnload();
    u.setHandle(0x5500000000a2ull);
    u.setIsLibrary(true);
  });
  add([&](Event::Builder e) {
    auto f = e.initFunctionBind();
    f.setHandle(0x5500000000f1ull);
    f.setIsKernel(true);
    f.setModuleHandle(0x5500000000a1ull);
    f.setName("_Z6kernelPfS_i");
    auto params = f.initParams(3);
    params[0].setOffset(0);
    params[0].setSize(8);
    params[1].setOffset(8);
    params[1].setSize(8);
    params[2].setOffset(16);
    params[2].setSize(4);
    f.setApi(schema::BindApi::KERNEL_GET_FUNCTION);
    f.setContext(0x5500000000c2ull);
    f.setSourceHandle(0x5500000000f0ull);
  });
  add([&](Event::Builder e) {
    auto a = e.initFunctionAttribute();
    a.setHandle(0x5500000000f2ull);
    a.setApi(schema::AttributeApi::FUNC_SET_SHARED_MEM_CONFIG);
    a.setAttribute(2);
    a.setValue(-123456789012ll);
    a.setDevice(1);
    a.setResult(1);
  });
  add([&](Event::Builder e) {
    auto a = e.initAlloc();
    a.setKind(schema::AllocKind::VMM_MAP);
    a.setAddress(0x7f1000000000ull);
    a.setSize(6ull << 20);
    a.setPitch(512);
    a.setDevice(1);
    a.setContext(0x5500000000c3ull);
    a.setStream(0x5500000000d1ull);
    a.setHandle(0x5500000000e1ull);
    a.setOffset(2ull << 20);
    a.setFlags(0x80000001ull);
    a.setResult(2);
  });
  add([&](Event::Builder e) {
    auto f = e.initFree();
    f.setKind(schema::AllocKind::FROM_POOL);
    f.setAddress(0x7f2000000000ull);
    f.setSize(4096);
    f.setStream(0x5500000000d2ull);
    f.setHandle(0x5500000000e2ull);
    f.setResult(700);
  });
  add([&](Event::Builder e) {
    auto c = e.initMemcpy();
    c.setDirection(schema::CopyDirection::DEVICE_TO_DEVICE);
    c.setDst(0x7f3000000000ull);
    c.setSrc(0x7f3000100000ull);
    c.setSize(kCopyData.size());
    c.setStream(0x5500000000d3ull);
    c.setIsAsync(true);
    store(c.initData(), kCopyData);
    c.setResult(4);
    c.setWidth(1025);
    c.setHeight(4);
    c.setDstPitch(2048);
    c.setSrcPitch(1536);
    c.setDepth(3);
    c.setDstHeight(6);
    c.setSrcHeight(5);
  });
  add([&](Event::Builder e) {
    auto m = e.initMemset();
    m.setDst(0x7f4000000000ull);
    m.setValue(0xdeadbeefu);
    m.setElementSize(4);
    m.setCount(333);
    m.setHeight(7);
    m.setPitch(1536);
    m.setStream(0x5500000000d4ull);
    m.setIsAsync(true);
    m.setResult(5);
  });
  add([&](Event::Builder e) {
    auto s = e.initSync();
    s.setOp(schema::SyncKind::STREAM_WAIT_EVENT);
    s.setStream(0x5500000000d5ull);
    s.setEvent(0x5500000000b1ull);
    s.setFlags(3);
    s.setPriority(-2);
    s.setResult(6);
  });
  add([&](Event::Builder e) {
    auto l = e.initLaunch();
    l.setLaunchIndex(77);
    l.setApi(schema::LaunchApi::LAUNCH_COOPERATIVE_KERNEL);
    l.setPerThreadStream(true);
    l.setFunction(0x5500000000f1ull);
    l.setKernelName("_Z6kernelPfS_i");
    l.setGridX(65535);
    l.setGridY(3);
    l.setGridZ(2);
    l.setBlockX(1024);
    l.setBlockY(1);
    l.setBlockZ(1);
    l.setSharedMemBytes(49152);
    l.setStream(0x5500000000d6ull);
    l.setContext(0x5500000000c4ull);
    l.setDevice(1);
    auto attrs = l.initAttributes(2);
    attrs[0].setId(4);
    attrs[0].setValue(kj::arrayPtr(kAttr0.data(), kAttr0.size()));
    attrs[1].setId(8);
    attrs[1].setValue(kj::arrayPtr(kAttr1.data(), kAttr1.size()));
    l.setParams(kj::arrayPtr(kParams.data(), kParams.size()));
    auto layout = l.initParamLayout(3);
    layout[0].setOffset(0);
    layout[0].setSize(8);
    layout[1].setOffset(8);
    layout[1].setSize(32);
    layout[2].setOffset(40);
    layout[2].setSize(4);
    auto pointers = l.initPointers(2);
    pointers[0].setOffset(0);
    pointers[0].setValue(0x7f5000000040ull);
    pointers[0].setAllocationBase(0x7f5000000000ull);
    pointers[1].setOffset(16);
    pointers[1].setValue(0x7f6000000000ull);
    pointers[1].setAllocationBase(0x7f6000000000ull);
    pointers[1].setInTensorMap(true);
    auto indirect = l.initIndirectPointers(1);
    indirect[0].setBufferAddress(0x7f5000000000ull);
    indirect[0].setOffset(24);
    indirect[0].setValue(0x7f7000000010ull);
    indirect[0].setAllocationBase(0x7f7000000000ull);
    auto pre = l.initPre(2);
    pre[0].setAddress(0x7f5000000000ull);
    store(pre[0].initContent(), kPre0);
    pre[0].setAllocationBase(0x7f5000000000ull);
    pre[0].setKind(schema::MemoryKind::VMM);
    pre[1].setAddress(0x7f7000000010ull);
    store(pre[1].initContent(), kPre1);
    pre[1].setAllocationBase(0x7f7000000000ull);
    pre[1].setKind(schema::MemoryKind::HOST_MAPPED);
    l.setCapturing(true);
    l.setParamsFromExtra(true);
  });
  add([&](Event::Builder e) {
    auto end = e.initLaunchEnd();
    end.setLaunchIndex(77);
    end.setResult(719);
    auto post = end.initPost(1);
    post[0].setAddress(0x7f6000000000ull);
    store(post[0].initContent(), kPost0);
    post[0].setAllocationBase(0x7f6000000000ull);
    post[0].setKind(schema::MemoryKind::MODULE_GLOBAL);
    end.setSyncResult(700);
  });
  add([&](Event::Builder e) {
    auto t = e.initKernelTiming();
    t.setLaunchIndex(78);
    t.setStartNs(1111111111111ull);
    t.setEndNs(1111111222222ull);
  });
  add([&](Event::Builder e) {
    auto g = e.initGraphLaunch();
    g.setGraphExec(0x5500000000a9ull);
    g.setStream(0x5500000000d7ull);
    g.setResult(900);
  });
  add([&](Event::Builder e) {
    auto a = e.initApiError();
    a.setFunction("cuMemAlloc_v2");
    a.setResult(2);
    a.setResultName("CUDA_ERROR_OUT_OF_MEMORY");
  });
  add([&](Event::Builder e) {
    auto m = e.initMessage();
    m.setLevel(schema::Message::Level::ERROR);
    m.setText("recording stopped: disk full\nsecond line");
  });
  add([&](Event::Builder e) {
    auto t = e.initTraceEnd();
    t.setReason(schema::EndReason::FORK_CHILD);
    t.setSignal(11);
    t.setEventCount(16);
    t.setLaunchCount(1);
    t.setDroppedLaunches(5);
    t.setMessage("child 4243 closed the inherited trace");
  });
  writer->close();
}

TEST_F(RoundTrip, CoversEveryUnionMember) {
  // Keep this in step with kcap.capnp: a new event type needs a round trip here.
  EXPECT_EQ(written_.size(), 17u);
  for (uint16_t w = 0; w <= static_cast<uint16_t>(Event::MESSAGE); ++w) {
    EXPECT_EQ(written_.count(static_cast<Event::Which>(w)), 1u) << "union member " << w;
  }
  auto s = format::TraceReader::open(dir_->file("all.kcap"));
  size_t records = 0;
  for (const auto& c : s->chunks()) records += c.kind == format::ChunkKind::kRecords;
  EXPECT_GE(records, 3u) << "batchBytes=512 should cut several record chunks";
}

TEST_F(RoundTrip, TraceBegin) {
  checkBoth(Event::TRACE_BEGIN, [](Event::Reader e, format::TraceReader&) {
    auto b = e.getTraceBegin();
    EXPECT_EQ(e.getSeq(), 0u);
    EXPECT_EQ(str(b.getHostName()), "host-α.example");
    EXPECT_EQ(b.getProcessId(), 4242u);
    ASSERT_EQ(b.getArgv().size(), 3u);
    EXPECT_EQ(str(b.getArgv()[0]), "/usr/bin/python3");
    EXPECT_EQ(str(b.getArgv()[1]), "-c");
    EXPECT_EQ(str(b.getArgv()[2]), "print('a b')");
    ASSERT_EQ(b.getEnvironment().size(), 2u);
    EXPECT_EQ(str(b.getEnvironment()[0].getKey()), "CUDA_VISIBLE_DEVICES");
    EXPECT_EQ(str(b.getEnvironment()[0].getValue()), "1,0");
    EXPECT_EQ(str(b.getEnvironment()[1].getKey()), "KCAP_MODE");
    EXPECT_EQ(str(b.getEnvironment()[1].getValue()), "full");
    EXPECT_EQ(b.getDriverVersion(), 13010);
    EXPECT_EQ(b.getRuntimeVersion(), 12090);
    ASSERT_EQ(b.getDevices().size(), 2u);
    auto d0 = b.getDevices()[0];
    EXPECT_EQ(d0.getOrdinal(), 0);
    EXPECT_EQ(str(d0.getName()), "Device Zero");
    EXPECT_EQ(vec(d0.getUuid()), kUuid0);
    EXPECT_EQ(d0.getComputeCapabilityMajor(), 9);
    EXPECT_EQ(d0.getComputeCapabilityMinor(), 0);
    EXPECT_EQ(d0.getTotalMemoryBytes(), 150754820096ull);
    EXPECT_EQ(d0.getMultiprocessorCount(), 132);
    EXPECT_EQ(str(d0.getPciBusId()), "0000:3b:00.0");
    auto d1 = b.getDevices()[1];
    EXPECT_EQ(d1.getOrdinal(), 1);
    EXPECT_EQ(str(d1.getName()), "Device One");
    EXPECT_EQ(vec(d1.getUuid()), kUuid1);
    EXPECT_EQ(d1.getComputeCapabilityMajor(), 8);
    EXPECT_EQ(d1.getComputeCapabilityMinor(), 6);
    EXPECT_EQ(d1.getTotalMemoryBytes(), 25769803776ull);
    EXPECT_EQ(d1.getMultiprocessorCount(), 84);
    EXPECT_EQ(str(d1.getPciBusId()), "0000:86:00.0");
    EXPECT_EQ(b.getStartUnixNs(), 1764480000123456789ull);
    EXPECT_EQ(b.getStartMonotonicNs(), 98765432100000ull);
    EXPECT_EQ(str(b.getKcapVersion()), "9.8.7-test");
    EXPECT_EQ(b.getCaptureMode(), schema::CaptureMode::PRE_ONLY);
    ASSERT_EQ(b.getOptions().size(), 1u);
    EXPECT_EQ(str(b.getOptions()[0].getKey()), "max-snapshot");
    EXPECT_EQ(str(b.getOptions()[0].getValue()), "64M");
    ASSERT_EQ(b.getLibraries().size(), 1u);
    EXPECT_EQ(str(b.getLibraries()[0].getKey()), "torch");
    EXPECT_EQ(str(b.getLibraries()[0].getValue()), "2.9.0");
  });
}

TEST_F(RoundTrip, ModuleLoad) {
  checkBoth(Event::MODULE_LOAD, [](Event::Reader e, format::TraceReader& r) {
    auto m = e.getModuleLoad();
    EXPECT_EQ(m.getHandle(), 0x5500000000a1ull);
    EXPECT_TRUE(m.getIsLibrary());
    EXPECT_EQ(m.getApi(), schema::LoadApi::CUDART_REGISTER_FAT_BINARY);
    EXPECT_EQ(m.getImageKind(), schema::ImageKind::FATBIN_WRAPPER);
    EXPECT_EQ(m.getImage().getSize(), kImage.size());
    EXPECT_EQ(m.getImage().getPieceSize(), kPiece);
    EXPECT_EQ(m.getImage().getPieces().size(), 4u);
    EXPECT_EQ(r.readContent(m.getImage()), kImage);
    EXPECT_EQ(str(m.getPath()), "/opt/kernels/k.fatbin");
    ASSERT_EQ(m.getJitOptions().size(), 2u);
    EXPECT_EQ(m.getJitOptions()[0].getOption(), 3);
    EXPECT_EQ(m.getJitOptions()[0].getValue(), 0xfffffffffffffff0ull);
    EXPECT_EQ(m.getJitOptions()[1].getOption(), 11);
    EXPECT_EQ(m.getJitOptions()[1].getValue(), 17u);
    EXPECT_EQ(m.getContext(), 0x5500000000c1ull);
    EXPECT_EQ(m.getDevice(), 3);
    EXPECT_EQ(m.getResult(), 218);
    ASSERT_EQ(m.getGlobals().size(), 2u);
    EXPECT_EQ(str(m.getGlobals()[0].getName()), "table");
    EXPECT_EQ(m.getGlobals()[0].getAddress(), 0x7f0000001000ull);
    EXPECT_EQ(m.getGlobals()[0].getSize(), 1024u);
    EXPECT_EQ(str(m.getGlobals()[1].getName()), "_ZN2ns7counterE");
    EXPECT_EQ(m.getGlobals()[1].getAddress(), 0x7f0000002000ull);
    EXPECT_EQ(m.getGlobals()[1].getSize(), 8u);
    ASSERT_EQ(m.getExtraImages().size(), 2u);
    EXPECT_EQ(r.readContent(m.getExtraImages()[0]), kExtraImage0);
    EXPECT_EQ(r.readContent(m.getExtraImages()[1]), kExtraImage1);
  });
}

TEST_F(RoundTrip, ModuleUnload) {
  checkBoth(Event::MODULE_UNLOAD, [](Event::Reader e, format::TraceReader&) {
    EXPECT_EQ(e.getModuleUnload().getHandle(), 0x5500000000a2ull);
    EXPECT_TRUE(e.getModuleUnload().getIsLibrary());
  });
}

TEST_F(RoundTrip, FunctionBind) {
  checkBoth(Event::FUNCTION_BIND, [](Event::Reader e, format::TraceReader&) {
    auto f = e.getFunctionBind();
    EXPECT_EQ(f.getHandle(), 0x5500000000f1ull);
    EXPECT_TRUE(f.getIsKernel());
    EXPECT_EQ(f.getModuleHandle(), 0x5500000000a1ull);
    EXPECT_EQ(str(f.getName()), "_Z6kernelPfS_i");
    ASSERT_EQ(f.getParams().size(), 3u);
    EXPECT_EQ(f.getParams()[0].getOffset(), 0u);
    EXPECT_EQ(f.getParams()[0].getSize(), 8u);
    EXPECT_EQ(f.getParams()[1].getOffset(), 8u);
    EXPECT_EQ(f.getParams()[1].getSize(), 8u);
    EXPECT_EQ(f.getParams()[2].getOffset(), 16u);
    EXPECT_EQ(f.getParams()[2].getSize(), 4u);
    EXPECT_EQ(f.getApi(), schema::BindApi::KERNEL_GET_FUNCTION);
    EXPECT_EQ(f.getContext(), 0x5500000000c2ull);
    EXPECT_EQ(f.getSourceHandle(), 0x5500000000f0ull);
  });
}

TEST_F(RoundTrip, FunctionAttribute) {
  checkBoth(Event::FUNCTION_ATTRIBUTE, [](Event::Reader e, format::TraceReader&) {
    auto a = e.getFunctionAttribute();
    EXPECT_EQ(a.getHandle(), 0x5500000000f2ull);
    EXPECT_EQ(a.getApi(), schema::AttributeApi::FUNC_SET_SHARED_MEM_CONFIG);
    EXPECT_EQ(a.getAttribute(), 2);
    EXPECT_EQ(a.getValue(), -123456789012ll);
    EXPECT_EQ(a.getDevice(), 1);
    EXPECT_EQ(a.getResult(), 1);
  });
}

TEST_F(RoundTrip, Alloc) {
  checkBoth(Event::ALLOC, [](Event::Reader e, format::TraceReader&) {
    auto a = e.getAlloc();
    EXPECT_EQ(a.getKind(), schema::AllocKind::VMM_MAP);
    EXPECT_EQ(a.getAddress(), 0x7f1000000000ull);
    EXPECT_EQ(a.getSize(), 6ull << 20);
    EXPECT_EQ(a.getPitch(), 512u);
    EXPECT_EQ(a.getDevice(), 1);
    EXPECT_EQ(a.getContext(), 0x5500000000c3ull);
    EXPECT_EQ(a.getStream(), 0x5500000000d1ull);
    EXPECT_EQ(a.getHandle(), 0x5500000000e1ull);
    EXPECT_EQ(a.getOffset(), 2ull << 20);
    EXPECT_EQ(a.getFlags(), 0x80000001ull);
    EXPECT_EQ(a.getResult(), 2);
  });
}

TEST_F(RoundTrip, Free) {
  checkBoth(Event::FREE, [](Event::Reader e, format::TraceReader&) {
    auto f = e.getFree();
    EXPECT_EQ(f.getKind(), schema::AllocKind::FROM_POOL);
    EXPECT_EQ(f.getAddress(), 0x7f2000000000ull);
    EXPECT_EQ(f.getSize(), 4096u);
    EXPECT_EQ(f.getStream(), 0x5500000000d2ull);
    EXPECT_EQ(f.getHandle(), 0x5500000000e2ull);
    EXPECT_EQ(f.getResult(), 700);
  });
}

TEST_F(RoundTrip, Memcpy) {
  checkBoth(Event::MEMCPY, [](Event::Reader e, format::TraceReader& r) {
    auto c = e.getMemcpy();
    EXPECT_EQ(c.getDirection(), schema::CopyDirection::DEVICE_TO_DEVICE);
    EXPECT_EQ(c.getDst(), 0x7f3000000000ull);
    EXPECT_EQ(c.getSrc(), 0x7f3000100000ull);
    EXPECT_EQ(c.getSize(), kCopyData.size());
    EXPECT_EQ(c.getStream(), 0x5500000000d3ull);
    EXPECT_TRUE(c.getIsAsync());
    EXPECT_EQ(c.getData().getPieces().size(), 2u);
    EXPECT_EQ(r.readContent(c.getData()), kCopyData);
    EXPECT_EQ(c.getResult(), 4);
    EXPECT_EQ(c.getWidth(), 1025u);
    EXPECT_EQ(c.getHeight(), 4u);
    EXPECT_EQ(c.getDstPitch(), 2048u);
    EXPECT_EQ(c.getSrcPitch(), 1536u);
    EXPECT_EQ(c.getDepth(), 3u);
    EXPECT_EQ(c.getDstHeight(), 6u);
    EXPECT_EQ(c.getSrcHeight(), 5u);
  });
}

TEST_F(RoundTrip, Memset) {
  checkBoth(Event::MEMSET, [](Event::Reader e, format::TraceReader&) {
    auto m = e.getMemset();
    EXPECT_EQ(m.getDst(), 0x7f4000000000ull);
    EXPECT_EQ(m.getValue(), 0xdeadbeefu);
    EXPECT_EQ(m.getElementSize(), 4u);
    EXPECT_EQ(m.getCount(), 333u);
    EXPECT_EQ(m.getHeight(), 7u);
    EXPECT_EQ(m.getPitch(), 1536u);
    EXPECT_EQ(m.getStream(), 0x5500000000d4ull);
    EXPECT_TRUE(m.getIsAsync());
    EXPECT_EQ(m.getResult(), 5);
  });
}

TEST_F(RoundTrip, Sync) {
  checkBoth(Event::SYNC, [](Event::Reader e, format::TraceReader&) {
    auto s = e.getSync();
    EXPECT_EQ(s.getOp(), schema::SyncKind::STREAM_WAIT_EVENT);
    EXPECT_EQ(s.getStream(), 0x5500000000d5ull);
    EXPECT_EQ(s.getEvent(), 0x5500000000b1ull);
    EXPECT_EQ(s.getFlags(), 3u);
    EXPECT_EQ(s.getPriority(), -2);
    EXPECT_EQ(s.getResult(), 6);
  });
}

TEST_F(RoundTrip, Launch) {
  checkBoth(Event::LAUNCH, [](Event::Reader e, format::TraceReader& r) {
    auto l = e.getLaunch();
    EXPECT_EQ(l.getLaunchIndex(), 77u);
    EXPECT_EQ(l.getApi(), schema::LaunchApi::LAUNCH_COOPERATIVE_KERNEL);
    EXPECT_TRUE(l.getPerThreadStream());
    EXPECT_EQ(l.getFunction(), 0x5500000000f1ull);
    EXPECT_EQ(str(l.getKernelName()), "_Z6kernelPfS_i");
    EXPECT_EQ(l.getGridX(), 65535u);
    EXPECT_EQ(l.getGridY(), 3u);
    EXPECT_EQ(l.getGridZ(), 2u);
    EXPECT_EQ(l.getBlockX(), 1024u);
    EXPECT_EQ(l.getBlockY(), 1u);
    EXPECT_EQ(l.getBlockZ(), 1u);
    EXPECT_EQ(l.getSharedMemBytes(), 49152u);
    EXPECT_EQ(l.getStream(), 0x5500000000d6ull);
    EXPECT_EQ(l.getContext(), 0x5500000000c4ull);
    EXPECT_EQ(l.getDevice(), 1);
    ASSERT_EQ(l.getAttributes().size(), 2u);
    EXPECT_EQ(l.getAttributes()[0].getId(), 4);
    EXPECT_EQ(vec(l.getAttributes()[0].getValue()), kAttr0);
    EXPECT_EQ(l.getAttributes()[1].getId(), 8);
    EXPECT_EQ(vec(l.getAttributes()[1].getValue()), kAttr1);
    EXPECT_EQ(vec(l.getParams()), kParams);
    ASSERT_EQ(l.getParamLayout().size(), 3u);
    EXPECT_EQ(l.getParamLayout()[0].getOffset(), 0u);
    EXPECT_EQ(l.getParamLayout()[0].getSize(), 8u);
    EXPECT_EQ(l.getParamLayout()[1].getOffset(), 8u);
    EXPECT_EQ(l.getParamLayout()[1].getSize(), 32u);
    EXPECT_EQ(l.getParamLayout()[2].getOffset(), 40u);
    EXPECT_EQ(l.getParamLayout()[2].getSize(), 4u);
    ASSERT_EQ(l.getPointers().size(), 2u);
    EXPECT_EQ(l.getPointers()[0].getOffset(), 0u);
    EXPECT_EQ(l.getPointers()[0].getValue(), 0x7f5000000040ull);
    EXPECT_EQ(l.getPointers()[0].getAllocationBase(), 0x7f5000000000ull);
    EXPECT_FALSE(l.getPointers()[0].getInTensorMap());
    EXPECT_EQ(l.getPointers()[1].getOffset(), 16u);
    EXPECT_EQ(l.getPointers()[1].getValue(), 0x7f6000000000ull);
    EXPECT_EQ(l.getPointers()[1].getAllocationBase(), 0x7f6000000000ull);
    EXPECT_TRUE(l.getPointers()[1].getInTensorMap());
    ASSERT_EQ(l.getIndirectPointers().size(), 1u);
    EXPECT_EQ(l.getIndirectPointers()[0].getBufferAddress(), 0x7f5000000000ull);
    EXPECT_EQ(l.getIndirectPointers()[0].getOffset(), 24u);
    EXPECT_EQ(l.getIndirectPointers()[0].getValue(), 0x7f7000000010ull);
    EXPECT_EQ(l.getIndirectPointers()[0].getAllocationBase(), 0x7f7000000000ull);
    ASSERT_EQ(l.getPre().size(), 2u);
    EXPECT_EQ(l.getPre()[0].getAddress(), 0x7f5000000000ull);
    EXPECT_EQ(l.getPre()[0].getAllocationBase(), 0x7f5000000000ull);
    EXPECT_EQ(l.getPre()[0].getKind(), schema::MemoryKind::VMM);
    EXPECT_EQ(r.readContent(l.getPre()[0].getContent()), kPre0);
    EXPECT_EQ(l.getPre()[1].getAddress(), 0x7f7000000010ull);
    EXPECT_EQ(l.getPre()[1].getAllocationBase(), 0x7f7000000000ull);
    EXPECT_EQ(l.getPre()[1].getKind(), schema::MemoryKind::HOST_MAPPED);
    EXPECT_EQ(r.readContent(l.getPre()[1].getContent()), kPre1);
    EXPECT_TRUE(l.getCapturing());
    EXPECT_TRUE(l.getParamsFromExtra());
  });
}

TEST_F(RoundTrip, LaunchEnd) {
  checkBoth(Event::LAUNCH_END, [](Event::Reader e, format::TraceReader& r) {
    auto end = e.getLaunchEnd();
    EXPECT_EQ(end.getLaunchIndex(), 77u);
    EXPECT_EQ(end.getResult(), 719);
    ASSERT_EQ(end.getPost().size(), 1u);
    EXPECT_EQ(end.getPost()[0].getAddress(), 0x7f6000000000ull);
    EXPECT_EQ(end.getPost()[0].getAllocationBase(), 0x7f6000000000ull);
    EXPECT_EQ(end.getPost()[0].getKind(), schema::MemoryKind::MODULE_GLOBAL);
    EXPECT_EQ(r.readContent(end.getPost()[0].getContent()), kPost0);
    EXPECT_EQ(end.getSyncResult(), 700);
  });
}

TEST_F(RoundTrip, KernelTiming) {
  checkBoth(Event::KERNEL_TIMING, [](Event::Reader e, format::TraceReader&) {
    auto t = e.getKernelTiming();
    EXPECT_EQ(t.getLaunchIndex(), 78u);
    EXPECT_EQ(t.getStartNs(), 1111111111111ull);
    EXPECT_EQ(t.getEndNs(), 1111111222222ull);
  });
}

TEST_F(RoundTrip, GraphLaunch) {
  checkBoth(Event::GRAPH_LAUNCH, [](Event::Reader e, format::TraceReader&) {
    auto g = e.getGraphLaunch();
    EXPECT_EQ(g.getGraphExec(), 0x5500000000a9ull);
    EXPECT_EQ(g.getStream(), 0x5500000000d7ull);
    EXPECT_EQ(g.getResult(), 900);
  });
}

TEST_F(RoundTrip, ApiError) {
  checkBoth(Event::API_ERROR, [](Event::Reader e, format::TraceReader&) {
    auto a = e.getApiError();
    EXPECT_EQ(str(a.getFunction()), "cuMemAlloc_v2");
    EXPECT_EQ(a.getResult(), 2);
    EXPECT_EQ(str(a.getResultName()), "CUDA_ERROR_OUT_OF_MEMORY");
  });
}

TEST_F(RoundTrip, Message) {
  checkBoth(Event::MESSAGE, [](Event::Reader e, format::TraceReader&) {
    EXPECT_EQ(e.getMessage().getLevel(), schema::Message::Level::ERROR);
    EXPECT_EQ(str(e.getMessage().getText()), "recording stopped: disk full\nsecond line");
  });
}

TEST_F(RoundTrip, TraceEnd) {
  checkBoth(Event::TRACE_END, [](Event::Reader e, format::TraceReader&) {
    auto t = e.getTraceEnd();
    EXPECT_EQ(t.getReason(), schema::EndReason::FORK_CHILD);
    EXPECT_EQ(t.getSignal(), 11);
    EXPECT_EQ(t.getEventCount(), 16u);
    EXPECT_EQ(t.getLaunchCount(), 1u);
    EXPECT_EQ(t.getDroppedLaunches(), 5u);
    EXPECT_EQ(str(t.getMessage()), "child 4243 closed the inherited trace");
  });
}

}  // namespace
}  // namespace kcap::test
