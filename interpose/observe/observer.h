// Observers: the extension point through which the shim sees driver calls.
//
// Every hooked call goes through Wrapper<Id>::call (hook_wrapper.h), which
// forwards to the real driver and, around that call, invokes
//
//   Observer<familyOf(Id)>::before(Id, args...)            if declared
//   Observer<familyOf(Id)>::after(Id, result, args...)     if declared
//
// with the caller's exact arguments. One observer serves all rows of an API
// (cuLaunchKernel and cuLaunchKernel_ptsz); the HookId argument says which row
// was called. An observer only watches: it must not change arguments or the
// result, and must not call back into the hooked entry points (use
// realFunction()). It may throw: the exception is caught in the wrapper,
// reported once, and observing stops for the rest of the process while calls
// keep passing through.
//
// To add one, declare a specialization below and define it in a .cpp file
// (observers.cpp: code and launches; memory_observers.cpp: memory, copies,
// memsets, tensor maps; stream_observers.cpp: streams, events, graph capture). The declaration must be visible here,
// because the wrappers are instantiated where this header is included.
//
// Pairing: when an observer has both, after() runs exactly when before()
// ran and returned normally (even if observing stopped in between, so that
// what before() set up is always taken down).
//
// Every hooked call that returns an error is also handed to
// observeFailure() (recorded as an apiError event).
#pragma once

#include "hooks/hook_table.h"

#include <cuda.h>

#include <exception>

namespace kcap {

template <HookId Family>
struct Observer {};  // by default a hook is only counted and forwarded

// ---- observing on/off ----------------------------------------------------------

bool observing() noexcept;
void stopObserving(const char* why) noexcept;

// A launch call on this thread returned: the outcome of its event, if the
// writer holds it already (metadata and checkpoint modes), is stored now.
void launchReturned(CUresult result) noexcept;

// A fatal signal's handler, on the thread that got it: the launches this
// thread has in progress will not return; their events, already with the
// writer, are written without an outcome (launch_outcome.h). Async-signal-safe.
void abandonLaunchesInProgress() noexcept;

// Runs an observer callback; an exception stops all observing (see above).
// Returns true if the callback ran and returned normally.
template <class Callback>
bool observe(Callback&& callback, bool evenIfStopped = false) noexcept {
  if (!evenIfStopped && !observing()) {
    return false;
  }
  try {
    callback();
    return true;
  } catch (const std::exception& e) {
    stopObserving(e.what());
  } catch (...) {
    stopObserving("unknown exception");
  }
  return false;
}

// A hooked call returned `result` != CUDA_SUCCESS (stream_observers.cpp).
void observeFailure(HookId id, CUresult result);

// ---- the observers of this build ------------------------------------------------

#define KCAP_OBSERVE_AFTER(family, ...)               \
  template <>                                         \
  struct Observer<HookId::family> {                   \
    static void after(HookId, CUresult, __VA_ARGS__); \
  };
#define KCAP_OBSERVE_AROUND(family, ...)              \
  template <>                                         \
  struct Observer<HookId::family> {                   \
    static void before(HookId, __VA_ARGS__);          \
    static void after(HookId, CUresult, __VA_ARGS__); \
  };
// The same, plus returned(): called first once the real call returns,
// before a failure is observed, and never throws (a launch's outcome,
// which the trace's writer waits for: launch_outcome.h).
#define KCAP_OBSERVE_LAUNCH(family, ...)                                       \
  template <>                                                                  \
  struct Observer<HookId::family> {                                            \
    static void before(HookId, __VA_ARGS__);                                   \
    static void returned(CUresult result) noexcept { launchReturned(result); } \
    static void after(HookId, CUresult, __VA_ARGS__);                          \
  };

// Code (observers.cpp)
KCAP_OBSERVE_AFTER(cuModuleLoad_hook, CUmodule* module, const char* path)
KCAP_OBSERVE_AFTER(cuModuleLoadData_hook, CUmodule* module, const void* image)
KCAP_OBSERVE_AFTER(cuModuleLoadDataEx_hook, CUmodule* module, const void* image, unsigned count, CUjit_option* options,
                   void** values)
KCAP_OBSERVE_AFTER(cuModuleLoadFatBinary_hook, CUmodule* module, const void* fatbin)
KCAP_OBSERVE_AFTER(cuModuleUnload_hook, CUmodule module)
KCAP_OBSERVE_AFTER(cuModuleGetFunction_hook, CUfunction* function, CUmodule module, const char* name)
KCAP_OBSERVE_AFTER(cuModuleEnumerateFunctions_hook, CUfunction* functions, unsigned count, CUmodule module)
KCAP_OBSERVE_AFTER(cuLibraryLoadData_hook, CUlibrary* library, const void* code, CUjit_option* jitOptions,
                   void** jitValues, unsigned jitCount, CUlibraryOption* libraryOptions, void** libraryValues,
                   unsigned libraryCount)
KCAP_OBSERVE_AFTER(cuLibraryLoadFromFile_hook, CUlibrary* library, const char* path, CUjit_option* jitOptions,
                   void** jitValues, unsigned jitCount, CUlibraryOption* libraryOptions, void** libraryValues,
                   unsigned libraryCount)
KCAP_OBSERVE_AFTER(cuLibraryUnload_hook, CUlibrary library)
KCAP_OBSERVE_AFTER(cuLibraryGetKernel_hook, CUkernel* kernel, CUlibrary library, const char* name)
KCAP_OBSERVE_AFTER(cuLibraryEnumerateKernels_hook, CUkernel* kernels, unsigned count, CUlibrary library)
KCAP_OBSERVE_AFTER(cuLibraryGetModule_hook, CUmodule* module, CUlibrary library)
KCAP_OBSERVE_AFTER(cuKernelGetFunction_hook, CUfunction* function, CUkernel kernel)
KCAP_OBSERVE_AFTER(cuFuncSetAttribute_hook, CUfunction function, CUfunction_attribute attribute, int value)
KCAP_OBSERVE_AFTER(cuKernelSetAttribute_hook, CUfunction_attribute attribute, int value, CUkernel kernel,
                   CUdevice device)
KCAP_OBSERVE_AFTER(cuFuncSetCacheConfig_hook, CUfunction function, CUfunc_cache config)

// Launches are observed before the real call: a launch that faults must
// already be on record (and its inputs snapshotted) when the driver gets it.
KCAP_OBSERVE_LAUNCH(cuLaunchKernel_hook, CUfunction f, unsigned gridX, unsigned gridY, unsigned gridZ, unsigned blockX,
                    unsigned blockY, unsigned blockZ, unsigned sharedBytes, CUstream stream, void** params,
                    void** extra)
KCAP_OBSERVE_LAUNCH(cuLaunchKernelEx_hook, const CUlaunchConfig* config, CUfunction f, void** params, void** extra)
KCAP_OBSERVE_LAUNCH(cuLaunchCooperativeKernel_hook, CUfunction f, unsigned gridX, unsigned gridY, unsigned gridZ,
                    unsigned blockX, unsigned blockY, unsigned blockZ, unsigned sharedBytes, CUstream stream,
                    void** params)
KCAP_OBSERVE_AROUND(cuGraphLaunch_hook, CUgraphExec graph, CUstream stream)

// Graphs (graph_observers.cpp): an executable's structure when it is made
// or updated, each change to one of its nodes, and what conditional nodes are.
KCAP_OBSERVE_AFTER(cuGraphInstantiateWithFlags_hook, CUgraphExec* exec, CUgraph graph, unsigned long long flags)
KCAP_OBSERVE_AFTER(cuGraphInstantiateWithParams_hook, CUgraphExec* exec, CUgraph graph,
                   CUDA_GRAPH_INSTANTIATE_PARAMS* params)
template <>
struct Observer<HookId::cuGraphExecUpdate_hook> {
  static void after(HookId, CUresult, CUgraphExec exec, CUgraph graph, CUgraphNode* errorNode,
                    CUgraphExecUpdateResult* updateResult);
  static void after(HookId, CUresult, CUgraphExec exec, CUgraph graph, CUgraphExecUpdateResultInfo* info);
};
template <>
struct Observer<HookId::cuGraphExecKernelNodeSetParams_hook> {
  static void after(HookId, CUresult, CUgraphExec exec, CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS_v1* params);
  static void after(HookId, CUresult, CUgraphExec exec, CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS* params);
};
KCAP_OBSERVE_AFTER(cuGraphExecMemcpyNodeSetParams_hook, CUgraphExec exec, CUgraphNode node, const CUDA_MEMCPY3D* copy,
                   CUcontext context)
KCAP_OBSERVE_AFTER(cuGraphExecMemsetNodeSetParams_hook, CUgraphExec exec, CUgraphNode node,
                   const CUDA_MEMSET_NODE_PARAMS* params, CUcontext context)
KCAP_OBSERVE_AFTER(cuGraphExecHostNodeSetParams_hook, CUgraphExec exec, CUgraphNode node,
                   const CUDA_HOST_NODE_PARAMS* params)
KCAP_OBSERVE_AFTER(cuGraphExecChildGraphNodeSetParams_hook, CUgraphExec exec, CUgraphNode node, CUgraph child)
KCAP_OBSERVE_AFTER(cuGraphExecEventRecordNodeSetEvent_hook, CUgraphExec exec, CUgraphNode node, CUevent event)
KCAP_OBSERVE_AFTER(cuGraphExecEventWaitNodeSetEvent_hook, CUgraphExec exec, CUgraphNode node, CUevent event)
KCAP_OBSERVE_AFTER(cuGraphExecNodeSetParams_hook, CUgraphExec exec, CUgraphNode node, CUgraphNodeParams* params)
KCAP_OBSERVE_AFTER(cuGraphNodeSetEnabled_hook, CUgraphExec exec, CUgraphNode node, unsigned enabled)
template <>
struct Observer<HookId::cuGraphAddNode_hook> {
  static void after(HookId, CUresult, CUgraphNode* node, CUgraph graph, const CUgraphNode* deps, size_t count,
                    CUgraphNodeParams* params);
  static void after(HookId, CUresult, CUgraphNode* node, CUgraph graph, const CUgraphNode* deps,
                    const CUgraphEdgeData* edges, size_t count, CUgraphNodeParams* params);
};
KCAP_OBSERVE_AFTER(cuGraphConditionalHandleCreate_hook, CUgraphConditionalHandle* handle, CUgraph graph,
                   CUcontext context, unsigned defaultValue, unsigned flags)

// Allocation (memory_observers.cpp). Frees are seen before the real call
// too: the allocation leaves the map before its addresses can be reused.
KCAP_OBSERVE_AFTER(cuMemAlloc_v2_hook, CUdeviceptr* address, size_t size)
KCAP_OBSERVE_AFTER(cuMemAllocPitch_v2_hook, CUdeviceptr* address, size_t* pitch, size_t width, size_t height,
                   unsigned elementSize)
KCAP_OBSERVE_AFTER(cuMemAllocManaged_hook, CUdeviceptr* address, size_t size, unsigned flags)
KCAP_OBSERVE_AFTER(cuMemAllocAsync_hook, CUdeviceptr* address, size_t size, CUstream stream)
KCAP_OBSERVE_AFTER(cuMemAllocFromPoolAsync_hook, CUdeviceptr* address, size_t size, CUmemoryPool pool, CUstream stream)
KCAP_OBSERVE_AROUND(cuMemFree_v2_hook, CUdeviceptr address)
KCAP_OBSERVE_AROUND(cuMemFreeAsync_hook, CUdeviceptr address, CUstream stream)
KCAP_OBSERVE_AFTER(cuMemAddressReserve_hook, CUdeviceptr* address, size_t size, size_t alignment, CUdeviceptr hint,
                   unsigned long long flags)
KCAP_OBSERVE_AROUND(cuMemAddressFree_hook, CUdeviceptr address, size_t size)
KCAP_OBSERVE_AFTER(cuMemCreate_hook, CUmemGenericAllocationHandle* handle, size_t size, const CUmemAllocationProp* prop,
                   unsigned long long flags)
KCAP_OBSERVE_AFTER(cuMemRelease_hook, CUmemGenericAllocationHandle handle)
KCAP_OBSERVE_AFTER(cuMemMap_hook, CUdeviceptr address, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                   unsigned long long flags)
KCAP_OBSERVE_AROUND(cuMemUnmap_hook, CUdeviceptr address, size_t size)
KCAP_OBSERVE_AFTER(cuMemImportFromShareableHandle_hook, CUmemGenericAllocationHandle* handle, void* osHandle,
                   CUmemAllocationHandleType type)
KCAP_OBSERVE_AFTER(cuIpcOpenMemHandle_v2_hook, CUdeviceptr* address, CUipcMemHandle handle, unsigned flags)
KCAP_OBSERVE_AROUND(cuIpcCloseMemHandle_hook, CUdeviceptr address)
KCAP_OBSERVE_AFTER(cuMemAllocHost_v2_hook, void** pointer, size_t size)
KCAP_OBSERVE_AFTER(cuMemHostAlloc_hook, void** pointer, size_t size, unsigned flags)
KCAP_OBSERVE_AROUND(cuMemFreeHost_hook, void* pointer)
KCAP_OBSERVE_AFTER(cuMemHostRegister_v2_hook, void* pointer, size_t size, unsigned flags)
KCAP_OBSERVE_AROUND(cuMemHostUnregister_hook, void* pointer)

// Copies and memsets
KCAP_OBSERVE_AFTER(cuMemcpyHtoD_v2_hook, CUdeviceptr dst, const void* src, size_t size)
KCAP_OBSERVE_AFTER(cuMemcpyHtoDAsync_v2_hook, CUdeviceptr dst, const void* src, size_t size, CUstream stream)
KCAP_OBSERVE_AFTER(cuMemcpyDtoD_v2_hook, CUdeviceptr dst, CUdeviceptr src, size_t size)
KCAP_OBSERVE_AFTER(cuMemcpyDtoDAsync_v2_hook, CUdeviceptr dst, CUdeviceptr src, size_t size, CUstream stream)
KCAP_OBSERVE_AFTER(cuMemcpyPeer_hook, CUdeviceptr dst, CUcontext dstContext, CUdeviceptr src, CUcontext srcContext,
                   size_t size)
KCAP_OBSERVE_AFTER(cuMemcpyPeerAsync_hook, CUdeviceptr dst, CUcontext dstContext, CUdeviceptr src, CUcontext srcContext,
                   size_t size, CUstream stream)
KCAP_OBSERVE_AFTER(cuMemcpyDtoH_v2_hook, void* dst, CUdeviceptr src, size_t size)
KCAP_OBSERVE_AFTER(cuMemcpyDtoHAsync_v2_hook, void* dst, CUdeviceptr src, size_t size, CUstream stream)
KCAP_OBSERVE_AFTER(cuMemcpy_hook, CUdeviceptr dst, CUdeviceptr src, size_t size)
KCAP_OBSERVE_AFTER(cuMemcpyAsync_hook, CUdeviceptr dst, CUdeviceptr src, size_t size, CUstream stream)
KCAP_OBSERVE_AFTER(cuMemsetD8_v2_hook, CUdeviceptr dst, unsigned char value, size_t count)
KCAP_OBSERVE_AFTER(cuMemsetD16_v2_hook, CUdeviceptr dst, unsigned short value, size_t count)
KCAP_OBSERVE_AFTER(cuMemsetD32_v2_hook, CUdeviceptr dst, unsigned value, size_t count)
KCAP_OBSERVE_AFTER(cuMemsetD8Async_hook, CUdeviceptr dst, unsigned char value, size_t count, CUstream stream)
KCAP_OBSERVE_AFTER(cuMemsetD16Async_hook, CUdeviceptr dst, unsigned short value, size_t count, CUstream stream)
KCAP_OBSERVE_AFTER(cuMemsetD32Async_hook, CUdeviceptr dst, unsigned value, size_t count, CUstream stream)
KCAP_OBSERVE_AFTER(cuMemcpy2D_v2_hook, const CUDA_MEMCPY2D* copy)
KCAP_OBSERVE_AFTER(cuMemcpy2DUnaligned_v2_hook, const CUDA_MEMCPY2D* copy)
KCAP_OBSERVE_AFTER(cuMemcpy2DAsync_v2_hook, const CUDA_MEMCPY2D* copy, CUstream stream)
KCAP_OBSERVE_AFTER(cuMemsetD2D8_v2_hook, CUdeviceptr dst, size_t pitch, unsigned char value, size_t width,
                   size_t height)
KCAP_OBSERVE_AFTER(cuMemsetD2D16_v2_hook, CUdeviceptr dst, size_t pitch, unsigned short value, size_t width,
                   size_t height)
KCAP_OBSERVE_AFTER(cuMemsetD2D32_v2_hook, CUdeviceptr dst, size_t pitch, unsigned value, size_t width, size_t height)
KCAP_OBSERVE_AFTER(cuMemsetD2D8Async_hook, CUdeviceptr dst, size_t pitch, unsigned char value, size_t width,
                   size_t height, CUstream stream)
KCAP_OBSERVE_AFTER(cuMemsetD2D16Async_hook, CUdeviceptr dst, size_t pitch, unsigned short value, size_t width,
                   size_t height, CUstream stream)
KCAP_OBSERVE_AFTER(cuMemsetD2D32Async_hook, CUdeviceptr dst, size_t pitch, unsigned value, size_t width, size_t height,
                   CUstream stream)
KCAP_OBSERVE_AFTER(cuMemcpy3D_v2_hook, const CUDA_MEMCPY3D* copy)
KCAP_OBSERVE_AFTER(cuMemcpy3DAsync_v2_hook, const CUDA_MEMCPY3D* copy, CUstream stream)
KCAP_OBSERVE_AFTER(cuMemcpy3DPeer_hook, const CUDA_MEMCPY3D_PEER* copy)
KCAP_OBSERVE_AFTER(cuMemcpy3DPeerAsync_hook, const CUDA_MEMCPY3D_PEER* copy, CUstream stream)

// Streams, events, synchronization, graph capture
KCAP_OBSERVE_AFTER(cuStreamCreate_hook, CUstream* stream, unsigned flags)
KCAP_OBSERVE_AFTER(cuStreamCreateWithPriority_hook, CUstream* stream, unsigned flags, int priority)
KCAP_OBSERVE_AFTER(cuStreamDestroy_v2_hook, CUstream stream)
KCAP_OBSERVE_AFTER(cuStreamSynchronize_hook, CUstream stream)
KCAP_OBSERVE_AFTER(cuEventCreate_hook, CUevent* event, unsigned flags)
KCAP_OBSERVE_AFTER(cuEventDestroy_v2_hook, CUevent event)
KCAP_OBSERVE_AFTER(cuEventRecord_hook, CUevent event, CUstream stream)
KCAP_OBSERVE_AFTER(cuStreamWaitEvent_hook, CUstream stream, CUevent event, unsigned flags)
KCAP_OBSERVE_AFTER(cuEventSynchronize_hook, CUevent event)
KCAP_OBSERVE_AFTER(cuStreamBeginCapture_v2_hook, CUstream stream, CUstreamCaptureMode mode)
KCAP_OBSERVE_AFTER(cuStreamEndCapture_hook, CUstream stream, CUgraph* graph)

// Tensor maps (memory_observers.cpp)
KCAP_OBSERVE_AFTER(cuTensorMapEncodeTiled_hook, CUtensorMap* map, CUtensorMapDataType dataType, cuuint32_t rank,
                   void* address, const cuuint64_t* globalDim, const cuuint64_t* globalStrides,
                   const cuuint32_t* boxDim, const cuuint32_t* elementStrides, CUtensorMapInterleave interleave,
                   CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2Promotion, CUtensorMapFloatOOBfill oobFill)
KCAP_OBSERVE_AFTER(cuTensorMapEncodeIm2col_hook, CUtensorMap* map, CUtensorMapDataType dataType, cuuint32_t rank,
                   void* address, const cuuint64_t* globalDim, const cuuint64_t* globalStrides, const int* lowerCorner,
                   const int* upperCorner, cuuint32_t channelsPerPixel, cuuint32_t pixelsPerColumn,
                   const cuuint32_t* elementStrides, CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,
                   CUtensorMapL2promotion l2Promotion, CUtensorMapFloatOOBfill oobFill)
KCAP_OBSERVE_AFTER(cuTensorMapEncodeIm2colWide_hook, CUtensorMap* map, CUtensorMapDataType dataType, cuuint32_t rank,
                   void* address, const cuuint64_t* globalDim, const cuuint64_t* globalStrides, int lowerCornerWidth,
                   int upperCornerWidth, cuuint32_t channelsPerPixel, cuuint32_t pixelsPerColumn,
                   const cuuint32_t* elementStrides, CUtensorMapInterleave interleave, CUtensorMapIm2ColWideMode mode,
                   CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2Promotion, CUtensorMapFloatOOBfill oobFill)

// cuCtxSynchronize has two ABIs (CUDA 13 added the context argument).
template <>
struct Observer<HookId::cuCtxSynchronize_hook> {
  static void after(HookId, CUresult);
  static void after(HookId, CUresult, CUcontext context);
};

#undef KCAP_OBSERVE_AFTER
#undef KCAP_OBSERVE_AROUND

}  // namespace kcap
