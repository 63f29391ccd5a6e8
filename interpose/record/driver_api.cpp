#include "record/driver_api.h"

#include "core/cuda_result_names.h"
#include "hooks/real_driver.h"

#include <cstdio>

namespace kcap {
namespace {

template <class Pfn>
void resolve(Pfn& slot, const char* symbol) noexcept {
  slot = reinterpret_cast<Pfn>(real::driverSymbol(symbol));
}

DriverApi load() noexcept {
  DriverApi api;
  resolve(api.driverGetVersion, "cuDriverGetVersion");
  resolve(api.getErrorName, "cuGetErrorName");
  resolve(api.deviceGetCount, "cuDeviceGetCount");
  resolve(api.deviceGet, "cuDeviceGet");
  resolve(api.deviceGetName, "cuDeviceGetName");
  resolve(api.deviceGetUuid, "cuDeviceGetUuid_v2");
  if (api.deviceGetUuid == nullptr) {
    resolve(api.deviceGetUuid, "cuDeviceGetUuid");  // same signature, older ABI
  }
  resolve(api.deviceGetAttribute, "cuDeviceGetAttribute");
  resolve(api.deviceTotalMem, "cuDeviceTotalMem_v2");
  resolve(api.deviceGetPCIBusId, "cuDeviceGetPCIBusId");
  resolve(api.ctxGetCurrent, "cuCtxGetCurrent");
  resolve(api.ctxSetCurrent, "cuCtxSetCurrent");
  resolve(api.ctxGetDevice, "cuCtxGetDevice");
  resolve(api.ctxSynchronize, "cuCtxSynchronize");
  resolve(api.streamSynchronize, "cuStreamSynchronize");
  resolve(api.streamIsCapturing, "cuStreamIsCapturing");
  resolve(api.threadExchangeStreamCaptureMode, "cuThreadExchangeStreamCaptureMode");
  resolve(api.streamGetCaptureInfo, "cuStreamGetCaptureInfo_v3");
  resolve(api.streamWaitEvent, "cuStreamWaitEvent");
  resolve(api.memcpyDtoH, "cuMemcpyDtoH_v2");
  resolve(api.memcpyDtoHAsync, "cuMemcpyDtoHAsync_v2");
  resolve(api.memcpy3D, "cuMemcpy3D_v2");
  resolve(api.memcpy3DAsync, "cuMemcpy3DAsync_v2");
  resolve(api.streamGetCtx, "cuStreamGetCtx");
  resolve(api.streamCreate, "cuStreamCreate");
  resolve(api.eventCreate, "cuEventCreate");
  resolve(api.eventRecord, "cuEventRecord");
  resolve(api.eventQuery, "cuEventQuery");
  resolve(api.eventDestroy, "cuEventDestroy_v2");
  resolve(api.memHostAlloc, "cuMemHostAlloc");
  resolve(api.memFreeHost, "cuMemFreeHost");
  resolve(api.memHostRegister, "cuMemHostRegister_v2");
  resolve(api.memHostUnregister, "cuMemHostUnregister");
  resolve(api.pointerGetAttribute, "cuPointerGetAttribute");
  resolve(api.memGetAddressRange, "cuMemGetAddressRange_v2");
  resolve(api.memAlloc, "cuMemAlloc_v2");
  resolve(api.memFree, "cuMemFree_v2");
  resolve(api.memGetInfo, "cuMemGetInfo_v2");
  resolve(api.memcpyDtoDAsync, "cuMemcpyDtoDAsync_v2");
  resolve(api.libraryLoadData, "cuLibraryLoadData");
  resolve(api.libraryGetKernel, "cuLibraryGetKernel");
  resolve(api.launchKernel, "cuLaunchKernel");
  resolve(api.graphGetNodes, "cuGraphGetNodes");
  resolve(api.graphGetEdges, "cuGraphGetEdges_v2");
  resolve(api.graphGetEdgesV1, "cuGraphGetEdges");
  resolve(api.graphNodeGetType, "cuGraphNodeGetType");
  resolve(api.graphKernelNodeGetParams, "cuGraphKernelNodeGetParams_v2");
  resolve(api.graphKernelNodeGetAttribute, "cuGraphKernelNodeGetAttribute");
  resolve(api.graphMemcpyNodeGetParams, "cuGraphMemcpyNodeGetParams");
  resolve(api.graphMemsetNodeGetParams, "cuGraphMemsetNodeGetParams");
  resolve(api.graphHostNodeGetParams, "cuGraphHostNodeGetParams");
  resolve(api.graphChildGraphNodeGetGraph, "cuGraphChildGraphNodeGetGraph");
  resolve(api.graphEventRecordNodeGetEvent, "cuGraphEventRecordNodeGetEvent");
  resolve(api.graphEventWaitNodeGetEvent, "cuGraphEventWaitNodeGetEvent");
  resolve(api.graphMemAllocNodeGetParams, "cuGraphMemAllocNodeGetParams");
  resolve(api.graphMemFreeNodeGetParams, "cuGraphMemFreeNodeGetParams");
  resolve(api.funcGetParamInfo, "cuFuncGetParamInfo");
  resolve(api.kernelGetParamInfo, "cuKernelGetParamInfo");
  resolve(api.funcIsLoaded, "cuFuncIsLoaded");
  resolve(api.funcLoad, "cuFuncLoad");
  resolve(api.kernelGetFunction, "cuKernelGetFunction");
  resolve(api.moduleGetGlobal, "cuModuleGetGlobal_v2");
  resolve(api.libraryGetGlobal, "cuLibraryGetGlobal");
  return api;
}

}  // namespace

const DriverApi& driverApi() noexcept {
  static const DriverApi api = load();
  return api;
}

bool isCapturing(CUstream stream) noexcept {
  const auto query = driverApi().streamIsCapturing;
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  if (query == nullptr || query(stream, &status) != CUDA_SUCCESS) {
    return false;
  }
  return status != CU_STREAM_CAPTURE_STATUS_NONE;
}

uint64_t currentContext() noexcept {
  CUcontext context = nullptr;
  const auto get = driverApi().ctxGetCurrent;
  return get != nullptr && get(&context) == CUDA_SUCCESS ? reinterpret_cast<uint64_t>(context) : 0;
}

int deviceOf(uint64_t context) noexcept {
  // A context's device never changes: one driver call per context a thread
  // switches to (this is on every recorded launch's path). A context
  // destroyed and another made at the same address on another device, on
  // the same thread, would be misnamed; the driver does not reuse handles
  // that quickly in practice.
  thread_local uint64_t t_context = 0;
  thread_local int t_device = -1;
  if (context != 0 && context == t_context) {
    return t_device;
  }
  CUdevice device = 0;
  const auto get = driverApi().ctxGetDevice;
  const int found = get != nullptr && get(&device) == CUDA_SUCCESS ? static_cast<int>(device) : -1;
  t_context = found >= 0 ? context : 0;
  t_device = found;
  return found;
}

int currentDevice() noexcept { return deviceOf(currentContext()); }

ContextSwitch::ContextSwitch(CUcontext wanted, CUcontext current) noexcept : previous_(current) {
  if (wanted == current || wanted == nullptr) return;
  const auto set = driverApi().ctxSetCurrent;
  result_ = set != nullptr ? set(wanted) : CUDA_ERROR_NOT_SUPPORTED;
  switched_ = result_ == CUDA_SUCCESS;
}

ContextSwitch::~ContextSwitch() {
  if (switched_) driverApi().ctxSetCurrent(previous_);
}

const char* resultName(CUresult result, char (&buffer)[32]) noexcept {
  // The table first: at exit the driver is gone and cannot name anything,
  // and where it can, its names are the same enumerators. The driver then
  // names the codes of drivers newer than the table.
  if (const char* known = cudaResultName(result)) {
    return known;
  }
  const char* name = nullptr;
  const auto get = driverApi().getErrorName;
  if (get != nullptr && get(result, &name) == CUDA_SUCCESS && name != nullptr) {
    return name;
  }
  std::snprintf(buffer, sizeof buffer, "CUresult %d", static_cast<int>(result));
  return buffer;
}

RelaxedCaptureMode::RelaxedCaptureMode() noexcept {
  const auto exchange = driverApi().threadExchangeStreamCaptureMode;
  previous_ = CU_STREAM_CAPTURE_MODE_RELAXED;
  exchanged_ = exchange != nullptr && exchange(&previous_) == CUDA_SUCCESS;
}

RelaxedCaptureMode::~RelaxedCaptureMode() {
  if (exchanged_) {
    driverApi().threadExchangeStreamCaptureMode(&previous_);
  }
}

}  // namespace kcap
