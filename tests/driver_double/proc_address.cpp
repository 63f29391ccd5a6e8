// cuGetProcAddress as the real driver answers it: a lookup names an API and
// the CUDA version the caller was built for; the answer is the function of
// the newest ABI of that API not newer than the version, in its per-thread-
// default-stream variant if the caller asks for one and the API has one.
//
// Failures as an H200's driver (580.159.04) reported them: the CUDA 12 form
// returns CUDA_SUCCESS with a NULL function and the reason in its status
// (not CUDA_ERROR_NOT_FOUND, whatever the documentation says); the CUDA 11.3
// form returns CUDA_ERROR_NOT_FOUND and leaves the function untouched. A
// per-thread request older than the API's per-thread variant finds nothing;
// it does not fall back to the legacy variant.
#include "driver_exports.h"

#include <cuda.h>

#include <string_view>

namespace {

struct Entry {
  std::string_view api;
  int version;
  bool perThread;
  void* function;
};

// Versions are those of the PFN_<api>_v<version> types in cudaTypedefs.h.
const Entry* entries(std::size_t& count) {
#define ENTRY(api, version, per_thread, function) \
  { #api, version, per_thread, reinterpret_cast < void*>(&function) }
  static const Entry table[] = {
      ENTRY(cuGetProcAddress, 11030, false, cuGetProcAddress),
      ENTRY(cuGetProcAddress, 12000, false, cuGetProcAddress_v2),
      ENTRY(cuInit, 2000, false, cuInit),
      ENTRY(cuDriverGetVersion, 2020, false, cuDriverGetVersion),
      ENTRY(cuGetErrorName, 6000, false, cuGetErrorName),
      ENTRY(cuGetErrorString, 6000, false, cuGetErrorString),
      ENTRY(cuDeviceGet, 2000, false, cuDeviceGet),
      ENTRY(cuDeviceGetCount, 2000, false, cuDeviceGetCount),
      ENTRY(cuDeviceGetName, 2000, false, cuDeviceGetName),
      ENTRY(cuDeviceGetAttribute, 2000, false, cuDeviceGetAttribute),
      ENTRY(cuDeviceTotalMem, 3020, false, cuDeviceTotalMem_v2),
      ENTRY(cuDeviceGetUuid, 9020, false, cuDeviceGetUuid),
      ENTRY(cuDeviceGetUuid, 11040, false, cuDeviceGetUuid_v2),
      ENTRY(cuDevicePrimaryCtxRetain, 7000, false, cuDevicePrimaryCtxRetain),
      ENTRY(cuDevicePrimaryCtxRelease, 11000, false, cuDevicePrimaryCtxRelease_v2),
      ENTRY(cuCtxCreate, 12050, false, cuCtxCreate_v4),
      ENTRY(cuCtxDestroy, 4000, false, cuCtxDestroy_v2),
      ENTRY(cuCtxGetCurrent, 4000, false, cuCtxGetCurrent),
      ENTRY(cuCtxSetCurrent, 4000, false, cuCtxSetCurrent),
      ENTRY(cuCtxSynchronize, 2000, false, cuCtxSynchronize),
      ENTRY(cuCtxSynchronize, 13000, false, cuCtxSynchronize_v2),
      ENTRY(cuCtxGetDevice, 2000, false, cuCtxGetDevice),
      ENTRY(cuDeviceGetPCIBusId, 4010, false, cuDeviceGetPCIBusId),
      ENTRY(cuModuleLoad, 2000, false, cuModuleLoad),
      ENTRY(cuModuleLoadData, 2000, false, cuModuleLoadData),
      ENTRY(cuModuleLoadDataEx, 2010, false, cuModuleLoadDataEx),
      ENTRY(cuModuleLoadFatBinary, 2000, false, cuModuleLoadFatBinary),
      ENTRY(cuLinkCreate, 6050, false, cuLinkCreate_v2),
      ENTRY(cuLinkAddData, 6050, false, cuLinkAddData_v2),
      ENTRY(cuLinkComplete, 5050, false, cuLinkComplete),
      ENTRY(cuLinkDestroy, 5050, false, cuLinkDestroy),
      ENTRY(cuModuleUnload, 2000, false, cuModuleUnload),
      ENTRY(cuModuleGetFunction, 2000, false, cuModuleGetFunction),
      ENTRY(cuModuleGetGlobal, 3020, false, cuModuleGetGlobal_v2),
      ENTRY(cuLibraryLoadData, 12000, false, cuLibraryLoadData),
      ENTRY(cuLibraryLoadFromFile, 12000, false, cuLibraryLoadFromFile),
      ENTRY(cuLibraryUnload, 12000, false, cuLibraryUnload),
      ENTRY(cuLibraryGetKernel, 12000, false, cuLibraryGetKernel),
      ENTRY(cuLibraryGetKernelCount, 12040, false, cuLibraryGetKernelCount),
      ENTRY(cuLibraryEnumerateKernels, 12040, false, cuLibraryEnumerateKernels),
      ENTRY(cuLibraryGetModule, 12000, false, cuLibraryGetModule),
      ENTRY(cuLibraryGetGlobal, 12000, false, cuLibraryGetGlobal),
      ENTRY(cuKernelGetFunction, 12000, false, cuKernelGetFunction),
      ENTRY(cuFuncGetName, 12030, false, cuFuncGetName),
      ENTRY(cuKernelGetName, 12030, false, cuKernelGetName),
      ENTRY(cuFuncGetParamInfo, 12040, false, cuFuncGetParamInfo),
      ENTRY(cuFuncIsLoaded, 12040, false, cuFuncIsLoaded),
      ENTRY(cuFuncLoad, 12040, false, cuFuncLoad),
      ENTRY(cuKernelGetParamInfo, 12040, false, cuKernelGetParamInfo),
      ENTRY(cuFuncSetAttribute, 9000, false, cuFuncSetAttribute),
      ENTRY(cuFuncSetCacheConfig, 3000, false, cuFuncSetCacheConfig),
      ENTRY(cuKernelSetAttribute, 12000, false, cuKernelSetAttribute),
      ENTRY(cuMemAlloc, 3020, false, cuMemAlloc_v2),
      ENTRY(cuMemFree, 3020, false, cuMemFree_v2),
      ENTRY(cuMemGetAddressRange, 3020, false, cuMemGetAddressRange_v2),
      ENTRY(cuMemAllocHost, 3020, false, cuMemAllocHost_v2),
      ENTRY(cuMemGetAllocationGranularity, 10020, false, cuMemGetAllocationGranularity),
      ENTRY(cuMemAddressReserve, 10020, false, cuMemAddressReserve),
      ENTRY(cuMemAddressFree, 10020, false, cuMemAddressFree),
      ENTRY(cuMemCreate, 10020, false, cuMemCreate),
      ENTRY(cuMemRelease, 10020, false, cuMemRelease),
      ENTRY(cuMemMap, 10020, false, cuMemMap),
      ENTRY(cuMemImportFromShareableHandle, 10020, false, cuMemImportFromShareableHandle),
      ENTRY(cuMemUnmap, 10020, false, cuMemUnmap),
      ENTRY(cuIpcOpenMemHandle, 11000, false, cuIpcOpenMemHandle_v2),
      ENTRY(cuIpcCloseMemHandle, 4010, false, cuIpcCloseMemHandle),
      ENTRY(cuMemSetAccess, 10020, false, cuMemSetAccess),
      ENTRY(cuMemHostAlloc, 2020, false, cuMemHostAlloc),
      ENTRY(cuMemFreeHost, 2000, false, cuMemFreeHost),
      ENTRY(cuMemHostRegister, 6050, false, cuMemHostRegister_v2),
      ENTRY(cuMemHostUnregister, 4000, false, cuMemHostUnregister),
      ENTRY(cuPointerGetAttribute, 4000, false, cuPointerGetAttribute),
      ENTRY(cuMemAllocAsync, 11020, false, cuMemAllocAsync),
      ENTRY(cuMemAllocAsync, 11020, true, cuMemAllocAsync_ptsz),
      ENTRY(cuMemFreeAsync, 11020, false, cuMemFreeAsync),
      ENTRY(cuMemFreeAsync, 11020, true, cuMemFreeAsync_ptsz),
      ENTRY(cuMemcpy, 4000, false, cuMemcpy),
      ENTRY(cuMemcpy, 7000, true, cuMemcpy_ptds),
      ENTRY(cuMemcpyAsync, 4000, false, cuMemcpyAsync),
      ENTRY(cuMemcpyAsync, 7000, true, cuMemcpyAsync_ptsz),
      ENTRY(cuMemcpyPeer, 4000, false, cuMemcpyPeer),
      ENTRY(cuMemcpyPeer, 7000, true, cuMemcpyPeer_ptds),
      ENTRY(cuMemcpyPeerAsync, 4000, false, cuMemcpyPeerAsync),
      ENTRY(cuMemcpyPeerAsync, 7000, true, cuMemcpyPeerAsync_ptsz),
      ENTRY(cuMemcpy3DPeer, 4000, false, cuMemcpy3DPeer),
      ENTRY(cuMemcpy3DPeer, 7000, true, cuMemcpy3DPeer_ptds),
      ENTRY(cuMemcpy3DPeerAsync, 4000, false, cuMemcpy3DPeerAsync),
      ENTRY(cuMemcpy3DPeerAsync, 7000, true, cuMemcpy3DPeerAsync_ptsz),
      ENTRY(cuTensorMapEncodeTiled, 12000, false, cuTensorMapEncodeTiled),
      ENTRY(cuTensorMapEncodeIm2col, 12000, false, cuTensorMapEncodeIm2col),
      ENTRY(cuTensorMapEncodeIm2colWide, 12080, false, cuTensorMapEncodeIm2colWide),
      ENTRY(cuTensorMapReplaceAddress, 12000, false, cuTensorMapReplaceAddress),
      ENTRY(cuMemsetD16, 3020, false, cuMemsetD16_v2),
      ENTRY(cuMemsetD16, 7000, true, cuMemsetD16_v2_ptds),
      ENTRY(cuMemsetD16Async, 3020, false, cuMemsetD16Async),
      ENTRY(cuMemsetD16Async, 7000, true, cuMemsetD16Async_ptsz),
      ENTRY(cuMemcpyHtoD, 3020, false, cuMemcpyHtoD_v2),
      ENTRY(cuMemcpyHtoD, 7000, true, cuMemcpyHtoD_v2_ptds),
      ENTRY(cuMemcpyDtoH, 3020, false, cuMemcpyDtoH_v2),
      ENTRY(cuMemcpyDtoH, 7000, true, cuMemcpyDtoH_v2_ptds),
      ENTRY(cuMemcpyDtoD, 3020, false, cuMemcpyDtoD_v2),
      ENTRY(cuMemcpyDtoD, 7000, true, cuMemcpyDtoD_v2_ptds),
      ENTRY(cuMemcpyHtoDAsync, 3020, false, cuMemcpyHtoDAsync_v2),
      ENTRY(cuMemcpyHtoDAsync, 7000, true, cuMemcpyHtoDAsync_v2_ptsz),
      ENTRY(cuMemcpyDtoHAsync, 3020, false, cuMemcpyDtoHAsync_v2),
      ENTRY(cuMemcpyDtoHAsync, 7000, true, cuMemcpyDtoHAsync_v2_ptsz),
      ENTRY(cuMemcpyDtoDAsync, 3020, false, cuMemcpyDtoDAsync_v2),
      ENTRY(cuMemcpyDtoDAsync, 7000, true, cuMemcpyDtoDAsync_v2_ptsz),
      ENTRY(cuMemsetD8, 3020, false, cuMemsetD8_v2),
      ENTRY(cuMemsetD8, 7000, true, cuMemsetD8_v2_ptds),
      ENTRY(cuMemsetD32, 3020, false, cuMemsetD32_v2),
      ENTRY(cuMemsetD32, 7000, true, cuMemsetD32_v2_ptds),
      ENTRY(cuMemsetD8Async, 3020, false, cuMemsetD8Async),
      ENTRY(cuMemsetD8Async, 7000, true, cuMemsetD8Async_ptsz),
      ENTRY(cuMemsetD32Async, 3020, false, cuMemsetD32Async),
      ENTRY(cuMemsetD32Async, 7000, true, cuMemsetD32Async_ptsz),
      ENTRY(cuMemAllocPitch, 3020, false, cuMemAllocPitch_v2),
      ENTRY(cuMemcpy2D, 3020, false, cuMemcpy2D_v2),
      ENTRY(cuMemcpy2D, 7000, true, cuMemcpy2D_v2_ptds),
      ENTRY(cuMemcpy2DUnaligned, 3020, false, cuMemcpy2DUnaligned_v2),
      ENTRY(cuMemcpy2DUnaligned, 7000, true, cuMemcpy2DUnaligned_v2_ptds),
      ENTRY(cuMemcpy2DAsync, 3020, false, cuMemcpy2DAsync_v2),
      ENTRY(cuMemcpy2DAsync, 7000, true, cuMemcpy2DAsync_v2_ptsz),
      ENTRY(cuMemcpy3D, 3020, false, cuMemcpy3D_v2),
      ENTRY(cuMemcpy3D, 7000, true, cuMemcpy3D_v2_ptds),
      ENTRY(cuMemcpy3DAsync, 3020, false, cuMemcpy3DAsync_v2),
      ENTRY(cuMemcpy3DAsync, 7000, true, cuMemcpy3DAsync_v2_ptsz),
      ENTRY(cuMemsetD2D8, 3020, false, cuMemsetD2D8_v2),
      ENTRY(cuMemsetD2D8, 7000, true, cuMemsetD2D8_v2_ptds),
      ENTRY(cuMemsetD2D16, 3020, false, cuMemsetD2D16_v2),
      ENTRY(cuMemsetD2D16, 7000, true, cuMemsetD2D16_v2_ptds),
      ENTRY(cuMemsetD2D32, 3020, false, cuMemsetD2D32_v2),
      ENTRY(cuMemsetD2D32, 7000, true, cuMemsetD2D32_v2_ptds),
      ENTRY(cuMemsetD2D8Async, 3020, false, cuMemsetD2D8Async),
      ENTRY(cuMemsetD2D8Async, 7000, true, cuMemsetD2D8Async_ptsz),
      ENTRY(cuMemsetD2D16Async, 3020, false, cuMemsetD2D16Async),
      ENTRY(cuMemsetD2D16Async, 7000, true, cuMemsetD2D16Async_ptsz),
      ENTRY(cuMemsetD2D32Async, 3020, false, cuMemsetD2D32Async),
      ENTRY(cuMemsetD2D32Async, 7000, true, cuMemsetD2D32Async_ptsz),
      ENTRY(cuStreamCreate, 2000, false, cuStreamCreate),
      ENTRY(cuStreamDestroy, 4000, false, cuStreamDestroy_v2),
      ENTRY(cuStreamSynchronize, 2000, false, cuStreamSynchronize),
      ENTRY(cuStreamSynchronize, 7000, true, cuStreamSynchronize_ptsz),
      ENTRY(cuStreamIsCapturing, 10000, false, cuStreamIsCapturing),
      ENTRY(cuStreamIsCapturing, 10000, true, cuStreamIsCapturing_ptsz),
      ENTRY(cuStreamBeginCapture, 10010, false, cuStreamBeginCapture_v2),
      ENTRY(cuStreamBeginCapture, 10010, true, cuStreamBeginCapture_v2_ptsz),
      ENTRY(cuStreamEndCapture, 10000, false, cuStreamEndCapture),
      ENTRY(cuStreamEndCapture, 10000, true, cuStreamEndCapture_ptsz),
      ENTRY(cuStreamGetCaptureInfo, 12030, false, cuStreamGetCaptureInfo_v3),
      ENTRY(cuStreamGetCaptureInfo, 12030, true, cuStreamGetCaptureInfo_v3_ptsz),
      ENTRY(cuStreamUpdateCaptureDependencies, 12030, false, cuStreamUpdateCaptureDependencies_v2),
      ENTRY(cuStreamUpdateCaptureDependencies, 12030, true, cuStreamUpdateCaptureDependencies_v2_ptsz),
      ENTRY(cuThreadExchangeStreamCaptureMode, 10010, false, cuThreadExchangeStreamCaptureMode),
      ENTRY(cuGraphCreate, 10000, false, cuGraphCreate),
      ENTRY(cuGraphDestroy, 10000, false, cuGraphDestroy),
      ENTRY(cuGraphClone, 10000, false, cuGraphClone),
      ENTRY(cuGraphNodeFindInClone, 10000, false, cuGraphNodeFindInClone),
      ENTRY(cuGraphDestroyNode, 10000, false, cuGraphDestroyNode),
      ENTRY(cuGraphGetNodes, 10000, false, cuGraphGetNodes),
      ENTRY(cuGraphGetRootNodes, 10000, false, cuGraphGetRootNodes),
      ENTRY(cuGraphGetEdges, 10000, false, cuGraphGetEdges),
      ENTRY(cuGraphGetEdges, 12030, false, cuGraphGetEdges_v2),
      ENTRY(cuGraphAddDependencies, 10000, false, cuGraphAddDependencies),
      ENTRY(cuGraphAddDependencies, 12030, false, cuGraphAddDependencies_v2),
      ENTRY(cuGraphRemoveDependencies, 10000, false, cuGraphRemoveDependencies),
      ENTRY(cuGraphRemoveDependencies, 12030, false, cuGraphRemoveDependencies_v2),
      ENTRY(cuGraphNodeGetType, 10000, false, cuGraphNodeGetType),
      ENTRY(cuGraphNodeGetDependencies, 10000, false, cuGraphNodeGetDependencies),
      ENTRY(cuGraphNodeGetDependencies, 12030, false, cuGraphNodeGetDependencies_v2),
      ENTRY(cuGraphNodeGetDependentNodes, 10000, false, cuGraphNodeGetDependentNodes),
      ENTRY(cuGraphNodeGetDependentNodes, 12030, false, cuGraphNodeGetDependentNodes_v2),
      ENTRY(cuGraphAddNode, 12020, false, cuGraphAddNode),
      ENTRY(cuGraphNodeSetParams, 12020, false, cuGraphNodeSetParams),
      ENTRY(cuGraphExecNodeSetParams, 12020, false, cuGraphExecNodeSetParams),
      ENTRY(cuGraphAddNode, 12030, false, cuGraphAddNode_v2),
      ENTRY(cuGraphAddKernelNode, 10000, false, cuGraphAddKernelNode),
      ENTRY(cuGraphAddKernelNode, 12000, false, cuGraphAddKernelNode_v2),
      ENTRY(cuGraphKernelNodeGetParams, 10000, false, cuGraphKernelNodeGetParams),
      ENTRY(cuGraphKernelNodeGetParams, 12000, false, cuGraphKernelNodeGetParams_v2),
      ENTRY(cuGraphKernelNodeGetAttribute, 11000, false, cuGraphKernelNodeGetAttribute),
      ENTRY(cuGraphKernelNodeSetAttribute, 11000, false, cuGraphKernelNodeSetAttribute),
      ENTRY(cuGraphKernelNodeSetParams, 10000, false, cuGraphKernelNodeSetParams),
      ENTRY(cuGraphKernelNodeSetParams, 12000, false, cuGraphKernelNodeSetParams_v2),
      ENTRY(cuGraphAddMemcpyNode, 10000, false, cuGraphAddMemcpyNode),
      ENTRY(cuGraphMemcpyNodeGetParams, 10000, false, cuGraphMemcpyNodeGetParams),
      ENTRY(cuGraphMemcpyNodeSetParams, 10000, false, cuGraphMemcpyNodeSetParams),
      ENTRY(cuGraphAddMemsetNode, 10000, false, cuGraphAddMemsetNode),
      ENTRY(cuGraphMemsetNodeGetParams, 10000, false, cuGraphMemsetNodeGetParams),
      ENTRY(cuGraphMemsetNodeSetParams, 10000, false, cuGraphMemsetNodeSetParams),
      ENTRY(cuGraphAddHostNode, 10000, false, cuGraphAddHostNode),
      ENTRY(cuGraphHostNodeGetParams, 10000, false, cuGraphHostNodeGetParams),
      ENTRY(cuGraphHostNodeSetParams, 10000, false, cuGraphHostNodeSetParams),
      ENTRY(cuGraphAddChildGraphNode, 10000, false, cuGraphAddChildGraphNode),
      ENTRY(cuGraphChildGraphNodeGetGraph, 10000, false, cuGraphChildGraphNodeGetGraph),
      ENTRY(cuGraphAddEmptyNode, 10000, false, cuGraphAddEmptyNode),
      ENTRY(cuGraphAddEventRecordNode, 11010, false, cuGraphAddEventRecordNode),
      ENTRY(cuGraphEventRecordNodeGetEvent, 11010, false, cuGraphEventRecordNodeGetEvent),
      ENTRY(cuGraphEventRecordNodeSetEvent, 11010, false, cuGraphEventRecordNodeSetEvent),
      ENTRY(cuGraphAddEventWaitNode, 11010, false, cuGraphAddEventWaitNode),
      ENTRY(cuGraphEventWaitNodeGetEvent, 11010, false, cuGraphEventWaitNodeGetEvent),
      ENTRY(cuGraphEventWaitNodeSetEvent, 11010, false, cuGraphEventWaitNodeSetEvent),
      ENTRY(cuGraphAddMemAllocNode, 11040, false, cuGraphAddMemAllocNode),
      ENTRY(cuGraphMemAllocNodeGetParams, 11040, false, cuGraphMemAllocNodeGetParams),
      ENTRY(cuGraphAddMemFreeNode, 11040, false, cuGraphAddMemFreeNode),
      ENTRY(cuGraphMemFreeNodeGetParams, 11040, false, cuGraphMemFreeNodeGetParams),
      ENTRY(cuGraphConditionalHandleCreate, 12030, false, cuGraphConditionalHandleCreate),
      ENTRY(cuGraphInstantiateWithFlags, 11040, false, cuGraphInstantiateWithFlags),
      // cuda.h's cuGraphInstantiate is cuGraphInstantiateWithFlags since 12.0:
      // what cudart asks for by the old name at its own version.
      ENTRY(cuGraphInstantiate, 12000, false, cuGraphInstantiateWithFlags),
      ENTRY(cuGraphInstantiateWithParams, 12000, false, cuGraphInstantiateWithParams),
      ENTRY(cuGraphInstantiateWithParams, 12000, true, cuGraphInstantiateWithParams_ptsz),
      ENTRY(cuGraphExecGetFlags, 12000, false, cuGraphExecGetFlags),
      ENTRY(cuGraphUpload, 11010, false, cuGraphUpload),
      ENTRY(cuGraphUpload, 11010, true, cuGraphUpload_ptsz),
      ENTRY(cuGraphLaunch, 10000, false, cuGraphLaunch),
      ENTRY(cuGraphLaunch, 10000, true, cuGraphLaunch_ptsz),
      ENTRY(cuGraphExecDestroy, 10000, false, cuGraphExecDestroy),
      ENTRY(cuGraphExecKernelNodeSetParams, 10010, false, cuGraphExecKernelNodeSetParams),
      ENTRY(cuGraphExecKernelNodeSetParams, 12000, false, cuGraphExecKernelNodeSetParams_v2),
      ENTRY(cuGraphExecMemcpyNodeSetParams, 10020, false, cuGraphExecMemcpyNodeSetParams),
      ENTRY(cuGraphExecMemsetNodeSetParams, 10020, false, cuGraphExecMemsetNodeSetParams),
      ENTRY(cuGraphExecHostNodeSetParams, 10020, false, cuGraphExecHostNodeSetParams),
      ENTRY(cuGraphExecChildGraphNodeSetParams, 11010, false, cuGraphExecChildGraphNodeSetParams),
      ENTRY(cuGraphExecEventRecordNodeSetEvent, 11010, false, cuGraphExecEventRecordNodeSetEvent),
      ENTRY(cuGraphExecEventWaitNodeSetEvent, 11010, false, cuGraphExecEventWaitNodeSetEvent),
      ENTRY(cuGraphNodeSetEnabled, 11060, false, cuGraphNodeSetEnabled),
      ENTRY(cuGraphNodeGetEnabled, 11060, false, cuGraphNodeGetEnabled),
      ENTRY(cuGraphExecUpdate, 10020, false, cuGraphExecUpdate),
      ENTRY(cuGraphExecUpdate, 12000, false, cuGraphExecUpdate_v2),
      ENTRY(cuEventCreate, 2000, false, cuEventCreate),
      ENTRY(cuEventDestroy, 4000, false, cuEventDestroy_v2),
      ENTRY(cuEventRecord, 2000, false, cuEventRecord),
      ENTRY(cuEventRecord, 7000, true, cuEventRecord_ptsz),
      ENTRY(cuStreamWaitEvent, 3020, false, cuStreamWaitEvent),
      ENTRY(cuStreamWaitEvent, 7000, true, cuStreamWaitEvent_ptsz),
      ENTRY(cuEventSynchronize, 2000, false, cuEventSynchronize),
      ENTRY(cuEventQuery, 2000, false, cuEventQuery),
      ENTRY(cuLaunchKernel, 4000, false, cuLaunchKernel),
      ENTRY(cuLaunchKernel, 7000, true, cuLaunchKernel_ptsz),
      ENTRY(cuLaunchKernelEx, 11060, false, cuLaunchKernelEx),
      ENTRY(cuLaunchKernelEx, 11060, true, cuLaunchKernelEx_ptsz),
      ENTRY(cuLaunchCooperativeKernel, 9000, false, cuLaunchCooperativeKernel),
      ENTRY(cuLaunchCooperativeKernel, 9000, true, cuLaunchCooperativeKernel_ptsz),
  };
#undef ENTRY
  count = std::size(table);
  return table;
}

// The function for (symbol, version, flags), or nullptr with the reason.
void* find(const char* symbol, int version, cuuint64_t flags, CUdriverProcAddressQueryResult& status) {
  std::size_t count = 0;
  const Entry* table = entries(count);
  bool known = false;
  bool hasPerThread = false;
  for (std::size_t i = 0; i < count; ++i) {
    if (table[i].api == symbol) {
      known = true;
      hasPerThread = hasPerThread || table[i].perThread;
    }
  }
  if (!known) {
    status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return nullptr;
  }
  const bool perThread = hasPerThread && (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
  const Entry* best = nullptr;
  for (std::size_t i = 0; i < count; ++i) {
    const Entry& e = table[i];
    if (e.api == symbol && e.perThread == perThread && e.version <= version &&
        (best == nullptr || e.version > best->version)) {
      best = &e;
    }
  }
  status = best != nullptr ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
  return best != nullptr ? best->function : nullptr;
}

}  // namespace

DOUBLE_API CUresult cuGetProcAddress_v2(const char* symbol, void** function, int version, cuuint64_t flags,
                                        CUdriverProcAddressQueryResult* status) {
  if (symbol == nullptr || function == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  CUdriverProcAddressQueryResult result{};
  *function = find(symbol, version, flags, result);
  if (status != nullptr) {
    *status = result;
  }
  return CUDA_SUCCESS;
}

DOUBLE_API CUresult cuGetProcAddress(const char* symbol, void** function, int version, cuuint64_t flags) {
  if (symbol == nullptr || function == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  CUdriverProcAddressQueryResult result{};
  void* found = find(symbol, version, flags, result);
  if (found == nullptr) {
    return CUDA_ERROR_NOT_FOUND;
  }
  *function = found;
  return CUDA_SUCCESS;
}
