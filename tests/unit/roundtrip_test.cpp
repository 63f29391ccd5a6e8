// Every event type of the schema union, written with every field set to a
// distinct non-default value, read back field by field: from the indexed file
// and from a copy whose footer index was cut off (the scanning path).
#include "roundtrip.h"

#include <gtest/gtest.h>

namespace kcap::test {
namespace {

using namespace kcap::test::roundtrip;  // the trace and the fixture (roundtrip.h)

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
    EXPECT_EQ(l.getSnapshotError(), 1);
    EXPECT_EQ(l.getSyncResult(), 2);
    EXPECT_EQ(str(l.getNoSnapshotReason()), "it waits for its peers");
    EXPECT_TRUE(l.getCollectiveCall());
    EXPECT_TRUE(l.getEnded());
    EXPECT_EQ(l.getResult(), 701);
    EXPECT_EQ(l.getCallNs(), 123456789012ull);
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
