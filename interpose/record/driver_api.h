// The real driver functions the recorder itself calls (device queries,
// synchronization, device-to-host copies, parameter layouts, globals), taken
// from the real libcuda by symbol, never through the shim's own exports.
//
// Resolved once, the first time recording starts. A function the driver does
// not have is nullptr, and the recorder does without it (see each use).
#pragma once

#include <cudaTypedefs.h>

#include <cstdint>

namespace kcap {

struct DriverApi {
  PFN_cuDriverGetVersion_v2020 driverGetVersion = nullptr;
  PFN_cuGetErrorName_v6000 getErrorName = nullptr;
  PFN_cuDeviceGetCount_v2000 deviceGetCount = nullptr;
  PFN_cuDeviceGet_v2000 deviceGet = nullptr;
  PFN_cuDeviceGetName_v2000 deviceGetName = nullptr;
  PFN_cuDeviceGetUuid_v11040 deviceGetUuid = nullptr;
  PFN_cuDeviceGetAttribute_v2000 deviceGetAttribute = nullptr;
  PFN_cuDeviceTotalMem_v3020 deviceTotalMem = nullptr;
  PFN_cuDeviceGetPCIBusId_v4010 deviceGetPCIBusId = nullptr;

  PFN_cuCtxGetCurrent_v4000 ctxGetCurrent = nullptr;
  PFN_cuCtxSetCurrent_v4000 ctxSetCurrent = nullptr;  // the read-back thread (written_readback.h)
  PFN_cuCtxGetDevice_v2000 ctxGetDevice = nullptr;
  PFN_cuCtxSynchronize_v2000 ctxSynchronize = nullptr;
  PFN_cuStreamSynchronize_v2000 streamSynchronize = nullptr;
  PFN_cuStreamGetCtx_v9020 streamGetCtx = nullptr;  // a read-back queued on another context's stream
  PFN_cuStreamIsCapturing_v10000 streamIsCapturing = nullptr;
  PFN_cuStreamGetCaptureInfo_v12030 streamGetCaptureInfo = nullptr;  // a captured NCCL call's capture (its slot)
  PFN_cuStreamWaitEvent_v3020 streamWaitEvent = nullptr;             // a graph launch after a shared slot's read-back
  PFN_cuThreadExchangeStreamCaptureMode_v10010 threadExchangeStreamCaptureMode = nullptr;

  PFN_cuMemcpyDtoH_v3020 memcpyDtoH = nullptr;
  PFN_cuMemcpyDtoHAsync_v3020 memcpyDtoHAsync = nullptr;
  PFN_cuMemcpy3D_v3020 memcpy3D = nullptr;            // a cross-device 2D/3D copy's rows, packed
  PFN_cuMemcpy3DAsync_v3020 memcpy3DAsync = nullptr;  // the same, read back later (written_readback.h)
  PFN_cuStreamCreate_v2000 streamCreate = nullptr;
  // Checkpoints: the program's queued work, waited for without blocking in the driver.
  PFN_cuEventCreate_v2000 eventCreate = nullptr;
  PFN_cuEventRecord_v2000 eventRecord = nullptr;
  PFN_cuEventQuery_v2000 eventQuery = nullptr;
  PFN_cuEventDestroy_v4000 eventDestroy = nullptr;
  PFN_cuMemHostAlloc_v2020 memHostAlloc = nullptr;
  PFN_cuMemFreeHost_v2000 memFreeHost = nullptr;
  PFN_cuMemHostRegister_v6050 memHostRegister = nullptr;
  PFN_cuMemHostUnregister_v4000 memHostUnregister = nullptr;
  PFN_cuPointerGetAttribute_v4000 pointerGetAttribute = nullptr;
  PFN_cuMemGetAddressRange_v3020 memGetAddressRange = nullptr;
  // The copies added after NCCL calls captured into graphs (captured_copies.h).
  PFN_cuMemAlloc_v3020 memAlloc = nullptr;
  PFN_cuMemFree_v3020 memFree = nullptr;
  PFN_cuMemGetInfo_v3020 memGetInfo = nullptr;
  PFN_cuMemcpyDtoDAsync_v3020 memcpyDtoDAsync = nullptr;

  // The shim's own kernel (device_hash.h).
  PFN_cuLibraryLoadData_v12000 libraryLoadData = nullptr;
  PFN_cuLibraryGetKernel_v12000 libraryGetKernel = nullptr;
  PFN_cuLaunchKernel_v4000 launchKernel = nullptr;

  // Graphs: what an executable graph is made of (record_graph.cpp).
  PFN_cuGraphGetNodes_v10000 graphGetNodes = nullptr;
  PFN_cuGraphGetEdges_v12030 graphGetEdges = nullptr;    // with edge data (CUDA 12.3)
  PFN_cuGraphGetEdges_v10000 graphGetEdgesV1 = nullptr;  // without
  PFN_cuGraphNodeGetType_v10000 graphNodeGetType = nullptr;
  PFN_cuGraphKernelNodeGetParams_v12000 graphKernelNodeGetParams = nullptr;
  PFN_cuGraphKernelNodeGetAttribute_v11000 graphKernelNodeGetAttribute = nullptr;
  PFN_cuGraphMemcpyNodeGetParams_v10000 graphMemcpyNodeGetParams = nullptr;
  PFN_cuGraphMemsetNodeGetParams_v10000 graphMemsetNodeGetParams = nullptr;
  PFN_cuGraphHostNodeGetParams_v10000 graphHostNodeGetParams = nullptr;
  PFN_cuGraphChildGraphNodeGetGraph_v10000 graphChildGraphNodeGetGraph = nullptr;
  PFN_cuGraphEventRecordNodeGetEvent_v11010 graphEventRecordNodeGetEvent = nullptr;
  PFN_cuGraphEventWaitNodeGetEvent_v11010 graphEventWaitNodeGetEvent = nullptr;
  PFN_cuGraphMemAllocNodeGetParams_v11040 graphMemAllocNodeGetParams = nullptr;
  PFN_cuGraphMemFreeNodeGetParams_v11040 graphMemFreeNodeGetParams = nullptr;

  PFN_cuFuncGetParamInfo_v12040 funcGetParamInfo = nullptr;
  PFN_cuKernelGetParamInfo_v12040 kernelGetParamInfo = nullptr;
  PFN_cuFuncIsLoaded_v12040 funcIsLoaded = nullptr;
  PFN_cuFuncLoad_v12040 funcLoad = nullptr;
  PFN_cuKernelGetFunction_v12000 kernelGetFunction = nullptr;
  PFN_cuModuleGetGlobal_v3020 moduleGetGlobal = nullptr;
  PFN_cuLibraryGetGlobal_v12000 libraryGetGlobal = nullptr;
};

// The driver's functions (all nullptr when the driver cannot be loaded).
const DriverApi& driverApi() noexcept;

// Whether `stream` is capturing into a graph (false when the driver cannot say).
bool isCapturing(CUstream stream) noexcept;

// The calling thread's current context (0 if none) and its device (-1).
uint64_t currentContext() noexcept;
int currentDevice() noexcept;
int deviceOf(uint64_t context) noexcept;  // `context` must be the calling thread's current one

// Makes `wanted` this thread's current context for the scope when `current`
// (the current one) is not it, and `current` again at its end: the driver
// checks a copy, an event and a launch against the current context, and the
// recorder works with another context's streams and memory (a checkpoint
// under another device's context, a read-back on another device's stream).
class ContextSwitch {
 public:
  ContextSwitch(CUcontext wanted, CUcontext current) noexcept;
  ~ContextSwitch();
  ContextSwitch(const ContextSwitch&) = delete;
  ContextSwitch& operator=(const ContextSwitch&) = delete;
  CUresult result() const { return result_; }  // of making `wanted` current

 private:
  CUcontext previous_;
  bool switched_ = false;
  CUresult result_ = CUDA_SUCCESS;
};

// "CUDA_ERROR_ILLEGAL_ADDRESS", or "CUresult <n>" when the driver cannot say.
const char* resultName(CUresult result, char (&buffer)[32]) noexcept;

// Sets this thread's stream capture mode to relaxed for the scope, so that
// the recorder's own driver calls are never "unsafe" calls that would
// invalidate another stream's capture (CUDA-NOTES: Memory).
class RelaxedCaptureMode {
 public:
  RelaxedCaptureMode() noexcept;
  ~RelaxedCaptureMode();
  RelaxedCaptureMode(const RelaxedCaptureMode&) = delete;
  RelaxedCaptureMode& operator=(const RelaxedCaptureMode&) = delete;

 private:
  CUstreamCaptureMode previous_ = CU_STREAM_CAPTURE_MODE_RELAXED;
  bool exchanged_ = false;
};

}  // namespace kcap
