// kcap doctor FILE [--device D] [--json]: the recorded environment against
// this machine's (driver, GPU, memory, environment variables, libraries, kcap),
// what of it can change results, the recorded images this GPU can run, and
// where the recorded launches can run at all (replay/portability.h).
//
// Exit 0: nothing that can change results differs and every launch fits this
// GPU; 3: something does, or this machine has no usable GPU; 1: a trace
// problem; 2: usage.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "code_image.h"
#include "common.h"
#include "driver.h"
#include "image_choice.h"
#include "portability.h"
#include "subcommands.h"
#include "trace_model.h"
#include "trace_reader.h"
#include "version.h"

extern char** environ;

namespace kcap::tools {
namespace {

constexpr int kExitDiffers = 3;

struct Options {
  std::string path;
  int device = 0;
  bool json = false;
};

// One compared item: a row of the environment table.
struct Row {
  std::string item, recorded, here, note;
  bool matters = false;  // can change results
};

struct ImageRow {
  uint64_t seq = 0;
  std::string contents;  // "sm_80, sm_90 SASS; compute_80 PTX"
  std::string recorded;  // what ran when recorded ("SASS sm_90"), "unknown"
  std::string here;      // what would run here, "cannot run", "unknown"
  std::string note;
  bool matters = false;
};

// This machine's GPU, as the driver reports it.
struct Here {
  std::string noDriver;  // why there is none; empty when there is a driver
  int version = 0;
  int deviceCount = 0;
  std::string name;
  int sm = 0;
  uint64_t totalMemory = 0;  // 0: unknown
  int multiprocessors = 0;
  int optinShared = 0;  // CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, 0 unknown
  int maxThreadsPerBlock = 0;
  bool hasDriver() const { return noDriver.empty(); }
};

Here probeHere(int ordinal) {
  Here h;
  try {
    replay::Driver& d = replay::driver();
    h.version = d.version;
    replay::check(d.cuDeviceGetCount(&h.deviceCount), "cuDeviceGetCount");
    if (ordinal < 0 || ordinal >= h.deviceCount) return h;  // the caller says so
    CUdevice device = 0;
    replay::check(d.cuDeviceGet(&device, ordinal), "cuDeviceGet");
    char name[256] = {};
    if (d.cuDeviceGetName(name, sizeof name - 1, device) == CUDA_SUCCESS) h.name = name;
    auto attribute = [&](CUdevice_attribute which) {
      int value = 0;
      return d.cuDeviceGetAttribute(&value, which, device) == CUDA_SUCCESS ? value : 0;
    };
    h.sm = attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR) * 10 +
           attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
    h.multiprocessors = attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
    h.optinShared = attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
    h.maxThreadsPerBlock = attribute(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
    size_t bytes = 0;
    if (d.cuDeviceTotalMem != nullptr && d.cuDeviceTotalMem(&bytes, device) == CUDA_SUCCESS) h.totalMemory = bytes;
  } catch (const replay::ReplayError& e) {
    h.noDriver = e.what();
  }
  return h;
}

// ---- environment variables ------------------------------------------------------

// The recorded variables that are compared: the recorder's selection
// (interpose/record/trace_begin.cpp) less its own machinery (KCAP_*, LD_PRELOAD) and
// the launcher's rank variables.
bool relevant(const std::string& name) {
  static const char* const kPrefixes[] = {"CUDA_",    "CUBLAS", "CUDNN",   "NVIDIA_", "NCCL_",
                                          "PYTORCH_", "TORCH_", "TRITON_", "XLA_"};
  for (const char* p : kPrefixes) {
    if (name.rfind(p, 0) == 0) return true;
  }
  return name == "LD_LIBRARY_PATH";
}

// Variables known to change what runs or what it computes.
const char* resultChanger(const std::string& name) {
  static const std::map<std::string, const char*> known = {
      {"CUDA_FORCE_PTX_JIT", "forces PTX JIT instead of the recorded SASS: different code runs"},
      {"CUDA_DISABLE_PTX_JIT", "PTX cannot be JIT-compiled: images without matching SASS fail"},
      {"CUDA_LAUNCH_BLOCKING", "launches become synchronous: changes ordering, timing and races"},
      {"CUDA_DEVICE_MAX_CONNECTIONS", "changes how many hardware queues streams share: concurrency and ordering"},
      {"CUDA_MODULE_LOADING", "lazy or eager module loading: changes when code loads and what fails"},
      {"CUDA_VISIBLE_DEVICES", "changes which GPUs the program sees and their ordinals"},
      {"CUBLAS_WORKSPACE_CONFIG", "cuBLAS workspace: decides which algorithms (and whether deterministic ones) run"},
      {"NVIDIA_TF32_OVERRIDE", "TF32 tensor-core math in cuBLAS/cuDNN: changes float32 results"},
      {"TORCH_ALLOW_TF32_CUBLAS_OVERRIDE", "PyTorch TF32 in cuBLAS matmuls: changes float32 results"},
      {"NCCL_ALGO", "NCCL reduction algorithm: changes the order of floating-point sums"},
      {"NCCL_PROTO", "NCCL protocol: can change the order of floating-point sums"},
  };
  auto it = known.find(name);
  return it == known.end() ? nullptr : it->second;
}

std::map<std::string, std::string> hereEnvironment() {
  std::map<std::string, std::string> out;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string entry = *e;
    const size_t eq = entry.find('=');
    if (eq == std::string::npos) continue;
    std::string name = entry.substr(0, eq);
    if (relevant(name)) out[name] = entry.substr(eq + 1);
  }
  return out;
}

void addEnvironmentRows(schema::TraceBegin::Reader begin, std::vector<Row>& rows) {
  std::map<std::string, std::string> recorded;
  for (auto kv : begin.getEnvironment()) {
    if (relevant(kv.getKey().cStr())) recorded[kv.getKey().cStr()] = kv.getValue().cStr();
  }
  const auto here = hereEnvironment();
  std::set<std::string> names;
  for (const auto& [k, v] : recorded) names.insert(k);
  for (const auto& [k, v] : here) names.insert(k);
  for (const auto& name : names) {
    auto r = recorded.find(name);
    auto h = here.find(name);
    Row row{"env " + name, r == recorded.end() ? "(unset)" : printable(r->second),
            h == here.end() ? "(unset)" : printable(h->second), "", false};
    const bool differs = r == recorded.end() || h == here.end() || r->second != h->second;
    if (differs) {
      if (const char* why = resultChanger(name)) {
        row.note = why;
        row.matters = true;
      } else {
        row.note = name == "LD_LIBRARY_PATH" ? "differs: may select other library builds (informational)"
                                             : "differs (not known to change results)";
      }
    }
    rows.push_back(std::move(row));
  }
}

// ---- devices and images ---------------------------------------------------------

std::string smText(int sm) { return sm > 0 ? replay::smName(sm) : "unknown"; }

// The recorded device the launches ran on: the first launch's, else ordinal 0.
std::optional<schema::Device::Reader> recordedDevice(schema::TraceBegin::Reader begin,
                                                     const replay::TraceModel& model) {
  const int ordinal = model.launches().empty() ? 0 : model.launches().front().event().getDevice();
  for (auto d : begin.getDevices()) {
    if (d.getOrdinal() == ordinal) return d;
  }
  if (begin.getDevices().size() > 0) return begin.getDevices()[0];
  return std::nullopt;
}

std::vector<ImageRow> judgeImages(format::TraceReader& reader, int recordedSm, const Here& here) {
  std::vector<std::shared_ptr<replay::StoredEvent>> loads;
  reader.forEachEvent([&](const format::EventRef& ref) {
    if (ref.event.isModuleLoad() && ref.event.getModuleLoad().getResult() == 0 &&
        ref.event.getModuleLoad().getImage().getSize() > 0) {
      loads.push_back(std::make_shared<replay::StoredEvent>(ref.event));
    }
    return true;
  });
  std::vector<ImageRow> out;
  for (const auto& load : loads) {
    ImageRow row;
    row.seq = load->seq();
    const std::string what = "event #" + std::to_string(row.seq) + "'s module image";
    const auto bytes =
        reader.readContent(load->get().getModuleLoad().getImage(), format::kMaxCodeImageSize, what.c_str());
    const image::Bytes view(bytes.data(), bytes.size());
    row.contents = replay::imageContents(view);
    if (recordedSm > 0) {
      const auto choice = replay::chooseCode(view, recordedSm, false);
      row.recorded = choice.runnable ? choice.description : "cannot run";
    } else {
      row.recorded = "unknown";
    }
    if (!here.hasDriver() || here.sm == 0) {
      row.here = "unknown";
    } else {
      const auto choice = replay::chooseCode(view, here.sm, false);
      if (!choice.runnable) {
        row.here = "cannot run";
        row.note = "cannot run here: " + choice.why;
        row.matters = true;
      } else {
        row.here = choice.description;
        if (row.recorded != "unknown" && row.recorded != row.here) {
          row.matters = true;
          if (row.here.find("JIT") != std::string::npos && row.recorded.rfind("SASS ", 0) == 0) {
            row.note = "SASS for " + row.recorded.substr(5) + " will not be used; PTX is JIT-compiled";
          } else {
            row.note = "different code runs here (" + row.here + ", recorded " + row.recorded + ")";
          }
        }
      }
    }
    out.push_back(std::move(row));
  }
  return out;
}

// ---- the report -----------------------------------------------------------------

struct Portability {
  replay::KernelDemand demand;
  replay::PortabilityVerdict verdict;
  std::vector<std::string> refusedHere;  // why this GPU refuses it
};

struct Report {
  std::vector<Row> rows;
  std::vector<ImageRow> images;
  std::vector<Portability> kernels;
  std::optional<replay::ArchLimits> hereLimits;
  uint64_t largestWorkingSet = 0;
  uint64_t largestWorkingSetLaunch = 0;
  int exitCode = kExitOk;
};

void addDeviceRows(schema::TraceBegin::Reader begin, const std::optional<schema::Device::Reader>& rec, const Here& here,
                   Report& r) {
  // driver
  Row driver{"driver", versionText(begin.getDriverVersion()), "", "", false};
  if (!here.hasDriver()) {
    driver.here = "no CUDA driver here";
    driver.note = here.noDriver;
    driver.matters = true;
  } else {
    driver.here = versionText(here.version);
    if (begin.getDriverVersion() != 0 && begin.getDriverVersion() / 1000 != here.version / 1000) {
      driver.note = "major version differs: the JIT compiler and driver-side code differ";
      driver.matters = true;
    } else if (begin.getDriverVersion() != here.version) {
      driver.note = "minor version differs";
    }
  }
  r.rows.push_back(driver);

  const int recordedSm = rec ? rec->getComputeCapabilityMajor() * 10 + rec->getComputeCapabilityMinor() : 0;
  Row gpu{"GPU", rec ? printable(rec->getName().cStr()) + " (" + smText(recordedSm) + ")" : "unknown", "", "", false};
  std::vector<std::string> notes;
  if (!here.hasDriver()) {
    gpu.here = "no CUDA driver here";
  } else if (here.sm == 0 && here.name.empty()) {
    gpu.here = "unknown";
    gpu.matters = true;
  } else {
    gpu.here = printable(here.name) + " (" + smText(here.sm) + ")";
    if (rec && here.name != rec->getName().cStr()) notes.push_back("another GPU model");
    if (recordedSm != 0 && recordedSm != here.sm) notes.push_back("compute capability differs");
  }
  size_t cannot = 0;
  std::string jit;
  for (const auto& image : r.images) {
    if (image.here == "cannot run") ++cannot;
    if (jit.empty() && image.note.find("JIT-compiled") != std::string::npos) jit = image.note;
  }
  if (!jit.empty()) notes.push_back(jit);
  if (cannot > 0)
    notes.push_back(strf("cannot run: %zu recorded image%s (see Images)", cannot, cannot == 1 ? "" : "s"));
  for (const auto& n : notes) gpu.note += (gpu.note.empty() ? "" : "; ") + n;
  gpu.matters = gpu.matters || !notes.empty();
  r.rows.push_back(gpu);

  Row memory{"device memory", rec && rec->getTotalMemoryBytes() ? humanSize(rec->getTotalMemoryBytes()) : "unknown",
             here.totalMemory ? humanSize(here.totalMemory) : "unknown", "", false};
  if (here.totalMemory != 0 && here.totalMemory < r.largestWorkingSet) {
    memory.note = "smaller than launch " + std::to_string(r.largestWorkingSetLaunch) + "'s working set (" +
                  humanSize(r.largestWorkingSet) + ")";
    memory.matters = true;
  } else if (r.largestWorkingSet != 0) {
    memory.note = "largest working set " + humanSize(r.largestWorkingSet) + " (launch " +
                  std::to_string(r.largestWorkingSetLaunch) + ")";
  }
  r.rows.push_back(memory);

  Row sms{"SM count", rec && rec->getMultiprocessorCount() ? std::to_string(rec->getMultiprocessorCount()) : "unknown",
          here.multiprocessors ? std::to_string(here.multiprocessors) : "unknown", "", false};
  if (rec && rec->getMultiprocessorCount() && here.multiprocessors &&
      rec->getMultiprocessorCount() != here.multiprocessors) {
    sms.note = "work sized by SM count (persistent kernels, library heuristics) may be split differently";
    sms.matters = true;
  }
  r.rows.push_back(sms);
}

void addLibraryRows(schema::TraceBegin::Reader begin, Report& r) {
  if (begin.getLibraries().size() == 0) {
    r.rows.push_back({"libraries", "none recorded", "unknown", "", false});
  }
  for (auto kv : begin.getLibraries()) {
    r.rows.push_back({"library " + printable(kv.getKey().cStr()), printable(kv.getValue().cStr()), "unknown",
                      "not looked up here", false});
  }
  Row kcap{"kcap", begin.getKcapVersion().size() ? printable(begin.getKcapVersion().cStr()) : "unknown", kKcapVersion,
           "", false};
  if (kcap.recorded != kcap.here) kcap.note = "differs (informational)";
  r.rows.push_back(kcap);
}

void addPortability(const replay::TraceModel& model, const Here& here, Report& r) {
  if (here.hasDriver() && here.sm != 0) {
    r.hereLimits = replay::limitsFor(here.sm);
    if (!r.hereLimits && here.optinShared > 0) r.hereLimits = replay::ArchLimits{here.sm, 0, 1024, here.sm >= 90};
    if (r.hereLimits) {
      if (here.optinShared > 0) r.hereLimits->maxDynamicSharedPerBlock = static_cast<uint32_t>(here.optinShared);
      if (here.maxThreadsPerBlock > 0)
        r.hereLimits->maxThreadsPerBlock = static_cast<uint32_t>(here.maxThreadsPerBlock);
    }
  }
  for (auto& demand : replay::kernelDemands(model)) {
    Portability p{demand, replay::judge(demand), {}};
    if (r.hereLimits) p.refusedHere = replay::refusals(demand, *r.hereLimits);
    r.kernels.push_back(std::move(p));
  }
}

Report buildReport(format::TraceReader& reader, const replay::TraceModel& model, schema::TraceBegin::Reader begin,
                   const Here& here) {
  Report r;
  for (const auto& launch : model.launches()) {
    const uint64_t bytes = replay::workingSetBytes(launch.event());
    if (bytes > r.largestWorkingSet) {
      r.largestWorkingSet = bytes;
      r.largestWorkingSetLaunch = launch.launchIndex;
    }
  }
  const auto rec = recordedDevice(begin, model);
  const int recordedSm = rec ? rec->getComputeCapabilityMajor() * 10 + rec->getComputeCapabilityMinor() : 0;
  r.images = judgeImages(reader, recordedSm, here);
  addDeviceRows(begin, rec, here, r);
  addEnvironmentRows(begin, r.rows);
  addLibraryRows(begin, r);
  addPortability(model, here, r);

  bool differs = false;
  for (const auto& row : r.rows) differs = differs || row.matters;
  for (const auto& image : r.images) differs = differs || image.matters;
  for (const auto& k : r.kernels) differs = differs || !k.refusedHere.empty();
  r.exitCode = differs ? kExitDiffers : kExitOk;
  return r;
}

std::string clusterText(const replay::KernelDemand& d) {
  if (d.clusterBlocks() == 0) return "-";
  return std::to_string(d.cluster[0]) + "x" + std::to_string(d.cluster[1]) + "x" + std::to_string(d.cluster[2]);
}

std::string smList(const std::vector<int>& sms) {
  std::string out;
  for (int sm : sms) out += (out.empty() ? "" : ", ") + replay::smName(sm);
  return out;
}

void printText(const Options& opt, const Report& r, const Here& here) {
  std::string out = "kcap doctor " + opt.path + "\n\nEnvironment (! marks what can change results)\n";
  Table env({"", "Item", "Recorded", "Here", "Note"});
  for (const auto& row : r.rows) env.row({row.matters ? "!" : "", row.item, row.recorded, row.here, row.note});
  out += env.render();

  if (!r.images.empty()) {
    out += strf("\nImages (%zu recorded)\n", r.images.size());
    Table t({"", "Event", "Contains", "Recorded", "Here", "Note"});
    for (const auto& i : r.images)
      t.row({i.matters ? "!" : "", "#" + std::to_string(i.seq), i.contents, i.recorded, i.here, i.note});
    out += t.render();
  }

  out += "\nPortability of the recorded launches\n";
  if (r.kernels.empty()) {
    out += "  no launches\n";
  } else {
    Table t({"Kernel", "Launches", "Dyn smem", "Threads", "Cluster", "Refused on"}, " rrrr");
    for (const auto& k : r.kernels) {
      t.row({printable(k.demand.kernel), withCommas(k.demand.launches), std::to_string(k.demand.sharedNeeded()),
             std::to_string(k.demand.blockThreads), clusterText(k.demand),
             k.verdict.refusedOn.empty() ? "-" : smList(k.verdict.refusedOn)});
    }
    out += t.render();
    out += "  Per-block limits: ";
    for (const auto& a : replay::knownArchitectures()) {
      out += replay::smName(a.sm) + " " + std::to_string(a.maxDynamicSharedPerBlock) +
             (a.sm == replay::knownArchitectures().back().sm ? "" : ", ");
    }
    out += " bytes of dynamic shared memory (opt-in); 1024 threads everywhere; clusters from sm_90\n";
    for (const auto& k : r.kernels) {
      if (!k.verdict.line.empty()) out += "  " + printable(k.verdict.line) + "\n";
    }
    for (const auto& k : r.kernels) {
      for (const auto& why : k.refusedHere) {
        out += "  ! this GPU (" + smText(here.sm) + ") refuses " + printable(k.demand.kernel) + ": " + why + "\n";
      }
    }
    if (!here.hasDriver()) out += "  (no CUDA driver here: launches not checked against this machine)\n";
  }

  std::vector<std::string> differing;
  for (const auto& row : r.rows) {
    if (row.matters) differing.push_back(row.item);
  }
  for (const auto& i : r.images) {
    if (i.matters) differing.push_back("image #" + std::to_string(i.seq));
  }
  for (const auto& k : r.kernels) {
    if (!k.refusedHere.empty()) differing.push_back("launches of " + printable(k.demand.kernel));
  }
  if (differing.empty()) {
    out += "\nNothing that can change results differs; every launch fits this GPU.\n";
  } else {
    std::string list;
    for (const auto& d : differing) list += (list.empty() ? "" : ", ") + d;
    out += strf("\n%zu difference%s that can change results: %s\n", differing.size(), differing.size() == 1 ? "" : "s",
                list.c_str());
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
}

void printJson(const Options& opt, const Report& r, const Here& here) {
  Json hereJson = {{"driver", here.hasDriver()}};
  if (!here.hasDriver()) hereJson["noDriver"] = here.noDriver;
  hereJson["device"] = opt.device;
  hereJson["arch"] = here.sm ? replay::smName(here.sm) : std::string();
  Json environment = Json::array();
  for (const auto& row : r.rows) {
    environment.push_back({{"item", row.item},
                           {"recorded", row.recorded},
                           {"here", row.here},
                           {"note", row.note},
                           {"matters", row.matters}});
  }
  Json images = Json::array();
  for (const auto& i : r.images) {
    images.push_back({{"seq", i.seq},
                      {"contents", i.contents},
                      {"recorded", i.recorded},
                      {"here", i.here},
                      {"note", i.note},
                      {"matters", i.matters}});
  }
  Json architectures = Json::array();
  for (const auto& a : replay::knownArchitectures()) {
    architectures.push_back({{"arch", replay::smName(a.sm)},
                             {"maxDynamicSharedPerBlock", a.maxDynamicSharedPerBlock},
                             {"maxThreadsPerBlock", a.maxThreadsPerBlock},
                             {"clusters", a.clusters}});
  }
  Json portability = Json::array();
  for (const auto& k : r.kernels) {
    Json refusedOn = Json::array();
    for (int sm : k.verdict.refusedOn) refusedOn.push_back(replay::smName(sm));
    portability.push_back({{"kernel", k.demand.kernel},
                           {"launches", k.demand.launches},
                           {"sharedMemBytes", k.demand.sharedMemBytes},
                           {"maxDynamicSharedAttribute", k.demand.maxDynamicSharedAttribute},
                           {"blockThreads", k.demand.blockThreads},
                           {"cluster", {k.demand.cluster[0], k.demand.cluster[1], k.demand.cluster[2]}},
                           {"refusedOn", std::move(refusedOn)},
                           {"refusedHere", k.refusedHere},
                           {"line", k.verdict.line}});
  }
  const Json document = {{"trace", opt.path},
                         {"here", std::move(hereJson)},
                         {"environment", std::move(environment)},
                         {"images", std::move(images)},
                         {"architectures", std::move(architectures)},
                         {"portability", std::move(portability)},
                         {"exitCode", r.exitCode}};
  const std::string text = jsonText(document) + "\n";
  std::fwrite(text.data(), 1, text.size(), stdout);
}

int runDoctor(const Options& opt) {
  return guarded(opt.path, [&]() -> int {
    auto reader = format::TraceReader::open(opt.path);
    const auto model = replay::TraceModel::load(*reader);
    if (model.traceBegin() == nullptr) {
      std::cerr << opt.path << ": the trace has no traceBegin: nothing recorded about its environment\n";
      return kExitTrace;
    }
    const Here here = probeHere(opt.device);
    if (here.hasDriver() && (opt.device < 0 || opt.device >= here.deviceCount)) {
      std::cerr << "kcap doctor: --device " << opt.device << ": this machine has " << here.deviceCount << " CUDA device"
                << (here.deviceCount == 1 ? "" : "s") << "\n";
      return kExitUsage;
    }
    const Report report = buildReport(*reader, model, model.traceBegin()->get().getTraceBegin(), here);
    if (opt.json) {
      printJson(opt, report, here);
    } else {
      printText(opt, report, here);
    }
    std::fflush(stdout);
    for (const auto& p : reader->problems()) std::cerr << p.message << "\n";
    return reader->problems().empty() ? report.exitCode : kExitTrace;
  });
}

}  // namespace

Run setupDoctor(CLI::App& cmd) {
  auto opt = std::make_shared<Options>();
  cmd.add_option("file", opt->path, "The .kcap trace")->required()->type_name("FILE");
  cmd.add_option("--device", opt->device, "This machine's CUDA device to compare with (default 0)")->type_name("D");
  cmd.add_flag("--json", opt->json, "Print one JSON object instead of text");
  return [opt] { return runDoctor(*opt); };
}

}  // namespace kcap::tools
