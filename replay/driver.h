// The CUDA driver, as replay sees it: libcuda.so.1 opened at run time.
//
// `kcap` must start on machines without a driver (info, dump, check, and
// replay's own error message), so it does not link libcuda. Replay opens it
// when it first needs it, in the replay process only (see isolation.h), and
// takes each function by its exact ABI symbol: cuda.h maps the plain names to
// the versioned ones (cuMemAlloc -> cuMemAlloc_v2), and the list below is
// written with the plain names, so the types and symbols come from cuda.h.
// KCAP_LIBCUDA names another library (the tests' driver double).
#pragma once

#include <cuda.h>

#include <stdexcept>
#include <string>

namespace kcap::replay {

// Functions replay cannot work without.
#define KCAP_REPLAY_REQUIRED_FUNCTIONS(X) \
  X(cuInit)                               \
  X(cuDriverGetVersion)                   \
  X(cuGetErrorName)                       \
  X(cuDeviceGetCount)                     \
  X(cuDeviceGet)                          \
  X(cuDeviceGetName)                      \
  X(cuDeviceGetAttribute)                 \
  X(cuDevicePrimaryCtxRetain)             \
  X(cuCtxSetCurrent)                      \
  X(cuCtxSynchronize)                     \
  X(cuModuleLoadDataEx)                   \
  X(cuModuleUnload)                       \
  X(cuModuleGetFunction)                  \
  X(cuModuleGetGlobal)                    \
  X(cuFuncSetAttribute)                   \
  X(cuFuncSetCacheConfig)                 \
  X(cuLaunchKernelEx)                     \
  X(cuMemAlloc)                           \
  X(cuMemFree)                            \
  X(cuMemAllocHost)                       \
  X(cuMemFreeHost)                        \
  X(cuMemcpyHtoDAsync)                    \
  X(cuMemcpyDtoHAsync)                    \
  X(cuMemcpyDtoDAsync)                    \
  X(cuMemsetD8Async)                      \
  X(cuMemsetD16Async)                     \
  X(cuMemsetD32Async)                     \
  X(cuStreamCreate)                       \
  X(cuStreamDestroy)                      \
  X(cuStreamSynchronize)                  \
  X(cuEventCreate)                        \
  X(cuEventDestroy)                       \
  X(cuEventRecord)                        \
  X(cuEventSynchronize)

// Functions only some replays need; null when the driver lacks them, and the
// replay that needs one says so.
#define KCAP_REPLAY_OPTIONAL_FUNCTIONS(X) \
  X(cuCtxGetDevice)                       \
  X(cuDeviceGetPCIBusId)                  \
  X(cuMemGetAllocationGranularity)        \
  X(cuMemAddressReserve)                  \
  X(cuMemAddressFree)                     \
  X(cuMemCreate)                          \
  X(cuMemRelease)                         \
  X(cuMemMap)                             \
  X(cuMemUnmap)                           \
  X(cuMemSetAccess)                       \
  X(cuEventElapsedTime)                   \
  X(cuTensorMapReplaceAddress)            \
  X(cuTensorMapEncodeTiled)               \
  X(cuTensorMapEncodeIm2col)              \
  X(cuTensorMapEncodeIm2colWide)          \
  X(cuLinkCreate)                         \
  X(cuLinkAddData)                        \
  X(cuLinkComplete)                       \
  X(cuLinkDestroy)                        \
  X(cuDeviceTotalMem)                     \
  X(cuGraphCreate)                        \
  X(cuGraphDestroy)                       \
  X(cuGraphAddKernelNode)                 \
  X(cuGraphKernelNodeSetAttribute)        \
  X(cuGraphAddMemcpyNode)                 \
  X(cuGraphAddMemsetNode)                 \
  X(cuGraphAddEmptyNode)                  \
  X(cuGraphAddEventRecordNode)            \
  X(cuGraphAddEventWaitNode)              \
  X(cuGraphAddChildGraphNode)             \
  X(cuGraphAddMemAllocNode)               \
  X(cuGraphAddMemFreeNode)                \
  X(cuGraphAddNode)                       \
  X(cuGraphAddDependencies)               \
  X(cuGraphConditionalHandleCreate)       \
  X(cuGraphInstantiate)                   \
  X(cuGraphNodeSetEnabled)                \
  X(cuGraphLaunch)                        \
  X(cuGraphExecDestroy)                   \
  X(cuFuncGetParamInfo)                   \
  X(cuMemcpy3DAsync)

struct Driver {
#define KCAP_REPLAY_MEMBER(fn) decltype(&::fn) fn = nullptr;
  KCAP_REPLAY_REQUIRED_FUNCTIONS(KCAP_REPLAY_MEMBER)
  KCAP_REPLAY_OPTIONAL_FUNCTIONS(KCAP_REPLAY_MEMBER)
#undef KCAP_REPLAY_MEMBER

  std::string libraryPath;  // what was opened
  int version = 0;          // cuDriverGetVersion

  // "CUDA_ERROR_ILLEGAL_ADDRESS", or "CUresult N" when the driver cannot say.
  std::string errorName(CUresult result) const;
};

// Opens the driver and calls cuInit(0) the first time; later calls return the
// same. Throws ReplayError when there is no usable driver.
Driver& driver();

// Something replay cannot do, said so that a user knows what and why.
class ReplayError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A driver call that failed. `sticky` errors (illegal address, launch failure,
// ...) leave the context unusable: the replay process must end.
class CudaError : public ReplayError {
 public:
  CudaError(CUresult result, const std::string& what);
  CUresult result() const { return result_; }
  bool sticky() const;

 private:
  CUresult result_;
};

// Throws CudaError("<what>: <CUDA_ERROR_NAME>") unless result is CUDA_SUCCESS.
void check(CUresult result, const std::string& what);
// The same without building a string when the call succeeded (per-launch paths).
inline void check(CUresult result, const char* what) {
  if (result != CUDA_SUCCESS) throw CudaError(result, what);
}

}  // namespace kcap::replay
