// traceBegin: the process, its selected environment, the driver, every
// device, and the capture options.
#include "record/recorder.h"

#include "record/driver_api.h"
#include "core/library_versions.h"
#include "version.h"

#include <unistd.h>

#include <cstdio>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

extern char** environ;

namespace kcap {
namespace {

// The command line, from /proc/self/cmdline (NUL-separated arguments).
std::vector<std::string> commandLine() {
  std::vector<std::string> argv;
  std::FILE* in = std::fopen("/proc/self/cmdline", "rb");
  if (in == nullptr) {
    return argv;
  }
  std::string bytes;
  char chunk[4096];
  size_t n = 0;
  while ((n = std::fread(chunk, 1, sizeof chunk, in)) > 0) {
    bytes.append(chunk, n);
  }
  std::fclose(in);
  size_t start = 0;
  while (start < bytes.size()) {
    size_t end = bytes.find('\0', start);
    if (end == std::string::npos) {
      end = bytes.size();
    }
    argv.emplace_back(bytes, start, end - start);
    start = end + 1;
  }
  return argv;
}

// The variables that change what CUDA code does, or identify the job.
bool selectedVariable(std::string_view name) {
  static constexpr std::string_view kPrefixes[] = {"CUDA_", "CUBLAS",   "CUDNN",  "NVIDIA_", "NCCL_",
                                                   "KCAP_", "PYTORCH_", "TORCH_", "TRITON_", "XLA_"};
  static constexpr std::string_view kNames[] = {"LD_PRELOAD",           "LD_LIBRARY_PATH", "RANK",
                                                "LOCAL_RANK",           "WORLD_SIZE",      "LOCAL_WORLD_SIZE",
                                                "SLURM_PROCID",         "SLURM_NTASKS",    "OMPI_COMM_WORLD_RANK",
                                                "OMPI_COMM_WORLD_SIZE", "OMP_NUM_THREADS"};
  for (const std::string_view prefix : kPrefixes) {
    if (name.starts_with(prefix)) {
      return true;
    }
  }
  for (const std::string_view exact : kNames) {
    if (name == exact) {
      return true;
    }
  }
  return false;
}

std::vector<std::pair<std::string, std::string>> selectedEnvironment() {
  std::vector<std::pair<std::string, std::string>> out;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string_view variable = *entry;
    const size_t equals = variable.find('=');
    if (equals == std::string_view::npos) {
      continue;
    }
    const std::string_view name = variable.substr(0, equals);
    if (selectedVariable(name)) {
      out.emplace_back(std::string(name), std::string(variable.substr(equals + 1)));
    }
  }
  return out;
}

void describeDevice(const DriverApi& api, int ordinal, schema::Device::Builder out) {
  out.setOrdinal(ordinal);
  CUdevice device = 0;
  if (api.deviceGet == nullptr || api.deviceGet(&device, ordinal) != CUDA_SUCCESS) {
    return;
  }
  char name[256] = {};
  if (api.deviceGetName != nullptr && api.deviceGetName(name, sizeof name - 1, device) == CUDA_SUCCESS) {
    out.setName(name);
  }
  CUuuid uuid{};
  if (api.deviceGetUuid != nullptr && api.deviceGetUuid(&uuid, device) == CUDA_SUCCESS) {
    out.setUuid(capnp::Data::Reader(reinterpret_cast<const uint8_t*>(uuid.bytes), sizeof uuid.bytes));
  }
  const auto attribute = [&](CUdevice_attribute which) {
    int value = 0;
    return api.deviceGetAttribute != nullptr && api.deviceGetAttribute(&value, which, device) == CUDA_SUCCESS ? value
                                                                                                              : 0;
  };
  out.setComputeCapabilityMajor(attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR));
  out.setComputeCapabilityMinor(attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR));
  out.setMultiprocessorCount(attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT));
  size_t bytes = 0;
  if (api.deviceTotalMem != nullptr && api.deviceTotalMem(&bytes, device) == CUDA_SUCCESS) {
    out.setTotalMemoryBytes(bytes);
  }
  char bus[64] = {};
  if (api.deviceGetPCIBusId != nullptr && api.deviceGetPCIBusId(bus, sizeof bus - 1, device) == CUDA_SUCCESS) {
    out.setPciBusId(bus);
  }
}

template <class List>
void setPairs(List list, const std::vector<std::pair<std::string, std::string>>& pairs) {
  for (unsigned i = 0; i < pairs.size(); ++i) {
    list[i].setKey(pairs[i].first);
    list[i].setValue(pairs[i].second);
  }
}

}  // namespace

void Recorder::writeTraceBegin() {
  const DriverApi& api = driverApi();
  EventMessage message(*this, false);
  auto begin = message.event().initTraceBegin();

  char host[256] = {};
  gethostname(host, sizeof host - 1);
  begin.setHostName(host);
  begin.setProcessId(static_cast<uint32_t>(::getpid()));

  const auto argv = commandLine();
  auto argvList = begin.initArgv(static_cast<unsigned>(argv.size()));
  for (unsigned i = 0; i < argv.size(); ++i) {
    argvList.set(i, argv[i]);
  }
  const auto environment = selectedEnvironment();
  setPairs(begin.initEnvironment(static_cast<unsigned>(environment.size())), environment);

  int driverVersion = 0;
  if (api.driverGetVersion != nullptr && api.driverGetVersion(&driverVersion) == CUDA_SUCCESS) {
    begin.setDriverVersion(driverVersion);
  }
  int deviceCount = 0;
  if (api.deviceGetCount == nullptr || api.deviceGetCount(&deviceCount) != CUDA_SUCCESS || deviceCount < 0) {
    deviceCount = 0;
  }
  auto devices = begin.initDevices(static_cast<unsigned>(deviceCount));
  for (int i = 0; i < deviceCount; ++i) {
    describeDevice(api, i, devices[static_cast<unsigned>(i)]);
  }

  const LibraryVersions libraries = loadedLibraryVersions();
  setPairs(begin.initLibraries(static_cast<unsigned>(libraries.libraries.size())), libraries.libraries);
  begin.setRuntimeVersion(libraries.runtimeVersion);

  begin.setStartUnixNs(startUnixNs_);
  begin.setStartMonotonicNs(clock_.startMonotonicNs());
  begin.setKcapVersion(kKcapVersion);
  switch (options_.mode) {
    case CaptureMode::kFull:
      begin.setCaptureMode(schema::CaptureMode::FULL);
      break;
    case CaptureMode::kPreOnly:
      begin.setCaptureMode(schema::CaptureMode::PRE_ONLY);
      break;
    case CaptureMode::kMetadata:
      begin.setCaptureMode(schema::CaptureMode::METADATA);
      break;
    case CaptureMode::kCheckpoint:
      begin.setCaptureMode(schema::CaptureMode::CHECKPOINT);
      break;
  }
  auto options = options_.describe();
  options.emplace_back("path", path_);
  setPairs(begin.initOptions(static_cast<unsigned>(options.size())), options);

  append(message);
  flush();
}

}  // namespace kcap
