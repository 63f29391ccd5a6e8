// The kernels the double can run: for each kernel of kernels/ a host
// implementation with the same semantics, the parameter layout the real
// driver reports for it (cuFuncGetParamInfo), and the module globals.
//
// To let a test use another kernel, add it here: name, parameter offsets and
// sizes (what nvcc puts in EIATTR_KPARAM_INFO; natural C alignment for plain
// parameters), and a function that loops over the grid.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace kcap_double {

struct LaunchShape {
  unsigned grid[3];
  unsigned block[3];
  unsigned sharedBytes;

  unsigned long long blocks() const { return 1ULL * grid[0] * grid[1] * grid[2]; }
  unsigned long long threadsX() const { return 1ULL * grid[0] * block[0]; }
};

// A module's __device__ / __constant__ variables, by name (host memory).
class ModuleGlobals {
 public:
  virtual void* find(std::string_view name) const = 0;

 protected:
  ~ModuleGlobals() = default;
};

struct ParamSlot {
  std::size_t offset;
  std::size_t size;
};

// params[i] points at the value of parameter i, as in cuLaunchKernel's
// kernelParams.
using HostKernel = void (*)(const LaunchShape& shape, void* const* params, const ModuleGlobals& globals);

struct KernelDef {
  std::string_view name;
  std::span<const ParamSlot> params;
  HostKernel run;
};

struct GlobalDef {
  std::string_view name;
  std::size_t size;
};

std::span<const KernelDef> hostKernels();

// cudaGraphSetConditional for host kernels: sets a conditional handle of the
// graph launch running on this thread (api_graph_exec.cpp); nothing outside
// a launch, as the device function has no effect outside its graph.
void setGraphConditional(std::uint64_t handle, unsigned value);

// KCAP_DOUBLE_CONTENT_HASH, for testing the shim's fallbacks from hashing
// on the device: "refuse": loading an image with kcap_content_hash fails
// (CUDA_ERROR_NO_BINARY_FOR_GPU, a GPU that cannot run it); "stale": the
// kernel hashes piece 0 as if its first byte were different, differently at
// each launch (memory that keeps changing, as another stream writes it);
// "fail-later": its first launch runs, every later one fails
// (CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, api_launch.cpp). Empty: none.
std::string_view contentHashFault();
std::span<const GlobalDef> hostGlobals();

// A build of a kernel that computes something else on purpose, with the same
// name (kernels/axpy_changed.cu: axpy with y[100] one ULP off). The double
// cannot tell code apart by running it, so such a build defines a marker
// variable: an image that defines `marker` runs `def` for the kernel of that
// name instead of the ordinary host implementation (images.cpp).
struct KernelVariant {
  std::string_view marker;
  KernelDef def;
};
std::span<const KernelVariant> kernelVariants();

}  // namespace kcap_double
