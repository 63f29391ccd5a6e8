// kcap info FILE [--json] [--all]: a readable summary of one trace.
#include <algorithm>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <unordered_map>

#include <CLI/CLI.hpp>
#include <capnp/message.h>

#include "common.h"
#include "subcommands.h"
#include "trace_reader.h"

namespace kcap::tools {
namespace {

using schema::AllocKind;
using schema::Event;

constexpr size_t kDefaultListed = 30;

struct Options {
  std::string path;
  bool json = false;
  bool all = false;
};

struct ModuleInfo {
  uint64_t seq = 0;
  uint64_t handle = 0;
  bool isLibrary = false;
  std::string api;
  std::string imageKind;
  uint64_t imageBytes = 0;
  size_t extraImages = 0;
  std::string path;
  size_t globals = 0;
  int32_t result = 0;
  bool unloaded = false;
};

struct KernelInfo {
  std::string name;
  uint64_t launches = 0;
  uint64_t firstLaunchIndex = 0;
  uint32_t grid[3] = {};
  uint32_t block[3] = {};
  uint32_t sharedMemBytes = 0;
  std::vector<uint64_t> durationsNs;  // kernelTiming of its launches (--timing)
  uint64_t totalNs = 0;
};

struct CountBytes {
  uint64_t count = 0;
  uint64_t bytes = 0;
};

struct EndInfo {
  uint64_t seq = 0;
  std::string reason;
  int32_t signal = 0;
  uint64_t eventCount = 0;
  uint64_t launchCount = 0;
  uint64_t droppedLaunches = 0;
  std::string message;
};

// Kinds whose bytes occupy device memory until freed. Address reservations,
// mappings (the physical memory is counted at vmmCreate) and host memory are
// listed by kind but not counted as live device memory.
bool isDeviceMemory(AllocKind kind) {
  switch (kind) {
    case AllocKind::MEM_ALLOC:
    case AllocKind::MEM_ALLOC_PITCH:
    case AllocKind::MANAGED:
    case AllocKind::ASYNC:
    case AllocKind::FROM_POOL:
    case AllocKind::VMM_CREATE:
      return true;
    default:
      return false;
  }
}

struct Summary {
  // events
  uint64_t events = 0;
  std::map<uint16_t, uint64_t> byType;  // union discriminant -> count
  uint64_t firstTimeNs = 0;
  uint64_t lastTimeNs = 0;
  std::unique_ptr<capnp::MallocMessageBuilder> begin;  // a copy of the first traceBegin
  uint64_t beginSeq = 0;
  std::optional<EndInfo> end;

  // code
  std::vector<ModuleInfo> modules;
  std::unordered_map<uint64_t, size_t> liveModules;  // handle -> index in modules
  uint64_t functionBinds = 0;

  // launches
  uint64_t launches = 0;
  uint64_t failedLaunches = 0;
  uint64_t capturedIntoGraph = 0;
  std::vector<KernelInfo> kernels;
  std::unordered_map<std::string, size_t> kernelIndex;
  std::unordered_map<uint64_t, size_t> kernelOfLaunch;  // launchIndex -> index in kernels
  uint64_t timedLaunches = 0;                           // kernelTiming events matched to a launch
  uint64_t timedTotalNs = 0;

  // memory
  std::map<std::string, CountBytes> allocByKind;
  CountBytes allocTotal;
  uint64_t failedAllocs = 0;
  uint64_t frees = 0;
  std::map<std::pair<bool, uint64_t>, uint64_t> live;  // (keyed by handle, key) -> bytes
  uint64_t liveBytes = 0;
  uint64_t peakLiveBytes = 0;
  std::map<std::string, CountBytes> memcpyByDirection;
  CountBytes memcpyTotal;
  uint64_t memcpyCapturedBytes = 0;
  CountBytes memsetTotal;

  // bytes
  uint64_t contentRaw = 0;
  std::map<std::string, uint64_t> contentRawByType;
  uint64_t blobChunks = 0;
  uint64_t blobRaw = 0;
  uint64_t blobStored = 0;
  uint64_t recordChunks = 0;
  uint64_t recordRaw = 0;
  uint64_t recordStored = 0;
};

void addAlloc(Summary& s, schema::Alloc::Reader a) {
  if (a.getResult() != 0) {
    ++s.failedAllocs;
    return;
  }
  auto& k = s.allocByKind[enumName(a.getKind())];
  ++k.count;
  k.bytes += a.getSize();
  ++s.allocTotal.count;
  s.allocTotal.bytes += a.getSize();
  if (!isDeviceMemory(a.getKind())) return;
  bool byHandle = a.getKind() == AllocKind::VMM_CREATE;
  auto key = std::make_pair(byHandle, byHandle ? a.getHandle() : a.getAddress());
  auto [it, inserted] = s.live.emplace(key, a.getSize());
  if (!inserted) {  // an address reused without a recorded free: replace
    s.liveBytes -= it->second;
    it->second = a.getSize();
  }
  s.liveBytes += a.getSize();
  s.peakLiveBytes = std::max(s.peakLiveBytes, s.liveBytes);
}

void addFree(Summary& s, schema::Free::Reader f) {
  ++s.frees;
  if (f.getResult() != 0 || !isDeviceMemory(f.getKind())) return;
  bool byHandle = f.getKind() == AllocKind::VMM_CREATE;
  auto it = s.live.find(std::make_pair(byHandle, byHandle ? f.getHandle() : f.getAddress()));
  if (it == s.live.end()) return;
  s.liveBytes -= it->second;
  s.live.erase(it);
}

void addEvent(Summary& s, const Event::Reader& e) {
  if (s.events == 0) s.firstTimeNs = e.getTimeNs();
  ++s.events;
  s.lastTimeNs = std::max(s.lastTimeNs, e.getTimeNs());
  ++s.byType[static_cast<uint16_t>(e.which())];

  forEachContent(e, [&](const std::string& path, schema::Content::Reader c) {
    s.contentRaw += c.getSize();
    s.contentRawByType[path.substr(0, path.find('.'))] += c.getSize();
  });

  switch (e.which()) {
    case Event::TRACE_BEGIN:
      if (!s.begin) {
        s.begin = std::make_unique<capnp::MallocMessageBuilder>();
        s.begin->setRoot(e.getTraceBegin());
        s.beginSeq = e.getSeq();
      }
      break;
    case Event::TRACE_END: {
      auto t = e.getTraceEnd();
      s.end = EndInfo{e.getSeq(),         enumName(t.getReason()), t.getSignal(),        t.getEventCount(),
                      t.getLaunchCount(), t.getDroppedLaunches(),  t.getMessage().cStr()};
      break;
    }
    case Event::MODULE_LOAD: {
      auto m = e.getModuleLoad();
      ModuleInfo info;
      info.seq = e.getSeq();
      info.handle = m.getHandle();
      info.isLibrary = m.getIsLibrary();
      info.api = enumName(m.getApi());
      info.imageKind = enumName(m.getImageKind());
      info.imageBytes = m.getImage().getSize();
      info.extraImages = m.getExtraImages().size();
      info.path = m.getPath().cStr();
      info.globals = m.getGlobals().size();
      info.result = m.getResult();
      s.liveModules[info.handle] = s.modules.size();
      s.modules.push_back(std::move(info));
      break;
    }
    case Event::MODULE_UNLOAD: {
      auto it = s.liveModules.find(e.getModuleUnload().getHandle());
      if (it != s.liveModules.end()) {
        s.modules[it->second].unloaded = true;
        s.liveModules.erase(it);
      }
      break;
    }
    case Event::FUNCTION_BIND:
      ++s.functionBinds;
      break;
    case Event::LAUNCH: {
      auto l = e.getLaunch();
      ++s.launches;
      if (l.getCapturing()) ++s.capturedIntoGraph;
      std::string name = l.getKernelName().cStr();
      if (name.empty()) name = "<function " + hex(l.getFunction()) + ">";
      auto [it, inserted] = s.kernelIndex.emplace(name, s.kernels.size());
      if (inserted) {
        KernelInfo k;
        k.name = name;
        k.firstLaunchIndex = l.getLaunchIndex();
        k.grid[0] = l.getGridX(), k.grid[1] = l.getGridY(), k.grid[2] = l.getGridZ();
        k.block[0] = l.getBlockX(), k.block[1] = l.getBlockY(), k.block[2] = l.getBlockZ();
        k.sharedMemBytes = l.getSharedMemBytes();
        s.kernels.push_back(std::move(k));
      }
      ++s.kernels[it->second].launches;
      s.kernelOfLaunch[l.getLaunchIndex()] = it->second;
      break;
    }
    case Event::KERNEL_TIMING: {
      auto t = e.getKernelTiming();
      auto it = s.kernelOfLaunch.find(t.getLaunchIndex());
      if (it == s.kernelOfLaunch.end()) break;
      const uint64_t ns = t.getEndNs() >= t.getStartNs() ? t.getEndNs() - t.getStartNs() : 0;
      KernelInfo& k = s.kernels[it->second];
      k.durationsNs.push_back(ns);
      k.totalNs += ns;
      ++s.timedLaunches;
      s.timedTotalNs += ns;
      break;
    }
    case Event::LAUNCH_END:
      if (e.getLaunchEnd().getResult() != 0) ++s.failedLaunches;
      break;
    case Event::ALLOC:
      addAlloc(s, e.getAlloc());
      break;
    case Event::FREE:
      addFree(s, e.getFree());
      break;
    case Event::MEMCPY: {
      auto m = e.getMemcpy();
      auto& d = s.memcpyByDirection[enumName(m.getDirection())];
      ++d.count;
      d.bytes += m.getSize();
      ++s.memcpyTotal.count;
      s.memcpyTotal.bytes += m.getSize();
      s.memcpyCapturedBytes += m.getData().getSize();
      break;
    }
    case Event::MEMSET: {
      auto m = e.getMemset();
      ++s.memsetTotal.count;
      s.memsetTotal.bytes += m.getCount() * m.getElementSize() * std::max<uint64_t>(m.getHeight(), 1);
      break;
    }
    default:
      break;
  }
}

void addChunks(Summary& s, const format::TraceReader& reader) {
  for (const auto& c : reader.chunks()) {
    if (c.kind == format::ChunkKind::kBlob) {
      ++s.blobChunks;
      s.blobRaw += c.rawSize;
      s.blobStored += c.storedSize;
    } else if (c.kind == format::ChunkKind::kRecords) {
      ++s.recordChunks;
      s.recordRaw += c.rawSize;
      s.recordStored += c.storedSize;
    }
  }
}

std::vector<const KernelInfo*> kernelsByCount(const Summary& s) {
  std::vector<const KernelInfo*> out;
  for (const auto& k : s.kernels) out.push_back(&k);
  std::stable_sort(out.begin(), out.end(),
                   [](const KernelInfo* a, const KernelInfo* b) { return a->launches > b->launches; });
  return out;
}

// Kernels with durations, most GPU time first.
std::vector<const KernelInfo*> kernelsByGpuTime(const Summary& s) {
  std::vector<const KernelInfo*> out;
  for (const auto& k : s.kernels) {
    if (!k.durationsNs.empty()) out.push_back(&k);
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const KernelInfo* a, const KernelInfo* b) { return a->totalNs > b->totalNs; });
  return out;
}

uint64_t medianNs(std::vector<uint64_t> values) {
  if (values.empty()) return 0;
  const size_t middle = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(middle), values.end());
  return values[middle];  // the upper median for an even count: a duration that occurred
}

std::vector<std::pair<std::string, uint64_t>> typesByCount(const Summary& s) {
  std::vector<std::pair<std::string, uint64_t>> out;
  for (auto [which, count] : s.byType) {
    const char* name = eventTypeName(which);
    out.emplace_back(name ? std::string(name) : strf("unknown(%u)", static_cast<unsigned>(which)), count);
  }
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  return out;
}

std::string utcText(uint64_t unixNs) {
  if (unixNs == 0) return "unknown";
  auto seconds = static_cast<time_t>(unixNs / 1000000000ull);
  struct tm tm {};
  if (!gmtime_r(&seconds, &tm)) return "unknown";
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

std::string durationText(uint64_t ns) {
  double s = static_cast<double>(ns) / 1e9;
  if (s < 1e-3) return strf("%.1f us", s * 1e6);
  if (s < 1) return strf("%.1f ms", s * 1e3);
  if (s < 120) return strf("%.2f s", s);
  return strf("%.1f min", s / 60);
}

std::string ratioText(uint64_t num, uint64_t den) {
  if (den == 0) return "-";
  return strf("%.2fx", static_cast<double>(num) / static_cast<double>(den));
}

std::string signedSize(uint64_t a, uint64_t b) {  // a - b
  return a >= b ? humanSize(a - b) : "-" + humanSize(b - a);
}

std::string indexText(const format::TraceReader& reader, bool closed) {
  if (reader.indexed()) return "present";
  if (closed) return "damaged — recovered by scanning";
  return "absent — not closed cleanly — recovered by scanning";
}

// ---- text ---------------------------------------------------------------------

void printText(const Options& opt, const format::TraceReader& reader, const Summary& s, bool closed) {
  std::string out;
  const auto& header = reader.header();
  {
    out += printable(opt.path) + "\n";
    Table t({"", ""});
    t.row({"File size", humanSize(reader.fileSize()) + " (" + withCommas(reader.fileSize()) + " bytes)"});
    t.row({"Format",
           strf("version %u, written by ", header.formatVersion) +
               printable(std::string(header.writerVersion, strnlen(header.writerVersion, sizeof header.writerVersion)),
                         true)});
    t.row({"Index", indexText(reader, closed)});
    t.row({"Torn", reader.torn() ? "yes — the file ends inside a chunk" : "no"});
    if (s.end) {
      std::string end = s.end->reason;
      if (s.end->reason == "signal") end += strf(" %d", s.end->signal);
      end += strf(" (seq %llu): ", static_cast<unsigned long long>(s.end->seq)) + withCommas(s.end->eventCount) +
             " events, " + withCommas(s.end->launchCount) + " launches, " + withCommas(s.end->droppedLaunches) +
             " dropped";
      if (!s.end->message.empty()) end += ", " + printable(s.end->message, true);
      t.row({"Trace end", end});
    } else {
      t.row({"Trace end", "missing (the process did not close the trace)"});
    }
    if (reader.problems().empty()) {
      t.row({"Problems", "none"});
    } else {
      bool first = true;
      for (const auto& p : reader.problems()) {
        t.row({first ? strf("Problems (%zu)", reader.problems().size()) : "",
               strf("at byte %llu: ", static_cast<unsigned long long>(p.offset)) + bareProblem(opt.path, p.message)});
        first = false;
      }
    }
    out += t.render();
  }

  out += "\nEnvironment\n";
  if (!s.begin) {
    out += "  no traceBegin event\n";
  } else {
    auto b = s.begin->getRoot<schema::TraceBegin>().asReader();
    Table t({"", ""});
    t.row({"Host", printable(b.getHostName().cStr())});
    std::string argv;
    for (auto a : b.getArgv()) argv += (argv.empty() ? "" : " ") + word(a.cStr());
    t.row({"Process", strf("pid %u", b.getProcessId()) + (argv.empty() ? "" : ": " + argv)});
    std::string started = utcText(b.getStartUnixNs());
    if (s.events > 0) started += ", last event at +" + durationText(s.lastTimeNs);
    t.row({"Started", started});
    t.row({"Driver",
           versionText(b.getDriverVersion()) + (b.getDriverVersion() > 0 ? strf(" (%d)", b.getDriverVersion()) : "")});
    t.row({"Runtime", versionText(b.getRuntimeVersion()) +
                          (b.getRuntimeVersion() > 0 ? strf(" (%d)", b.getRuntimeVersion()) : "")});
    t.row({"Capture mode", enumName(b.getCaptureMode())});
    if (b.hasKcapVersion()) t.row({"Recorder", "kcap " + printable(b.getKcapVersion().cStr())});
    auto pairs = [&](const char* title, capnp::List<schema::KeyValue>::Reader list, const char* sep) {
      bool first = true;
      for (auto kv : list) {
        // A summary line, not a dump: very long values (NVIDIA_REQUIRE_CUDA
        // lists every driver branch) are cut; `kcap dump` shows them whole.
        std::string value = printable(kv.getValue().cStr());
        if (value.size() > 100) {
          size_t cut = 100;
          while (cut > 0 && (static_cast<unsigned char>(value[cut]) & 0xc0) == 0x80) --cut;  // whole characters
          value = value.substr(0, cut) + strf("... (%zu bytes)", kv.getValue().size());
        }
        t.row({first ? title : "", printable(kv.getKey().cStr()) + sep + value});
        first = false;
      }
    };
    pairs("Options", b.getOptions(), "=");
    pairs("Environment", b.getEnvironment(), "=");
    pairs("Libraries", b.getLibraries(), " ");
    out += t.render();

    auto devices = b.getDevices();
    out += strf("\nDevices (%u)\n", devices.size());
    Table d({"#", "Name", "Arch", "Memory", "SMs", "UUID", "PCI"}, "r  rr");
    for (auto dev : devices) {
      d.row({strf("%d", dev.getOrdinal()), printable(dev.getName().cStr()),
             strf("sm_%d%d", dev.getComputeCapabilityMajor(), dev.getComputeCapabilityMinor()),
             strf("%.1f GiB", static_cast<double>(dev.getTotalMemoryBytes()) / (1024.0 * 1024 * 1024)),
             strf("%d", dev.getMultiprocessorCount()), uuidText(dev.getUuid()),
             dev.hasPciBusId() ? printable(dev.getPciBusId().cStr()) : "-"});
    }
    if (!d.empty()) out += d.render();
  }

  size_t limit = opt.all ? SIZE_MAX : kDefaultListed;
  out += strf("\nModules (%zu loaded, %llu functions bound)\n", s.modules.size(),
              static_cast<unsigned long long>(s.functionBinds));
  if (!s.modules.empty()) {
    Table t({"Seq", "Handle", "API", "Image", "Size", "Globals", "Path"}, "r   rr");
    for (size_t i = 0; i < s.modules.size() && i < limit; ++i) {
      const auto& m = s.modules[i];
      std::string image = m.imageKind;
      if (m.extraImages) image += strf(" +%zu", m.extraImages);
      std::string path = m.path.empty() ? "" : printable(m.path);
      if (m.isLibrary) path = "[library] " + path;
      if (m.unloaded) path = "[unloaded] " + path;
      if (m.result != 0) path = strf("[failed: %d] ", m.result) + path;
      t.row({strf("#%llu", static_cast<unsigned long long>(m.seq)), hex(m.handle), m.api, image,
             humanSize(m.imageBytes), strf("%zu", m.globals), path});
    }
    out += t.render();
    if (s.modules.size() > limit) out += strf("  ... %zu more (--all lists every one)\n", s.modules.size() - limit);
  }

  out += strf("\nKernels (%zu distinct, %s launches", s.kernels.size(), withCommas(s.launches).c_str());
  if (s.failedLaunches) out += ", " + withCommas(s.failedLaunches) + " failed";
  if (s.capturedIntoGraph) out += ", " + withCommas(s.capturedIntoGraph) + " captured into graphs";
  out += ")\n";
  if (!s.kernels.empty()) {
    Table t({"Launches", "Grid", "Block", "Smem", "Kernel"}, "r  r");
    auto sorted = kernelsByCount(s);
    for (size_t i = 0; i < sorted.size() && i < limit; ++i) {
      const auto* k = sorted[i];
      t.row({withCommas(k->launches), dim3Text(k->grid[0], k->grid[1], k->grid[2]),
             dim3Text(k->block[0], k->block[1], k->block[2]), humanSize(k->sharedMemBytes), printable(k->name)});
    }
    out += t.render();
    if (sorted.size() > limit) out += strf("  ... %zu more (--all lists every one)\n", sorted.size() - limit);
  }

  if (s.timedLaunches > 0) {
    out += strf("\nGPU time (%s launches timed by CUPTI, %s in all)\n", withCommas(s.timedLaunches).c_str(),
                durationText(s.timedTotalNs).c_str());
    Table t({"Timed", "Median", "Total", "Kernel"}, "rrr");
    auto sorted = kernelsByGpuTime(s);
    for (size_t i = 0; i < sorted.size() && i < limit; ++i) {
      const auto* k = sorted[i];
      t.row({withCommas(k->durationsNs.size()), durationText(medianNs(k->durationsNs)), durationText(k->totalNs),
             printable(k->name)});
    }
    out += t.render();
    if (sorted.size() > limit) out += strf("  ... %zu more (--all lists every one)\n", sorted.size() - limit);
  }

  out += "\nMemory\n";
  {
    Table t({"", "Count", "Bytes", ""}, " rr");
    for (const auto& [kind, cb] : s.allocByKind) {
      t.row({"alloc " + kind, withCommas(cb.count), humanSize(cb.bytes), ""});
    }
    t.row({"allocations", withCommas(s.allocTotal.count), humanSize(s.allocTotal.bytes),
           "peak live device memory " + humanSize(s.peakLiveBytes) +
               (s.failedAllocs ? ", " + withCommas(s.failedAllocs) + " failed" : "")});
    t.row({"frees", withCommas(s.frees), "", ""});
    for (const auto& [dir, cb] : s.memcpyByDirection) {
      t.row({"memcpy " + dir, withCommas(cb.count), humanSize(cb.bytes), ""});
    }
    t.row({"memcpy", withCommas(s.memcpyTotal.count), humanSize(s.memcpyTotal.bytes),
           "data captured " + humanSize(s.memcpyCapturedBytes)});
    t.row({"memset", withCommas(s.memsetTotal.count), humanSize(s.memsetTotal.bytes), ""});
    out += t.render();
  }

  out += strf("\nEvents (%s)\n", withCommas(s.events).c_str());
  {
    Table t({"", ""}, " r");
    for (const auto& [name, count] : typesByCount(s)) t.row({name, withCommas(count)});
    if (!t.empty()) out += t.render();
  }

  out += "\nStorage\n";
  {
    Table t({"", "", ""}, " r");
    t.row({"Content referenced (raw)", humanSize(s.contentRaw), withCommas(s.contentRaw) + " bytes"});
    for (const auto& [type, bytes] : s.contentRawByType) t.row({"  in " + type, humanSize(bytes), ""});
    t.row({"Unique (blob pieces)", humanSize(s.blobRaw), withCommas(s.blobChunks) + " blobs"});
    t.row({"Stored (compressed)", humanSize(s.blobStored), withCommas(s.blobStored) + " bytes"});
    t.row({"Compression ratio", ratioText(s.blobRaw, s.blobStored), "unique / stored"});
    t.row({"Saved by dedup", signedSize(s.contentRaw, s.blobRaw), "raw - unique"});
    t.row({"Records (raw)", humanSize(s.recordRaw), withCommas(s.recordChunks) + " record chunks"});
    t.row({"Records (stored)", humanSize(s.recordStored), ratioText(s.recordRaw, s.recordStored)});
    out += t.render();
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
}

// ---- JSON ---------------------------------------------------------------------

void printJson(const Options& opt, const format::TraceReader& reader, const Summary& s, bool closed) {
  JsonWriter j;
  const auto& header = reader.header();
  j.beginObject();
  j.value("file", opt.path);
  j.value("fileSize", reader.fileSize());
  j.value("formatVersion", header.formatVersion);
  j.value("writerVersion",
          std::string(header.writerVersion, strnlen(header.writerVersion, sizeof header.writerVersion)));
  j.value("indexed", reader.indexed());
  j.value("closed", closed);
  j.value("torn", reader.torn());
  j.beginArray("problems");
  for (const auto& p : reader.problems()) {
    j.beginObject().value("offset", p.offset).value("message", bareProblem(opt.path, p.message)).endObject();
  }
  j.endArray();
  if (s.end) {
    j.beginObject("traceEnd")
        .value("seq", s.end->seq)
        .value("reason", s.end->reason)
        .value("signal", s.end->signal)
        .value("eventCount", s.end->eventCount)
        .value("launchCount", s.end->launchCount)
        .value("droppedLaunches", s.end->droppedLaunches)
        .value("message", s.end->message)
        .endObject();
  } else {
    j.null("traceEnd");
  }

  if (s.begin) {
    auto b = s.begin->getRoot<schema::TraceBegin>().asReader();
    j.beginObject("environment");
    j.value("seq", s.beginSeq);
    j.value("host", b.getHostName().cStr());
    j.value("pid", b.getProcessId());
    j.beginArray("argv");
    for (auto a : b.getArgv()) j.value({}, a.cStr());
    j.endArray();
    j.value("driverVersion", b.getDriverVersion());
    j.value("runtimeVersion", b.getRuntimeVersion());
    j.value("captureMode", enumName(b.getCaptureMode()));
    j.value("kcapVersion", b.getKcapVersion().cStr());
    j.value("startUnixNs", b.getStartUnixNs());
    auto pairs = [&](const char* key, capnp::List<schema::KeyValue>::Reader list) {
      j.beginObject(key);
      for (auto kv : list) j.value(kv.getKey().cStr(), kv.getValue().cStr());
      j.endObject();
    };
    pairs("options", b.getOptions());
    pairs("environment", b.getEnvironment());
    pairs("libraries", b.getLibraries());
    j.endObject();
    j.beginArray("devices");
    for (auto dev : b.getDevices()) {
      j.beginObject()
          .value("ordinal", dev.getOrdinal())
          .value("name", dev.getName().cStr())
          .value("arch", strf("sm_%d%d", dev.getComputeCapabilityMajor(), dev.getComputeCapabilityMinor()))
          .value("totalMemoryBytes", dev.getTotalMemoryBytes())
          .value("multiprocessorCount", dev.getMultiprocessorCount())
          .value("uuid", hexBytes(dev.getUuid().begin(), dev.getUuid().size()))
          .value("pciBusId", dev.getPciBusId().cStr())
          .endObject();
    }
    j.endArray();
  } else {
    j.null("environment");
    j.beginArray("devices").endArray();
  }

  j.beginArray("modules");
  for (const auto& m : s.modules) {
    j.beginObject()
        .value("seq", m.seq)
        .value("handle", hex(m.handle))
        .value("isLibrary", m.isLibrary)
        .value("api", m.api)
        .value("imageKind", m.imageKind)
        .value("imageBytes", m.imageBytes)
        .value("extraImages", uint64_t{m.extraImages})
        .value("path", m.path)
        .value("globals", uint64_t{m.globals})
        .value("result", m.result)
        .value("unloaded", m.unloaded)
        .endObject();
  }
  j.endArray();
  j.value("functionBinds", s.functionBinds);

  j.beginObject("launches")
      .value("count", s.launches)
      .value("failed", s.failedLaunches)
      .value("capturedIntoGraph", s.capturedIntoGraph)
      .endObject();
  j.beginArray("kernels");
  for (const auto* k : kernelsByCount(s)) {
    j.beginObject()
        .value("name", k->name)
        .value("launches", k->launches)
        .value("firstLaunchIndex", k->firstLaunchIndex);
    j.beginArray("grid").value({}, k->grid[0]).value({}, k->grid[1]).value({}, k->grid[2]).endArray();
    j.beginArray("block").value({}, k->block[0]).value({}, k->block[1]).value({}, k->block[2]).endArray();
    j.value("sharedMemBytes", k->sharedMemBytes);
    if (!k->durationsNs.empty()) {
      j.beginObject("gpuTime")
          .value("timedLaunches", static_cast<uint64_t>(k->durationsNs.size()))
          .value("medianNs", medianNs(k->durationsNs))
          .value("totalNs", k->totalNs)
          .endObject();
    }
    j.endObject();
  }
  j.endArray();
  j.beginObject("gpuTime").value("timedLaunches", s.timedLaunches).value("totalNs", s.timedTotalNs).endObject();

  auto countBytes = [&](std::string_view key, const CountBytes& cb) {
    j.beginObject(key).value("count", cb.count).value("bytes", cb.bytes).endObject();
  };
  j.beginObject("allocations");
  j.value("count", s.allocTotal.count).value("bytes", s.allocTotal.bytes).value("failed", s.failedAllocs);
  j.value("frees", s.frees).value("peakLiveBytes", s.peakLiveBytes);
  j.beginObject("byKind");
  for (const auto& [kind, cb] : s.allocByKind) countBytes(kind, cb);
  j.endObject().endObject();
  j.beginObject("memcpy");
  j.value("count", s.memcpyTotal.count)
      .value("bytes", s.memcpyTotal.bytes)
      .value("capturedBytes", s.memcpyCapturedBytes);
  j.beginObject("byDirection");
  for (const auto& [dir, cb] : s.memcpyByDirection) countBytes(dir, cb);
  j.endObject().endObject();
  countBytes("memset", s.memsetTotal);

  j.beginObject("events").value("count", s.events).value("lastTimeNs", s.lastTimeNs).beginObject("byType");
  for (const auto& [name, count] : typesByCount(s)) j.value(name, count);
  j.endObject().endObject();

  j.beginObject("bytes");
  j.value("raw", s.contentRaw);
  j.beginObject("rawByType");
  for (const auto& [type, bytes] : s.contentRawByType) j.value(type, bytes);
  j.endObject();
  j.value("unique", s.blobRaw).value("stored", s.blobStored);
  if (s.blobStored) {
    j.value("compressionRatio", static_cast<double>(s.blobRaw) / static_cast<double>(s.blobStored));
  } else {
    j.null("compressionRatio");
  }
  j.value("savedByDedup", static_cast<int64_t>(s.contentRaw - s.blobRaw));
  j.beginObject("records").value("raw", s.recordRaw).value("stored", s.recordStored).endObject();
  j.endObject();
  j.beginObject("chunks").value("records", s.recordChunks).value("blobs", s.blobChunks).endObject();
  j.endObject();
  std::string text = j.str() + "\n";
  std::fwrite(text.data(), 1, text.size(), stdout);
}

int runInfo(const Options& opt) {
  return guarded(opt.path, [&] {
    auto reader = format::TraceReader::open(opt.path);
    Summary s;
    reader->forEachEvent([&](const format::EventRef& ref) {
      addEvent(s, ref.event);
      return true;
    });
    addChunks(s, *reader);
    bool closed = reader->closed();
    if (opt.json) {
      printJson(opt, *reader, s, closed);
    } else {
      printText(opt, *reader, s, closed);
    }
    std::fflush(stdout);
    return reader->problems().empty() ? kExitOk : kExitTrace;
  });
}

}  // namespace

Run setupInfo(CLI::App& cmd) {
  auto opt = std::make_shared<Options>();
  cmd.add_option("file", opt->path, "The .kcap trace")->required()->type_name("FILE");
  cmd.add_flag("--json", opt->json, "Print one JSON object instead of text");
  cmd.add_flag("--all", opt->all, "List every module and kernel (text mode lists the first 30)");
  return [opt] { return runInfo(*opt); };
}

}  // namespace kcap::tools
