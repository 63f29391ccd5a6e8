// RoundTrip::writeAll: the trace roundtrip_test.cpp reads back (roundtrip.h).
#include "roundtrip.h"

namespace kcap::test::roundtrip {

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
    l.setSnapshotError(1);
    l.setSyncResult(2);
    l.setNoSnapshotReason("it waits for its peers");
    l.setCollectiveCall(true);
    l.setEnded(true);
    l.setResult(701);
    l.setCallNs(123456789012ull);
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

}  // namespace kcap::test::roundtrip
