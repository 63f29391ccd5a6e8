// libFuzzer target for the trace reader.
//
// Each input is written to an in-memory file (memfd, opened again through
// /proc/self/fd; a /tmp file with the pid in its name where memfd is missing)
// and read the way `kcap info/dump/check` would: open, every event with every
// field touched, every content the events reference, verifyChunk on every
// chunk, and the summary `kcap info` prints (summarizeTrace). FormatError is
// the only acceptable failure; any other exception, a crash, a leak or a
// sanitizer report is a bug.
//
// Checksums stop almost every mutation at the container layer, so each input
// is read twice: as given, and with its header, chunk and trailer checksums
// recomputed (fixChecksums), which lets mutations reach zstd, the Cap'n Proto
// messages, the index and the content bookkeeping behind the checksums.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include <kj/exception.h>

#include "errors.h"
#include "input_file.h"
#include "message_check.h"
#include "trace_files.h"
#include "trace_reader.h"
#include "trace_summary.h"

namespace {

using kcap::schema::Event;

// Contents larger than this are read into a small buffer instead, which the
// reader must refuse: a hostile trace may name one real piece many times, and
// reading such a claim into memory would only measure the fuzzer's RSS limit.
constexpr uint64_t kMaxContentRead = 64ull << 20;

volatile uint64_t g_sink = 0;

struct Sink {
  uint64_t value = 0;
  void add(uint64_t v) { value = value * 31 + v; }
  void text(capnp::Text::Reader t) {
    add(t.size());
    if (t.size() > 0) add(static_cast<uint8_t>(t[0]) + static_cast<uint8_t>(t[t.size() - 1]));
  }
  void data(capnp::Data::Reader d) {
    add(d.size());
    for (uint8_t b : d) add(b);
  }
  void content(kcap::schema::Content::Reader c) {
    add(c.getSize());
    add(c.getPieceSize());
    for (auto p : c.getPieces()) add(p.getHigh() ^ p.getLow());
  }
  void ranges(capnp::List<kcap::schema::MemoryRange>::Reader list) {
    for (auto r : list) {
      add(r.getAddress());
      add(r.getAllocationBase());
      add(static_cast<uint64_t>(r.getKind()));
      content(r.getContent());
    }
  }
};

void touch(Event::Reader e, Sink& s) {
  s.add(e.getSeq());
  s.add(e.getTimeNs());
  s.add(e.getThreadId());
  switch (e.which()) {
    case Event::TRACE_BEGIN: {
      auto b = e.getTraceBegin();
      s.text(b.getHostName());
      s.add(b.getProcessId());
      for (auto a : b.getArgv()) s.text(a);
      for (auto kv : b.getEnvironment()) {
        s.text(kv.getKey());
        s.text(kv.getValue());
      }
      s.add(static_cast<uint64_t>(b.getDriverVersion()) + static_cast<uint64_t>(b.getRuntimeVersion()));
      for (auto d : b.getDevices()) {
        s.add(static_cast<uint64_t>(d.getOrdinal()));
        s.text(d.getName());
        s.data(d.getUuid());
        s.add(static_cast<uint64_t>(d.getComputeCapabilityMajor()) * 10 +
              static_cast<uint64_t>(d.getComputeCapabilityMinor()));
        s.add(d.getTotalMemoryBytes());
        s.add(static_cast<uint64_t>(d.getMultiprocessorCount()));
        s.text(d.getPciBusId());
      }
      s.add(b.getStartUnixNs() + b.getStartMonotonicNs());
      s.text(b.getKcapVersion());
      s.add(static_cast<uint64_t>(b.getCaptureMode()));
      for (auto kv : b.getOptions()) s.text(kv.getValue());
      for (auto kv : b.getLibraries()) s.text(kv.getValue());
      break;
    }
    case Event::TRACE_END: {
      auto t = e.getTraceEnd();
      s.add(static_cast<uint64_t>(t.getReason()));
      s.add(static_cast<uint64_t>(t.getSignal()));
      s.add(t.getEventCount() + t.getLaunchCount() + t.getDroppedLaunches());
      s.text(t.getMessage());
      break;
    }
    case Event::MODULE_LOAD: {
      auto m = e.getModuleLoad();
      s.add(m.getHandle());
      s.add(m.getIsLibrary());
      s.add(static_cast<uint64_t>(m.getApi()) + static_cast<uint64_t>(m.getImageKind()));
      s.content(m.getImage());
      s.text(m.getPath());
      for (auto j : m.getJitOptions()) s.add(j.getValue() + static_cast<uint64_t>(j.getOption()));
      s.add(m.getContext());
      s.add(static_cast<uint64_t>(m.getDevice()) + static_cast<uint64_t>(m.getResult()));
      for (auto g : m.getGlobals()) {
        s.text(g.getName());
        s.add(g.getAddress() + g.getSize());
      }
      for (auto x : m.getExtraImages()) s.content(x);
      break;
    }
    case Event::MODULE_UNLOAD:
      s.add(e.getModuleUnload().getHandle() + e.getModuleUnload().getIsLibrary());
      break;
    case Event::FUNCTION_BIND: {
      auto f = e.getFunctionBind();
      s.add(f.getHandle() + f.getIsKernel() + f.getModuleHandle() + f.getContext() + f.getSourceHandle());
      s.text(f.getName());
      for (auto p : f.getParams()) s.add(p.getOffset() + p.getSize());
      s.add(static_cast<uint64_t>(f.getApi()));
      break;
    }
    case Event::FUNCTION_ATTRIBUTE: {
      auto a = e.getFunctionAttribute();
      s.add(a.getHandle() + static_cast<uint64_t>(a.getApi()) + static_cast<uint64_t>(a.getAttribute()) +
            static_cast<uint64_t>(a.getValue()) + static_cast<uint64_t>(a.getDevice()) +
            static_cast<uint64_t>(a.getResult()));
      break;
    }
    case Event::ALLOC: {
      auto a = e.getAlloc();
      s.add(static_cast<uint64_t>(a.getKind()) + a.getAddress() + a.getSize() + a.getPitch() + a.getContext() +
            a.getStream() + a.getHandle() + a.getOffset() + a.getFlags() + static_cast<uint64_t>(a.getDevice()) +
            static_cast<uint64_t>(a.getResult()));
      break;
    }
    case Event::FREE: {
      auto f = e.getFree();
      s.add(static_cast<uint64_t>(f.getKind()) + f.getAddress() + f.getSize() + f.getStream() + f.getHandle() +
            static_cast<uint64_t>(f.getResult()));
      break;
    }
    case Event::MEMCPY: {
      auto c = e.getMemcpy();
      s.add(static_cast<uint64_t>(c.getDirection()) + c.getDst() + c.getSrc() + c.getSize() + c.getStream() +
            c.getIsAsync() + static_cast<uint64_t>(c.getResult()) + c.getWidth() + c.getHeight() + c.getDstPitch() +
            c.getSrcPitch() + c.getDepth() + c.getDstHeight() + c.getSrcHeight());
      s.content(c.getData());
      break;
    }
    case Event::MEMSET: {
      auto m = e.getMemset();
      s.add(m.getDst() + m.getValue() + m.getElementSize() + m.getCount() + m.getHeight() + m.getPitch() +
            m.getStream() + m.getIsAsync() + static_cast<uint64_t>(m.getResult()));
      break;
    }
    case Event::SYNC: {
      auto o = e.getSync();
      s.add(static_cast<uint64_t>(o.getOp()) + o.getStream() + o.getEvent() + o.getFlags() +
            static_cast<uint64_t>(o.getPriority()) + static_cast<uint64_t>(o.getResult()));
      break;
    }
    case Event::LAUNCH: {
      auto l = e.getLaunch();
      s.add(l.getLaunchIndex() + static_cast<uint64_t>(l.getApi()) + l.getPerThreadStream() + l.getFunction());
      s.text(l.getKernelName());
      s.add(uint64_t{l.getGridX()} * l.getGridY() * l.getGridZ());
      s.add(uint64_t{l.getBlockX()} * l.getBlockY() * l.getBlockZ());
      s.add(l.getSharedMemBytes() + l.getStream() + l.getContext() + static_cast<uint64_t>(l.getDevice()));
      for (auto a : l.getAttributes()) {
        s.add(static_cast<uint64_t>(a.getId()));
        s.data(a.getValue());
      }
      s.data(l.getParams());
      for (auto p : l.getParamLayout()) s.add(p.getOffset() + p.getSize());
      for (auto p : l.getPointers()) s.add(p.getOffset() + p.getValue() + p.getAllocationBase() + p.getInTensorMap());
      for (auto p : l.getIndirectPointers()) {
        s.add(p.getBufferAddress() + p.getOffset() + p.getValue() + p.getAllocationBase());
      }
      s.ranges(l.getPre());
      s.add(l.getCapturing() + l.getParamsFromExtra());
      break;
    }
    case Event::LAUNCH_END: {
      auto end = e.getLaunchEnd();
      s.add(end.getLaunchIndex() + static_cast<uint64_t>(end.getResult()) + static_cast<uint64_t>(end.getSyncResult()));
      s.ranges(end.getPost());
      break;
    }
    case Event::KERNEL_TIMING: {
      auto t = e.getKernelTiming();
      s.add(t.getLaunchIndex() + t.getStartNs() + t.getEndNs());
      break;
    }
    case Event::GRAPH_LAUNCH: {
      auto g = e.getGraphLaunch();
      s.add(g.getGraphExec() + g.getStream() + static_cast<uint64_t>(g.getResult()));
      break;
    }
    case Event::API_ERROR: {
      auto a = e.getApiError();
      s.text(a.getFunction());
      s.add(static_cast<uint64_t>(a.getResult()));
      s.text(a.getResultName());
      break;
    }
    case Event::TENSOR_MAP_ENCODE: {
      auto t = e.getTensorMapEncode();
      s.add(static_cast<uint64_t>(t.getApi()) + static_cast<uint64_t>(t.getDataType()) + t.getRank() +
            t.getGlobalAddress());
      for (auto v : t.getGlobalDim()) s.add(v);
      for (auto v : t.getGlobalStrides()) s.add(v);
      for (auto v : t.getBoxDim()) s.add(v);
      for (auto v : t.getElementStrides()) s.add(v);
      for (auto v : t.getPixelBoxLowerCorner()) s.add(static_cast<uint64_t>(v));
      for (auto v : t.getPixelBoxUpperCorner()) s.add(static_cast<uint64_t>(v));
      s.add(static_cast<uint64_t>(t.getPixelBoxLowerCornerWidth()) +
            static_cast<uint64_t>(t.getPixelBoxUpperCornerWidth()) + t.getChannelsPerPixel() + t.getPixelsPerColumn() +
            static_cast<uint64_t>(t.getInterleave()) + static_cast<uint64_t>(t.getSwizzle()) +
            static_cast<uint64_t>(t.getL2Promotion()) + static_cast<uint64_t>(t.getOobFill()) +
            static_cast<uint64_t>(t.getIm2colWideMode()) + static_cast<uint64_t>(t.getResult()));
      s.data(t.getMap());
      break;
    }
    case Event::MESSAGE:
      s.add(static_cast<uint64_t>(e.getMessage().getLevel()));
      s.text(e.getMessage().getText());
      break;
    default:
      s.add(0xffff);  // a union member newer than this harness
      break;
  }
}

void readContent(kcap::format::TraceReader& reader, kcap::schema::Content::Reader content, Sink& s) {
  try {
    if (content.getSize() <= kMaxContentRead) {
      auto bytes = reader.readContent(content);
      s.add(bytes.size());
      if (!bytes.empty()) s.add(bytes[0] + bytes[bytes.size() - 1]);
    } else {
      uint8_t small[64];
      reader.readContentInto(content, small, sizeof small);
      std::abort();  // a content larger than the buffer was "read" into it
    }
  } catch (const kcap::format::FormatError&) {}
}

void readTrace(const std::string& path) {
  std::unique_ptr<kcap::format::TraceReader> reader;
  try {
    reader = kcap::format::TraceReader::open(path);
  } catch (const kcap::format::FormatError&) {
    return;
  }
  Sink s;
  s.add(reader->indexed() + reader->torn() + reader->fileSize() + reader->blobCount());
  s.add(reader->header().formatVersion);
  uint64_t events = reader->forEachEvent([&](const kcap::format::EventRef& ref) {
    touch(ref.event, s);  // the reader checked every field: no kj::Exception may escape
    if (ref.event.isLaunch()) s.add(kcap::format::launchParamProblem(ref.event.getLaunch()).size());
    kcap::test::forEachContent(ref.event, [&](kcap::schema::Content::Reader c) { readContent(*reader, c, s); });
    return true;
  });
  s.add(events);
  for (const auto& chunk : reader->chunks()) {
    s.add(reader->verifyChunk(chunk).size());
    if (chunk.kind == kcap::format::ChunkKind::kBlob) {
      try {
        s.add(reader->readBlob(chunk.hash).size());
      } catch (const kcap::format::FormatError&) {}
    }
  }
  for (const auto& p : reader->problems()) s.add(p.offset + p.message.size());
  try {
    const kcap::format::TraceSummary summary = kcap::format::summarizeTrace(*reader);
    s.add(kcap::format::kernelsByCount(summary).size() + kcap::format::kernelsByGpuTime(summary).size() +
          kcap::format::eventTypesByCount(summary).size());
  } catch (const kcap::format::FormatError&) {}
  g_sink = s.value;  // keeps the work observable, so it is not optimised away
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kcap::fuzz::readAsGivenAndFixed(data, size, readTrace);
  return 0;
}
