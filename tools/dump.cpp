// kcap dump FILE [--json] [--limit N] [--type TYPE...]: every event, one per line.
//
// Text:  #SEQ +TIME_US TID TYPE DETAILS   (addresses and handles in hex)
// JSON:  JSON Lines, one capnp::JsonCodec object per event; Data fields and
//        content hashes as hex strings, 64-bit integers as decimal strings.
#include <cstdio>
#include <cstdint>
#include <iostream>
#include <memory>
#include <set>
#include <unordered_map>

#include <CLI/CLI.hpp>

#include "common.h"
#include "dump_json.h"
#include "event_visitor.h"
#include "subcommands.h"
#include "trace_reader.h"

namespace kcap::tools {
namespace {

using schema::Event;

constexpr unsigned kMaxListed = 16;  // entries of one list shown in text mode

struct Options {
  std::string path;
  bool json = false;
  uint64_t limit = UINT64_MAX;
  std::vector<std::string> types;
};

// ---- text ---------------------------------------------------------------------

// Appends " key=value" pieces; the *If forms skip default values.
class Line {
 public:
  explicit Line(std::string& out) : out_(out) {}
  Line& add(const std::string& w) {
    out_ += ' ';
    out_ += w;
    return *this;
  }
  Line& kv(const char* key, const std::string& value) {
    out_ += ' ';
    out_ += key;
    out_ += '=';
    out_ += value;
    return *this;
  }
  Line& num(const char* key, uint64_t v) { return kv(key, std::to_string(v)); }
  Line& snum(const char* key, int64_t v) { return kv(key, std::to_string(v)); }
  Line& addr(const char* key, uint64_t v) { return kv(key, hex(v)); }
  Line& numIf(const char* key, uint64_t v) { return v ? num(key, v) : *this; }
  Line& addrIf(const char* key, uint64_t v) { return v ? addr(key, v) : *this; }
  Line& flag(const char* name, bool on) { return on ? add(name) : *this; }
  Line& result(int32_t r, const char* key = "result") { return r ? snum(key, r) : *this; }

 private:
  std::string& out_;
};

std::string rangesText(capnp::List<schema::MemoryRange>::Reader ranges) {
  std::string out = "[";
  unsigned shown = 0;
  for (auto r : ranges) {
    if (shown == kMaxListed) {
      out += strf(" +%u more", ranges.size() - shown);
      break;
    }
    if (shown++) out += ' ';
    out += hex(r.getAddress()) + "+" + std::to_string(r.getContent().getSize());
    if (r.getKind() != schema::MemoryKind::ALLOCATION) out += "(" + enumName(r.getKind()) + ")";
  }
  return out + "]";
}

// The 128 bytes each successful tensorMapEncode made -> its seq (the newest
// such encode so far in the file), to name the encode of a launch's
// tensor-map parameter.
using TensorMapIndex = std::unordered_map<std::string, uint64_t>;

std::string pointersText(capnp::List<schema::PointerWord>::Reader words, capnp::Data::Reader params = {},
                         const TensorMapIndex* maps = nullptr) {
  std::string out = "[";
  unsigned shown = 0;
  for (auto w : words) {
    if (shown == kMaxListed) {
      out += strf(" +%u more", words.size() - shown);
      break;
    }
    if (shown++) out += ' ';
    out += strf("%u:", w.getOffset()) + hex(w.getValue());
    if (w.getInTensorMap()) {
      out += "(tensorMap";
      constexpr size_t kMapBytes = 128;
      if (maps != nullptr && w.getOffset() + kMapBytes <= params.size()) {
        const auto it =
            maps->find(std::string(reinterpret_cast<const char*>(params.begin()) + w.getOffset(), kMapBytes));
        if (it != maps->end()) out += " encode #" + std::to_string(it->second);
      }
      out += ")";
    }
  }
  return out + "]";
}

void formatTraceBegin(Line& l, schema::TraceBegin::Reader b) {
  std::string argv;
  for (auto a : b.getArgv()) argv += (argv.empty() ? "" : " ") + word(a.cStr());
  l.kv("host", word(b.getHostName().cStr()))
      .num("pid", b.getProcessId())
      .kv("driver", versionText(b.getDriverVersion()))
      .kv("runtime", versionText(b.getRuntimeVersion()))
      .kv("mode", enumName(b.getCaptureMode()))
      .num("devices", b.getDevices().size())
      .kv("kcap", word(b.getKcapVersion().cStr()))
      .kv("argv", "[" + argv + "]");
}

void formatTraceEnd(Line& l, schema::TraceEnd::Reader t) {
  l.add(enumName(t.getReason()));
  if (t.getReason() == schema::EndReason::SIGNAL) l.snum("signal", t.getSignal());
  l.num("events", t.getEventCount()).num("launches", t.getLaunchCount()).num("dropped", t.getDroppedLaunches());
  if (t.hasMessage()) l.kv("message", printable(t.getMessage().cStr(), true));
}

void formatModuleLoad(Line& l, schema::ModuleLoad::Reader m) {
  l.addr("handle", m.getHandle())
      .flag("library", m.getIsLibrary())
      .kv("api", enumName(m.getApi()))
      .kv("image", enumName(m.getImageKind()))
      .num("size", m.getImage().getSize())
      .numIf("extraImages", m.getExtraImages().size())
      .numIf("globals", m.getGlobals().size())
      .numIf("jitOptions", m.getJitOptions().size());
  if (m.hasPath()) l.kv("path", word(m.getPath().cStr()));
  l.addrIf("ctx", m.getContext()).snum("device", m.getDevice()).result(m.getResult());
}

void formatFunctionBind(Line& l, schema::FunctionBind::Reader f) {
  l.addr("handle", f.getHandle())
      .flag("kernel", f.getIsKernel())
      .addr("module", f.getModuleHandle())
      .add(word(f.getName().cStr()))
      .num("params", f.getParams().size())
      .kv("api", enumName(f.getApi()))
      .addrIf("source", f.getSourceHandle());
}

void formatFunctionAttribute(Line& l, schema::FunctionAttribute::Reader f) {
  l.addr("handle", f.getHandle())
      .kv("api", enumName(f.getApi()))
      .snum("attribute", f.getAttribute())
      .snum("value", f.getValue());
  if (f.getDevice() >= 0 && f.getApi() == schema::AttributeApi::KERNEL_SET_ATTRIBUTE) l.snum("device", f.getDevice());
  l.result(f.getResult());
}

void formatAlloc(Line& l, schema::Alloc::Reader a) {
  l.add(enumName(a.getKind()))
      .addr("address", a.getAddress())
      .num("size", a.getSize())
      .numIf("pitch", a.getPitch())
      .snum("device", a.getDevice())
      .addrIf("stream", a.getStream())
      .addrIf("handle", a.getHandle())
      .numIf("offset", a.getOffset())
      .addrIf("flags", a.getFlags())
      .flag("byNccl", a.getByNccl())
      .flag("initialDeferred", a.getInitialDeferred())
      .flag("captured", a.getCaptured());
  if (a.getInitial().size() != 0) l.num("initial", a.getInitial().size());
  l.result(a.getResult());
}

void formatFree(Line& l, schema::Free::Reader f) {
  l.add(enumName(f.getKind()))
      .addr("address", f.getAddress())
      .numIf("size", f.getSize())
      .addrIf("stream", f.getStream())
      .addrIf("handle", f.getHandle())
      .flag("captured", f.getCaptured())
      .result(f.getResult());
}

void formatMemcpy(Line& l, schema::Memcpy::Reader m) {
  l.add(enumName(m.getDirection()))
      .addr("dst", m.getDst())
      .addr("src", m.getSrc())
      .num("size", m.getSize())
      .flag("async", m.getIsAsync())
      .flag("crossDevice", m.getCrossDevice())
      .flag("dataDeferred", m.getDataDeferred())
      .flag("captured", m.getCaptured())
      .addr("stream", m.getStream());
  if (m.getWidth() || m.getHeight()) {
    l.num("width", m.getWidth())
        .num("height", m.getHeight())
        .num("dstPitch", m.getDstPitch())
        .num("srcPitch", m.getSrcPitch());
  }
  if (m.getDepth()) {  // 3D: slices, and the rows from one slice to the next
    l.num("depth", m.getDepth()).num("dstHeight", m.getDstHeight()).num("srcHeight", m.getSrcHeight());
  }
  if (m.hasData()) l.num("data", m.getData().getSize());
  l.result(m.getResult());
}

void formatMemset(Line& l, schema::Memset::Reader m) {
  l.addr("dst", m.getDst())
      .addr("value", m.getValue())
      .num("elementSize", m.getElementSize())
      .num("count", m.getCount());
  if (m.getHeight() > 1 || m.getPitch()) l.num("height", m.getHeight()).num("pitch", m.getPitch());
  l.flag("async", m.getIsAsync()).flag("captured", m.getCaptured()).addr("stream", m.getStream()).result(m.getResult());
}

void formatCollective(Line& l, schema::Collective::Reader c) {
  l.add(enumName(c.getOperation()))
      .addr("comm", c.getComm())
      .snum("rank", c.getRank())
      .snum("ranks", c.getRanks())
      .addr("send", c.getSendBuffer())
      .addr("recv", c.getRecvBuffer())
      .num("count", c.getCount())
      .snum("type", c.getDataType());
  if (c.getReduceOp() >= 0) l.snum("op", c.getReduceOp());
  if (c.getRoot() >= 0) l.snum("root", c.getRoot());
  l.flag("grouped", c.getGrouped()).addr("stream", c.getStream()).num("written", c.getWritten());
  l.flag("captured", c.getCaptured()).addrIf("capturedCopy", c.getCapturedCopy());
  if (c.hasData()) l.num("data", c.getData().getSize());
  if (c.getDataMissing().size() != 0) l.kv("dataMissing", printable(c.getDataMissing().cStr(), true));
  l.flag("dataDeferred", c.getDataDeferred()).result(c.getResult());
}

void formatWrittenData(Line& l, schema::WrittenData::Reader w) {
  l.kv("of", "#" + std::to_string(w.getOf())).addrIf("node", w.getNode());
  if (w.hasData()) l.num("data", w.getData().getSize());
  if (w.getMissing().size() != 0) l.kv("missing", printable(w.getMissing().cStr(), true));
}

void formatSync(Line& l, schema::SyncOp::Reader s) {
  l.add(enumName(s.getOp())).addrIf("stream", s.getStream()).addrIf("event", s.getEvent()).numIf("flags", s.getFlags());
  if (s.getPriority()) l.snum("priority", s.getPriority());
  l.result(s.getResult());
}

// ---- tensor map encodes (CUDA enums by their cuda.h numbers)

std::string pick(uint32_t value, std::initializer_list<const char*> names, const char* what) {
  if (value < names.size()) return names.begin()[value];
  return strf("%s(%u)", what, value);
}

std::string tensorDataTypeText(int32_t t) {
  return pick(static_cast<uint32_t>(t),
              {"u8", "u16", "u32", "i32", "u64", "i64", "f16", "f32", "f64", "bf16", "f32ftz", "tf32", "tf32ftz",
               "16u4align8B", "16u4align16B", "16u6align16B"},
              "type");
}

template <class List>
std::string listText(List list) {
  std::string out = "[";
  for (unsigned i = 0; i < list.size(); ++i) out += (i ? ", " : "") + std::to_string(list[i]);
  return out + "]";
}

void formatTensorMapEncode(Line& l, schema::TensorMapEncode::Reader t) {
  l.add(enumName(t.getApi()))
      .add(tensorDataTypeText(t.getDataType()))
      .add("rank")
      .add(std::to_string(t.getRank()))
      .add("global")
      .add(hex(t.getGlobalAddress()))
      .add("dims")
      .add(listText(t.getGlobalDim()))
      .add("strides")
      .add(listText(t.getGlobalStrides()));
  if (t.getApi() == schema::TensorMapApi::TILED || t.hasBoxDim()) l.add("box").add(listText(t.getBoxDim()));
  l.add("elementStrides").add(listText(t.getElementStrides()));
  if (t.getApi() == schema::TensorMapApi::IM2COL) {
    l.add("lowerCorner")
        .add(listText(t.getPixelBoxLowerCorner()))
        .add("upperCorner")
        .add(listText(t.getPixelBoxUpperCorner()));
  }
  if (t.getApi() == schema::TensorMapApi::IM2COL_WIDE) {
    l.add("lowerCornerW")
        .add(std::to_string(t.getPixelBoxLowerCornerWidth()))
        .add("upperCornerW")
        .add(std::to_string(t.getPixelBoxUpperCornerWidth()))
        .add("mode")
        .add(pick(static_cast<uint32_t>(t.getIm2colWideMode()), {"W", "W128"}, "mode"));
  }
  if (t.getApi() == schema::TensorMapApi::IM2COL || t.getApi() == schema::TensorMapApi::IM2COL_WIDE) {
    l.add("channels").add(std::to_string(t.getChannelsPerPixel()));
    l.add("pixels").add(std::to_string(t.getPixelsPerColumn()));
  }
  l.add("interleave")
      .add(pick(static_cast<uint32_t>(t.getInterleave()), {"none", "16B", "32B"}, "interleave"))
      .add("swizzle")
      .add(pick(static_cast<uint32_t>(t.getSwizzle()),
                {"none", "32B", "64B", "128B", "128B_atom32B", "128B_atom32B_flip8B", "128B_atom64B"}, "swizzle"))
      .add("l2")
      .add(pick(static_cast<uint32_t>(t.getL2Promotion()), {"none", "64B", "128B", "256B"}, "l2"))
      .add("oobFill")
      .add(pick(static_cast<uint32_t>(t.getOobFill()), {"none", "nanRequestZeroFma"}, "oobFill"));
  if (t.getResult() != 0) {
    l.snum("result", t.getResult());
  } else {
    l.kv("map", std::to_string(t.getMap().size()) + "B");
  }
}

void formatLaunch(Line& l, schema::Launch::Reader k, const TensorMapIndex* maps) {
  l.add("#" + std::to_string(k.getLaunchIndex()))
      .add(k.hasKernelName() ? word(k.getKernelName().cStr()) : "<function " + hex(k.getFunction()) + ">")
      .kv("grid", dim3Text(k.getGridX(), k.getGridY(), k.getGridZ()))
      .kv("block", dim3Text(k.getBlockX(), k.getBlockY(), k.getBlockZ()))
      .num("smem", k.getSharedMemBytes())
      .addr("stream", k.getStream())
      .kv("params", std::to_string(k.getParams().size()) + "B")
      .kv("ptrs", pointersText(k.getPointers(), k.getParams(), maps));
  if (k.hasIndirectPointers()) l.num("indirect", k.getIndirectPointers().size());
  l.kv("pre", rangesText(k.getPre()));
  if (k.getApi() != schema::LaunchApi::LAUNCH_KERNEL) l.kv("api", enumName(k.getApi()));
  if (k.hasAttributes()) {
    std::string ids;
    for (auto a : k.getAttributes()) ids += (ids.empty() ? "" : ",") + std::to_string(a.getId());
    l.kv("attrs", "[" + ids + "]");
  }
  l.flag("ptsz", k.getPerThreadStream())
      .flag("capturing", k.getCapturing())
      .flag("collectiveCall", k.getCollectiveCall())
      .flag("paramsFromExtra", k.getParamsFromExtra());
  if (k.getNoSnapshotReason().size() != 0) l.kv("noSnapshot", printable(k.getNoSnapshotReason().cStr(), true));
  l.addr("function", k.getFunction());
  if (k.getEnded()) {  // its outcome here, no launchEnd to follow
    l.snum("result", k.getResult()).kv("call", strf("%.3fus", static_cast<double>(k.getCallNs()) / 1e3));
  }
}

void formatLaunchEnd(Line& l, schema::LaunchEnd::Reader k) {
  l.add("#" + std::to_string(k.getLaunchIndex()))
      .snum("result", k.getResult())
      .result(k.getSyncResult(), "syncResult")
      .kv("post", rangesText(k.getPost()));
}

void formatKernelTiming(Line& l, schema::KernelTiming::Reader t) {
  l.add("#" + std::to_string(t.getLaunchIndex()));
  uint64_t ns = t.getEndNs() >= t.getStartNs() ? t.getEndNs() - t.getStartNs() : 0;
  l.kv("duration", strf("%.3fus", static_cast<double>(ns) / 1e3)).num("start", t.getStartNs()).num("end", t.getEndNs());
}

void formatCheckpoint(Line& l, schema::Checkpoint::Reader c) {
  uint64_t bytes = 0;
  for (const auto range : c.getRanges()) bytes += range.getContent().getSize();
  l.add("#" + std::to_string(c.getOrdinal()))
      .add(enumName(c.getReason()))
      .num("launchCount", c.getLaunchCount())
      .snum("device", c.getDevice())
      .num("ranges", c.getRanges().size())
      .num("bytes", bytes)
      .num("changedPieces", c.getChangedPieces())
      .num("changedBytes", c.getChangedBytes())
      .kv("hold", strf("%.3fms", static_cast<double>(c.getHoldNs()) / 1e6))
      .result(c.getResult());
}

void formatTrigger(Line& l, schema::Trigger::Reader t) {
  l.add(enumName(t.getKind())).add(printable(t.getReason().cStr(), true));
  if (t.getKind() == schema::TriggerKind::ERROR) l.snum("result", t.getResult());
  if (t.getKind() == schema::TriggerKind::SIGNAL) l.snum("signal", t.getSignal());
  if (t.getKind() == schema::TriggerKind::EXIT) l.snum("status", t.getExitStatus());
  if (t.getHasLaunch()) l.num("launch", t.getLaunchIndex());
  l.numIf("droppedEvents", t.getDroppedEvents());
}

// ---- graphs: a line for the executable, an indented line per node

void formatGraphBody(std::string& out, schema::GraphBody::Reader body, unsigned depth, const TensorMapIndex* maps);

void formatGraphNode(std::string& out, schema::GraphNode::Reader n, unsigned depth, const TensorMapIndex* maps) {
  Line l(out);
  l.add(format::graphNodeTypeName(n)).addr("node", n.getHandle()).flag("disabled", !n.getEnabled());
  switch (n.which()) {
    case schema::GraphNode::KERNEL: {
      const auto k = n.getKernel();
      l.add(k.hasKernelName() ? word(k.getKernelName().cStr()) : "<function " + hex(k.getFunction()) + ">")
          .kv("grid", dim3Text(k.getGridX(), k.getGridY(), k.getGridZ()))
          .kv("block", dim3Text(k.getBlockX(), k.getBlockY(), k.getBlockZ()))
          .num("smem", k.getSharedMemBytes())
          .kv("params", std::to_string(k.getParams().size()) + "B")
          .kv("ptrs", pointersText(k.getPointers(), k.getParams(), maps));
      if (k.hasAttributes()) l.num("attrs", k.getAttributes().size());
      break;
    }
    case schema::GraphNode::MEMCPY:
      formatMemcpy(l, n.getMemcpy());
      l.flag("writtenReadBack", n.getWrittenReadBack());
      break;
    case schema::GraphNode::MEMSET:
      formatMemset(l, n.getMemset());
      break;
    case schema::GraphNode::HOST:
      l.addr("function", n.getHost().getFunction()).addr("userData", n.getHost().getUserData());
      break;
    case schema::GraphNode::CHILD_GRAPH:
      formatGraphBody(out, n.getChildGraph(), depth + 1, maps);
      break;
    case schema::GraphNode::EVENT_RECORD:
      l.addr("event", n.getEventRecord());
      break;
    case schema::GraphNode::EVENT_WAIT:
      l.addr("event", n.getEventWait());
      break;
    case schema::GraphNode::MEM_ALLOC:
      l.addr("address", n.getMemAlloc().getAddress())
          .num("size", n.getMemAlloc().getSize())
          .snum("device", n.getMemAlloc().getDevice());
      break;
    case schema::GraphNode::MEM_FREE:
      l.addr("address", n.getMemFree());
      break;
    case schema::GraphNode::CONDITIONAL: {
      const auto c = n.getConditional();
      l.addr("handle", c.getHandle())
          .add(pick(c.getType(), {"if", "while", "switch"}, "type"))
          .num("default", c.getDefaultValue())
          .flag("setDefault", c.getSetDefault());
      for (auto body : c.getBodies()) formatGraphBody(out, body, depth + 1, maps);
      break;
    }
    case schema::GraphNode::UNREADABLE:
      l.snum("type", n.getUnreadable().getType()).add(printable(n.getUnreadable().getWhy().cStr(), true));
      break;
    default:
      break;
  }
}

// Nodes are numbered by their place in the body (edges use the numbers).
void formatGraphBody(std::string& out, schema::GraphBody::Reader body, unsigned depth, const TensorMapIndex* maps) {
  const std::string indent(4 + 2 * depth, ' ');
  out += strf(" (%u nodes, %u edges)", body.getNodes().size(), body.getEdges().size());
  unsigned index = 0;
  for (auto node : body.getNodes()) {
    out += "\n" + indent + strf("%u:", index++);
    formatGraphNode(out, node, depth, maps);
  }
  if (body.getEdges().size() == 0) return;
  out += "\n" + indent + "edges";
  for (auto edge : body.getEdges()) {
    out += strf(" %u->%u", edge.getFrom(), edge.getTo());
    if (edge.getType() != 0 || edge.getFromPort() != 0 || edge.getToPort() != 0) {
      out += strf("(type %u ports %u/%u)", edge.getType(), edge.getFromPort(), edge.getToPort());
    }
  }
}

void formatGraphDefine(std::string& out, Line& l, schema::GraphDefine::Reader g, const TensorMapIndex* maps) {
  l.addr("exec", g.getGraphExec()).addr("graph", g.getGraph()).add(enumName(g.getApi())).numIf("flags", g.getFlags());
  l.result(g.getResult()).flag("incomplete", g.getResult() == 0 && !g.getComplete());
  if (g.getResult() == 0) formatGraphBody(out, g.getBody(), 0, maps);
}

void formatGraphNodeUpdate(std::string& out, Line& l, schema::GraphNodeUpdate::Reader u, const TensorMapIndex* maps) {
  l.addr("exec", u.getGraphExec()).add(enumName(u.getApi())).result(u.getResult());
  if (u.getApi() == schema::GraphUpdateApi::ENABLE) {
    l.add(u.getParams().getEnabled() ? "enabled" : "disabled").addr("node", u.getNode());
    return;
  }
  formatGraphNode(out, u.getParams(), 0, maps);
}

void formatEvent(std::string& out, const Event::Reader& e, const TensorMapIndex* maps) {
  const char* type = eventTypeName(e);
  out += strf("#%-7llu +%-10llu %7u %-17s", static_cast<unsigned long long>(e.getSeq()),
              static_cast<unsigned long long>(e.getTimeNs() / 1000), e.getThreadId(), type ? type : "unknown");
  Line l(out);
  format::visitEvent(
      e, format::Overloaded{
             [&](schema::TraceBegin::Reader b) { formatTraceBegin(l, b); },
             [&](schema::TraceEnd::Reader t) { formatTraceEnd(l, t); },
             [&](schema::ModuleLoad::Reader m) { formatModuleLoad(l, m); },
             [&](schema::ModuleUnload::Reader u) { l.addr("handle", u.getHandle()).flag("library", u.getIsLibrary()); },
             [&](schema::FunctionBind::Reader f) { formatFunctionBind(l, f); },
             [&](schema::FunctionAttribute::Reader a) { formatFunctionAttribute(l, a); },
             [&](schema::Alloc::Reader a) { formatAlloc(l, a); },
             [&](schema::Free::Reader f) { formatFree(l, f); },
             [&](schema::Memcpy::Reader m) { formatMemcpy(l, m); },
             [&](schema::Memset::Reader m) { formatMemset(l, m); },
             [&](schema::Collective::Reader c) { formatCollective(l, c); },
             [&](schema::WrittenData::Reader w) { formatWrittenData(l, w); },
             [&](schema::SyncOp::Reader s) { formatSync(l, s); },
             [&](schema::Launch::Reader k) { formatLaunch(l, k, maps); },
             [&](schema::LaunchEnd::Reader k) { formatLaunchEnd(l, k); },
             [&](schema::KernelTiming::Reader t) { formatKernelTiming(l, t); },
             [&](schema::TensorMapEncode::Reader t) { formatTensorMapEncode(l, t); },
             [&](schema::Checkpoint::Reader c) { formatCheckpoint(l, c); },
             [&](schema::Trigger::Reader t) { formatTrigger(l, t); },
             [&](schema::GraphLaunch::Reader g) {
               l.add("#" + std::to_string(g.getGraphLaunchIndex()))
                   .addr("exec", g.getGraphExec())
                   .addr("stream", g.getStream())
                   .result(g.getResult())
                   .result(g.getSyncResult(), "syncResult")
                   .flag("ptsz", g.getPerThreadStream());
               if (g.hasPre()) l.kv("pre", rangesText(g.getPre()));
               if (g.getNoSnapshotReason().size() != 0) {
                 l.kv("noSnapshot", printable(g.getNoSnapshotReason().cStr(), true));
               }
             },
             [&](schema::GraphLaunchEnd::Reader g) {
               l.add("#" + std::to_string(g.getGraphLaunchIndex()))
                   .snum("result", g.getResult())
                   .result(g.getSyncResult(), "syncResult")
                   .kv("post", rangesText(g.getPost()));
             },
             [&](schema::GraphDefine::Reader g) { formatGraphDefine(out, l, g, maps); },
             [&](schema::GraphNodeUpdate::Reader u) { formatGraphNodeUpdate(out, l, u, maps); },
             [&](schema::ApiError::Reader a) {
               l.add(word(a.getFunction().cStr())).snum("result", a.getResult());
               if (a.hasResultName()) l.add(word(a.getResultName().cStr()));
             },
             [&](schema::Message::Reader m) { l.add(enumName(m.getLevel())).add(printable(m.getText().cStr(), true)); },
             [&](format::UnknownEvent u) {
               l.add(strf("unknown event (union member %u, from a newer writer)", static_cast<unsigned>(u.which)));
             },
         });
  out += '\n';
}

// ---- run ----------------------------------------------------------------------

int runDump(const Options& opt) {
  return guarded(opt.path, [&] {
    std::set<std::string> wanted(opt.types.begin(), opt.types.end());
    auto reader = format::TraceReader::open(opt.path);
    std::unique_ptr<JsonEventEncoder> json;
    if (opt.json) json = std::make_unique<JsonEventEncoder>();
    uint64_t printed = 0;
    std::string line;
    TensorMapIndex maps;
    if (opt.limit > 0) {
      reader->forEachEvent([&](const format::EventRef& ref) {
        if (ref.event.isTensorMapEncode()) {
          const auto encode = ref.event.getTensorMapEncode();
          if (encode.getResult() == 0 && encode.getMap().size() != 0) {
            maps[std::string(reinterpret_cast<const char*>(encode.getMap().begin()), encode.getMap().size())] =
                ref.event.getSeq();
          }
        }
        if (!wanted.empty()) {
          const char* type = eventTypeName(ref.event);
          if (!wanted.count(type ? type : "unknown")) return true;
        }
        line.clear();
        if (json) {
          json->encode(line, ref.event);
        } else {
          formatEvent(line, ref.event, &maps);
        }
        std::fwrite(line.data(), 1, line.size(), stdout);
        return ++printed < opt.limit;
      });
    }
    std::fflush(stdout);
    if (reader->problems().empty()) return kExitOk;
    for (const auto& p : reader->problems()) {
      std::cerr << opt.path << ": at byte " << p.offset << ": " << bareProblem(opt.path, p.message) << "\n";
    }
    return kExitTrace;
  });
}

}  // namespace

Run setupDump(CLI::App& cmd) {
  auto opt = std::make_shared<Options>();
  std::vector<std::string> types = eventTypeNames();
  types.emplace_back("unknown");
  cmd.add_option("file", opt->path, "The .kcap trace")->required()->type_name("FILE");
  cmd.add_flag("--json", opt->json, "Print JSON Lines: one JSON object per event");
  CLI::Validator count(
      [](std::string& text) {
        bool digits = !text.empty() && text.size() <= 19 && text.find_first_not_of("0123456789") == std::string::npos;
        return digits ? std::string() : "'" + text + "' is not a count of events (0 or more)";
      },
      "", "count");
  cmd.add_option("--limit", opt->limit, "Print at most N events (after --type filtering)")
      ->type_name("N")
      ->check(count);
  cmd.add_option("--type", opt->types, "Only events of these types (repeat the option or separate with commas)")
      ->type_name("TYPE")
      ->delimiter(',')
      ->check(CLI::IsMember(types));
  return [opt] { return runDump(*opt); };
}

}  // namespace kcap::tools
