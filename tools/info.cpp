// kcap info FILE [--json] [--all]: a readable summary of one trace.
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <iostream>
#include <memory>

#include <CLI/CLI.hpp>

#include "common.h"
#include "subcommands.h"
#include "trace_reader.h"
#include "trace_summary.h"

namespace kcap::tools {
namespace {

constexpr size_t kDefaultListed = 30;

struct Options {
  std::string path;
  bool json = false;
  bool all = false;
};

using format::CountBytes;
using format::TraceSummary;

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

void printText(const Options& opt, const format::TraceReader& reader, const TraceSummary& s, bool closed) {
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
    const auto b = *s.traceBegin();
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
    auto sorted = format::kernelsByCount(s);
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
    auto sorted = format::kernelsByGpuTime(s);
    for (size_t i = 0; i < sorted.size() && i < limit; ++i) {
      const auto* k = sorted[i];
      t.row({withCommas(k->durationsNs.size()), durationText(format::medianNs(k->durationsNs)),
             durationText(k->totalNs), printable(k->name)});
    }
    out += t.render();
    if (sorted.size() > limit) out += strf("  ... %zu more (--all lists every one)\n", sorted.size() - limit);
  }

  if (s.graphs.definitions != 0 || s.graphs.launches != 0) {
    const auto& g = s.graphs;
    out += strf("\nGraphs (%s executables, %s graph launches", withCommas(g.executables).c_str(),
                withCommas(g.launches).c_str());
    if (g.launchesWithMemory) out += ", " + withCommas(g.launchesWithMemory) + " with their memory";
    out += ")\n";
    Table t({"", "Count"}, " r");
    t.row({"definitions",
           withCommas(g.definitions) + (g.incomplete ? " (" + withCommas(g.incomplete) + " incomplete)" : "")});
    t.row({"node updates", withCommas(g.updates)});
    for (const auto& [kind, n] : g.nodesByKind) t.row({kind + " nodes", withCommas(n)});
    out += t.render();
  }

  if (const auto& x = s.externalWrites; x.collectives != 0 || x.crossDeviceCopies != 0) {
    std::string calls;
    for (const auto& [op, n] : x.collectivesByOperation)
      calls += (calls.empty() ? ": " : ", ") + op + " " + withCommas(n);
    out += strf("\nWritten by other GPUs (%s NCCL calls%s; %s copies from another device)\n",
                withCommas(x.collectives).c_str(), calls.c_str(), withCommas(x.crossDeviceCopies).c_str());
    Table t({"", "Count", "Bytes", ""}, " rr");
    t.row({"written on this rank", withCommas(x.collectives + x.crossDeviceCopies),
           humanSize(x.collectiveBytes + x.crossDeviceBytes), ""});
    t.row({"logged", withCommas(x.logged.count), humanSize(x.logged.bytes),
           x.readBackLater ? withCommas(x.readBackLater) + " read back after their call" : ""});
    if (x.captured != 0) {
      t.row({"captured into graphs", withCommas(x.captured), "",
             "read back after each graph launch, through " + withCommas(x.capturedSlots.size()) + " copy slot(s)"});
      t.row({"read back at graph launches", withCommas(x.graphReadBacks.count), humanSize(x.graphReadBacks.bytes), ""});
    }
    if (x.notLogged) t.row({"not logged", withCommas(x.notLogged), "", "kcap dump says why (dataMissing, missing)"});
    out += t.render();
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
    if (s.graphMemory.count != 0) {
      t.row({"graph memory", withCommas(s.graphMemory.count), humanSize(s.graphMemory.bytes),
             "captured allocation nodes: their graphs' launches make the memory"});
    }
    if (s.firstContents.count != 0 || s.firstContentsReadBack != 0) {
      std::string how = withCommas(s.firstContentsReadBack) + " read back on their stream";
      if (s.firstContentsMissing != 0) how += ", " + withCommas(s.firstContentsMissing) + " not read back";
      t.row({"first contents logged", withCommas(s.firstContents.count), humanSize(s.firstContents.bytes), how});
    }
    for (const auto& [dir, cb] : s.memcpyByDirection) {
      t.row({"memcpy " + dir, withCommas(cb.count), humanSize(cb.bytes), ""});
    }
    t.row({"memcpy", withCommas(s.memcpyTotal.count), humanSize(s.memcpyTotal.bytes),
           "data captured " + humanSize(s.memcpyCapturedBytes)});
    t.row({"memset", withCommas(s.memsetTotal.count), humanSize(s.memsetTotal.bytes), ""});
    out += t.render();
  }

  if (s.checkpoints > 0) {
    out += strf("\nCheckpoints (%s", withCommas(s.checkpoints).c_str());
    if (s.incompleteCheckpoints) out += ", " + withCommas(s.incompleteCheckpoints) + " incomplete";
    out += ")\n";
    Table t({"", "", ""}, " r");
    t.row({"largest", humanSize(s.checkpointMaxBytes), "live device memory"});
    t.row({"changed", humanSize(s.checkpointChangedBytes), "copied from the device, all checkpoints"});
    t.row({"longest hold", durationText(s.checkpointMaxHoldNs), "the program waited for one"});
    t.row({"total hold", durationText(s.checkpointHoldNs), "the program waited for all"});
    if (s.checkpointDevice >= 0) {
      uint64_t elsewhere = 0;
      for (const auto& [device, launches] : s.launchesByDevice) {
        if (device >= 0 && device != s.checkpointDevice) elsewhere += launches;
      }
      t.row({"device", std::to_string(s.checkpointDevice),
             elsewhere == 0 ? "whose memory they hold"
                            : "whose memory they hold; " + withCommas(elsewhere) +
                                  " launches on other devices are not re-executed"});
    }
    out += t.render();
  }
  if (!s.triggers.empty()) {
    out += strf("\nTriggers (%zu)\n", s.triggers.size());
    Table t({"Seq", "Time", "Kind", "Reason"}, "rr");
    for (const auto& trigger : s.triggers) {
      std::string reason = printable(trigger.reason);
      if (trigger.droppedEvents) reason += " (" + withCommas(trigger.droppedEvents) + " earlier events not kept)";
      t.row({strf("#%llu", static_cast<unsigned long long>(trigger.seq)), durationText(trigger.timeNs), trigger.kind,
             reason});
    }
    out += t.render();
  }

  out += strf("\nEvents (%s)\n", withCommas(s.events).c_str());
  {
    Table t({"", ""}, " r");
    for (const auto& [name, count] : format::eventTypesByCount(s)) t.row({name, withCommas(count)});
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

Json countBytesJson(const CountBytes& cb) { return {{"count", cb.count}, {"bytes", cb.bytes}}; }

Json environmentJson(const TraceSummary& s, schema::TraceBegin::Reader b) {
  Json argv = Json::array();
  for (auto a : b.getArgv()) argv.push_back(a.cStr());
  Json environment = {{"seq", s.beginSeq},
                      {"host", b.getHostName().cStr()},
                      {"pid", b.getProcessId()},
                      {"argv", std::move(argv)},
                      {"driverVersion", b.getDriverVersion()},
                      {"runtimeVersion", b.getRuntimeVersion()},
                      {"captureMode", enumName(b.getCaptureMode())},
                      {"kcapVersion", b.getKcapVersion().cStr()},
                      {"startUnixNs", b.getStartUnixNs()}};
  auto pairs = [&](const char* key, capnp::List<schema::KeyValue>::Reader list) {
    Json object = Json::object();
    for (auto kv : list) appendMember(object, kv.getKey().cStr(), kv.getValue().cStr());
    environment[key] = std::move(object);
  };
  pairs("options", b.getOptions());
  pairs("environment", b.getEnvironment());
  pairs("libraries", b.getLibraries());
  return environment;
}

Json devicesJson(schema::TraceBegin::Reader b) {
  Json devices = Json::array();
  for (auto dev : b.getDevices()) {
    devices.push_back({{"ordinal", dev.getOrdinal()},
                       {"name", dev.getName().cStr()},
                       {"arch", strf("sm_%d%d", dev.getComputeCapabilityMajor(), dev.getComputeCapabilityMinor())},
                       {"totalMemoryBytes", dev.getTotalMemoryBytes()},
                       {"multiprocessorCount", dev.getMultiprocessorCount()},
                       {"uuid", hexBytes(dev.getUuid().begin(), dev.getUuid().size())},
                       {"pciBusId", dev.getPciBusId().cStr()}});
  }
  return devices;
}

Json kernelsJson(const TraceSummary& s) {
  Json kernels = Json::array();
  for (const auto* k : format::kernelsByCount(s)) {
    Json kernel = {{"name", k->name},
                   {"launches", k->launches},
                   {"firstLaunchIndex", k->firstLaunchIndex},
                   {"grid", {k->grid[0], k->grid[1], k->grid[2]}},
                   {"block", {k->block[0], k->block[1], k->block[2]}},
                   {"sharedMemBytes", k->sharedMemBytes}};
    if (!k->durationsNs.empty()) {
      kernel["gpuTime"] = {{"timedLaunches", static_cast<uint64_t>(k->durationsNs.size())},
                           {"medianNs", format::medianNs(k->durationsNs)},
                           {"totalNs", k->totalNs}};
    }
    kernels.push_back(std::move(kernel));
  }
  return kernels;
}

void printJson(const Options& opt, const format::TraceReader& reader, const TraceSummary& s, bool closed) {
  const auto& header = reader.header();
  Json j = {
      {"file", opt.path},
      {"fileSize", reader.fileSize()},
      {"formatVersion", header.formatVersion},
      {"writerVersion", std::string(header.writerVersion, strnlen(header.writerVersion, sizeof header.writerVersion))},
      {"indexed", reader.indexed()},
      {"closed", closed},
      {"torn", reader.torn()}};
  Json problems = Json::array();
  for (const auto& p : reader.problems()) {
    problems.push_back({{"offset", p.offset}, {"message", bareProblem(opt.path, p.message)}});
  }
  j["problems"] = std::move(problems);
  if (s.end) {
    j["traceEnd"] = {{"seq", s.end->seq},
                     {"reason", s.end->reason},
                     {"signal", s.end->signal},
                     {"eventCount", s.end->eventCount},
                     {"launchCount", s.end->launchCount},
                     {"droppedLaunches", s.end->droppedLaunches},
                     {"message", s.end->message}};
  } else {
    j["traceEnd"] = nullptr;
  }
  if (const auto b = s.traceBegin()) {
    j["environment"] = environmentJson(s, *b);
    j["devices"] = devicesJson(*b);
  } else {
    j["environment"] = nullptr;
    j["devices"] = Json::array();
  }

  Json modules = Json::array();
  for (const auto& m : s.modules) {
    modules.push_back({{"seq", m.seq},
                       {"handle", hex(m.handle)},
                       {"isLibrary", m.isLibrary},
                       {"api", m.api},
                       {"imageKind", m.imageKind},
                       {"imageBytes", m.imageBytes},
                       {"extraImages", uint64_t{m.extraImages}},
                       {"path", m.path},
                       {"globals", uint64_t{m.globals}},
                       {"result", m.result},
                       {"unloaded", m.unloaded}});
  }
  j["modules"] = std::move(modules);
  j["functionBinds"] = s.functionBinds;
  Json byDevice = Json::object();
  for (const auto& [device, launches] : s.launchesByDevice) byDevice[std::to_string(device)] = launches;
  j["launches"] = {{"count", s.launches},
                   {"failed", s.failedLaunches},
                   {"capturedIntoGraph", s.capturedIntoGraph},
                   {"byDevice", std::move(byDevice)}};
  j["kernels"] = kernelsJson(s);
  j["graphs"] = {{"executables", s.graphs.executables},
                 {"definitions", s.graphs.definitions},
                 {"incompleteDefinitions", s.graphs.incomplete},
                 {"nodeUpdates", s.graphs.updates},
                 {"launches", s.graphs.launches},
                 {"launchesWithMemory", s.graphs.launchesWithMemory},
                 {"nodesByKind", s.graphs.nodesByKind}};
  j["gpuTime"] = {{"timedLaunches", s.timedLaunches}, {"totalNs", s.timedTotalNs}};
  const auto& x = s.externalWrites;
  j["externalWrites"] = {{"collectives", x.collectives},
                         {"collectivesByOperation", x.collectivesByOperation},
                         {"collectiveBytes", x.collectiveBytes},
                         {"crossDeviceCopies", x.crossDeviceCopies},
                         {"crossDeviceBytes", x.crossDeviceBytes},
                         {"logged", countBytesJson(x.logged)},
                         {"readBackLater", x.readBackLater},
                         {"notLogged", x.notLogged},
                         {"captured", x.captured},
                         {"capturedSlots", x.capturedSlots.size()},
                         {"graphReadBacks", countBytesJson(x.graphReadBacks)}};

  Json byKind = Json::object();
  for (const auto& [kind, cb] : s.allocByKind) byKind[kind] = countBytesJson(cb);
  j["allocations"] = {{"count", s.allocTotal.count},
                      {"bytes", s.allocTotal.bytes},
                      {"failed", s.failedAllocs},
                      {"frees", s.frees},
                      {"peakLiveBytes", s.peakLiveBytes},
                      {"byKind", std::move(byKind)},
                      {"firstContents", countBytesJson(s.firstContents)},
                      {"firstContentsReadBack", s.firstContentsReadBack},
                      {"firstContentsMissing", s.firstContentsMissing},
                      {"graphMemory", countBytesJson(s.graphMemory)}};
  Json byDirection = Json::object();
  for (const auto& [dir, cb] : s.memcpyByDirection) byDirection[dir] = countBytesJson(cb);
  j["memcpy"] = {{"count", s.memcpyTotal.count},
                 {"bytes", s.memcpyTotal.bytes},
                 {"capturedBytes", s.memcpyCapturedBytes},
                 {"byDirection", std::move(byDirection)}};
  j["memset"] = countBytesJson(s.memsetTotal);

  if (s.checkpoints > 0) {
    j["checkpoints"] = {{"count", s.checkpoints},
                        {"incomplete", s.incompleteCheckpoints},
                        {"maxBytes", s.checkpointMaxBytes},
                        {"changedBytes", s.checkpointChangedBytes},
                        {"maxHoldNs", s.checkpointMaxHoldNs},
                        {"holdNs", s.checkpointHoldNs},
                        {"device", s.checkpointDevice}};
  }
  if (!s.triggers.empty()) {
    Json triggers = Json::array();
    for (const auto& t : s.triggers) {
      triggers.push_back({{"seq", t.seq},
                          {"timeNs", t.timeNs},
                          {"kind", t.kind},
                          {"reason", t.reason},
                          {"droppedEvents", t.droppedEvents}});
    }
    j["triggers"] = std::move(triggers);
  }

  Json byType = Json::object();
  for (const auto& [name, count] : format::eventTypesByCount(s)) byType[name] = count;
  j["events"] = {{"count", s.events}, {"lastTimeNs", s.lastTimeNs}, {"byType", std::move(byType)}};

  Json rawByType = Json::object();
  for (const auto& [type, bytes] : s.contentRawByType) rawByType[type] = bytes;
  j["bytes"] = {{"raw", s.contentRaw},
                {"rawByType", std::move(rawByType)},
                {"unique", s.blobRaw},
                {"stored", s.blobStored},
                {"compressionRatio",
                 s.blobStored ? Json(static_cast<double>(s.blobRaw) / static_cast<double>(s.blobStored)) : Json()},
                {"savedByDedup", static_cast<int64_t>(s.contentRaw - s.blobRaw)},
                {"records", {{"raw", s.recordRaw}, {"stored", s.recordStored}}}};
  j["chunks"] = {{"records", s.recordChunks}, {"blobs", s.blobChunks}};
  std::string text = jsonText(j) + "\n";
  std::fwrite(text.data(), 1, text.size(), stdout);
}

int runInfo(const Options& opt) {
  return guarded(opt.path, [&] {
    auto reader = format::TraceReader::open(opt.path);
    const TraceSummary s = format::summarizeTrace(*reader);
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
