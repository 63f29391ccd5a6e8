// Recorded code loaded on this GPU: one module per recorded image (or per
// --override file), the kernel found by name, the recorded function
// attributes applied, and the module's globals located.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kernel_pattern.h"
#include "replay_options.h"
#include "trace_model.h"
#include "trace_reader.h"

namespace kcap::replay {

struct Driver;

struct GlobalPlacement {
  std::string name;
  uint64_t recordedAddress = 0;
  uint64_t size = 0;
  CUdeviceptr address = 0;  // in this process
};

struct LoadedKernel {
  CUfunction function = nullptr;
  std::string code;  // what runs: "SASS sm_90", "PTX compute_80 (JIT)", "override FILE (...)"
  std::vector<GlobalPlacement> globals;
};

class CodeCache {
 public:
  CodeCache(Driver& driver, format::TraceReader& reader, int sm, const ReplayOptions& options);
  ~CodeCache();
  CodeCache(const CodeCache&) = delete;
  CodeCache& operator=(const CodeCache&) = delete;

  // Throws ReplayError (or CudaError) saying why the kernel cannot run here.
  LoadedKernel kernelFor(const CodeRef& code);

 private:
  struct Module {
    CUmodule module = nullptr;
    std::string code;
  };
  Module& loadRecorded(const StoredEvent& load);
  Module linkRelocatable(schema::ModuleLoad::Reader load);
  Module& loadOverride(const KernelOverride& override);
  std::vector<GlobalPlacement> globalsOf(CUmodule module, const StoredEvent& load);
  CUmodule loadImage(const std::vector<uint8_t>& bytes, const std::string& what);

  Driver& driver_;
  format::TraceReader& reader_;
  int sm_;
  const ReplayOptions& options_;
  std::map<uint64_t, Module> recorded_;          // by ModuleLoad seq
  std::map<std::string, Module> overrides_;      // by file path
  std::vector<KernelPattern> overridePatterns_;  // options_.overrides' patterns, in their order
};

}  // namespace kcap::replay
