// Initialization, devices, contexts and error strings: one device, an
// H200's answers where a test may ask.
#include "driver_exports.h"
#include "state.h"

#include <cuda.h>

#include <cstdio>

namespace kcap_double {
namespace {

constexpr int kDriverVersion = 13000;

const char* errorName(CUresult error) {
  switch (error) {
#define KCAP_DOUBLE_ERROR(code) \
  case code:                    \
    return #code;
    KCAP_DOUBLE_ERROR(CUDA_SUCCESS)
    KCAP_DOUBLE_ERROR(CUDA_ERROR_INVALID_VALUE)
    KCAP_DOUBLE_ERROR(CUDA_ERROR_OUT_OF_MEMORY)
    KCAP_DOUBLE_ERROR(CUDA_ERROR_NOT_INITIALIZED)
    KCAP_DOUBLE_ERROR(CUDA_ERROR_INVALID_DEVICE)
    KCAP_DOUBLE_ERROR(CUDA_ERROR_INVALID_IMAGE)
    KCAP_DOUBLE_ERROR(CUDA_ERROR_INVALID_CONTEXT)
    KCAP_DOUBLE_ERROR(CUDA_ERROR_FILE_NOT_FOUND)
    KCAP_DOUBLE_ERROR(CUDA_ERROR_INVALID_HANDLE)
    KCAP_DOUBLE_ERROR(CUDA_ERROR_NOT_FOUND)
    KCAP_DOUBLE_ERROR(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES)
    KCAP_DOUBLE_ERROR(CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE)
    KCAP_DOUBLE_ERROR(CUDA_ERROR_NOT_SUPPORTED)
    KCAP_DOUBLE_ERROR(CUDA_ERROR_ILLEGAL_ADDRESS)
    KCAP_DOUBLE_ERROR(CUDA_ERROR_ILLEGAL_STATE)
    KCAP_DOUBLE_ERROR(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED)
    KCAP_DOUBLE_ERROR(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED)
#undef KCAP_DOUBLE_ERROR
    default:
      return nullptr;
  }
}

CUresult deviceUuid(CUuuid* uuid, CUdevice device) {
  if (const CUresult r = needInit(); r != CUDA_SUCCESS) {
    return r;
  }
  if (!knownDevice(device)) {
    return CUDA_ERROR_INVALID_DEVICE;
  }
  if (uuid == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  for (int i = 0; i < 16; ++i) {
    uuid->bytes[i] = static_cast<char>(0xD0 + i);
  }
  return CUDA_SUCCESS;
}

CUresult describeError(CUresult error, const char** text) {
  if (text == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  *text = errorName(error);
  return *text != nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

}  // namespace
}  // namespace kcap_double

using namespace kcap_double;

// ---- initialization and device -------------------------------------------------------

DOUBLE_API CUresult cuInit(unsigned flags) {
  if (flags != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  state().initialized.store(true);
  return CUDA_SUCCESS;
}

DOUBLE_API CUresult cuDriverGetVersion(int* version) {
  if (version == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  *version = kDriverVersion;
  return CUDA_SUCCESS;
}

DOUBLE_API CUresult cuGetErrorName(CUresult error, const char** name) { return describeError(error, name); }

DOUBLE_API CUresult cuGetErrorString(CUresult error, const char** text) {
  return describeError(error, text);  // the double's descriptions are its names
}

DOUBLE_API CUresult cuDeviceGetCount(int* count) {
  if (const CUresult r = needInit(); r != CUDA_SUCCESS) {
    return r;
  }
  if (count == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  *count = deviceCount();
  return CUDA_SUCCESS;
}

DOUBLE_API CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  if (const CUresult r = needInit(); r != CUDA_SUCCESS) {
    return r;
  }
  if (device == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (!knownDevice(ordinal)) {
    return CUDA_ERROR_INVALID_DEVICE;
  }
  *device = ordinal;
  return CUDA_SUCCESS;
}

DOUBLE_API CUresult cuDeviceGetName(char* name, int length, CUdevice device) {
  if (const CUresult r = needInit(); r != CUDA_SUCCESS) {
    return r;
  }
  if (!knownDevice(device)) {
    return CUDA_ERROR_INVALID_DEVICE;
  }
  if (name == nullptr || length <= 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  std::snprintf(name, static_cast<std::size_t>(length), "kcap driver double");
  return CUDA_SUCCESS;
}

DOUBLE_API CUresult cuDeviceGetAttribute(int* value, CUdevice_attribute attribute, CUdevice device) {
  if (const CUresult r = needInit(); r != CUDA_SUCCESS) {
    return r;
  }
  if (!knownDevice(device)) {
    return CUDA_ERROR_INVALID_DEVICE;
  }
  if (value == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  switch (attribute) {  // an H200's answers, where a test may ask
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
      *value = 9;
      break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
      *value = 0;
      break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
      *value = kMultiprocessors;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
      *value = 1024;
      break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE:
      *value = 32;
      break;
    case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH:
      *value = 1;
      break;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:
      *value = 1;
      break;
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
      *value = 1;
      break;
    default:
      *value = 0;
      break;
  }
  return CUDA_SUCCESS;
}

DOUBLE_API CUresult cuDeviceTotalMem_v2(std::size_t* bytes, CUdevice device) {
  if (const CUresult r = needInit(); r != CUDA_SUCCESS) {
    return r;
  }
  if (!knownDevice(device)) {
    return CUDA_ERROR_INVALID_DEVICE;
  }
  if (bytes == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  *bytes = std::size_t{16} << 30;
  return CUDA_SUCCESS;
}

DOUBLE_API CUresult cuDeviceGetPCIBusId(char* bus, int length, CUdevice device) {
  if (const CUresult r = needInit(); r != CUDA_SUCCESS) {
    return r;
  }
  if (!knownDevice(device)) {
    return CUDA_ERROR_INVALID_DEVICE;
  }
  if (bus == nullptr || length <= 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  std::snprintf(bus, static_cast<std::size_t>(length), "0000:%02x:00.0", 0x3b + device);
  return CUDA_SUCCESS;
}

DOUBLE_API CUresult cuDeviceGetUuid(CUuuid* uuid, CUdevice device) { return deviceUuid(uuid, device); }
DOUBLE_API CUresult cuDeviceGetUuid_v2(CUuuid* uuid, CUdevice device) { return deviceUuid(uuid, device); }

// ---- contexts -----------------------------------------------------------------------

DOUBLE_API CUresult cuDevicePrimaryCtxRetain(CUcontext* context, CUdevice device) {
  if (const CUresult r = needInit(); r != CUDA_SUCCESS) {
    return r;
  }
  if (!knownDevice(device)) {
    return CUDA_ERROR_INVALID_DEVICE;
  }
  if (context == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  State& s = state();
  Lock lock(s.mutex);
  ++s.primaryRetains;
  s.primaryContext.device = device;  // (one primary context: a process here uses one device)
  *context = reinterpret_cast<CUcontext>(&s.primaryContext);
  return CUDA_SUCCESS;
}

DOUBLE_API CUresult cuDevicePrimaryCtxRelease_v2(CUdevice device) {
  if (const CUresult r = needInit(); r != CUDA_SUCCESS) {
    return r;
  }
  if (!knownDevice(device)) {
    return CUDA_ERROR_INVALID_DEVICE;
  }
  State& s = state();
  Lock lock(s.mutex);
  if (s.primaryRetains == 0) {
    return CUDA_ERROR_INVALID_CONTEXT;
  }
  --s.primaryRetains;
  return CUDA_SUCCESS;
}

DOUBLE_API CUresult cuCtxCreate_v4(CUcontext* context, CUctxCreateParams*, unsigned, CUdevice device) {
  if (const CUresult r = needInit(); r != CUDA_SUCCESS) {
    return r;
  }
  if (!knownDevice(device)) {
    return CUDA_ERROR_INVALID_DEVICE;
  }
  if (context == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  State& s = state();
  Lock lock(s.mutex);
  auto* created = new Context{device};
  s.contexts.insert(created);
  currentContext() = created;
  *context = reinterpret_cast<CUcontext>(created);
  return CUDA_SUCCESS;
}

DOUBLE_API CUresult cuCtxDestroy_v2(CUcontext context) {
  if (const CUresult r = needInit(); r != CUDA_SUCCESS) {
    return r;
  }
  State& s = state();
  Lock lock(s.mutex);
  auto* found = reinterpret_cast<Context*>(context);
  if (found == &s.primaryContext || s.contexts.erase(found) == 0) {
    return CUDA_ERROR_INVALID_CONTEXT;
  }
  if (currentContext() == found) {
    currentContext() = nullptr;
  }
  delete found;
  return CUDA_SUCCESS;
}

DOUBLE_API CUresult cuCtxGetCurrent(CUcontext* context) {
  if (const CUresult r = needInit(); r != CUDA_SUCCESS) {
    return r;
  }
  if (context == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  *context = reinterpret_cast<CUcontext>(currentContext());
  return CUDA_SUCCESS;
}

DOUBLE_API CUresult cuCtxSetCurrent(CUcontext context) {
  if (const CUresult r = needInit(); r != CUDA_SUCCESS) {
    return r;
  }
  State& s = state();
  Lock lock(s.mutex);
  auto* found = reinterpret_cast<Context*>(context);
  if (found != nullptr && s.contexts.count(found) == 0) {
    return CUDA_ERROR_INVALID_CONTEXT;
  }
  currentContext() = found;
  return CUDA_SUCCESS;
}

DOUBLE_API CUresult cuCtxSynchronize() { return synchronizeContext(); }

DOUBLE_API CUresult cuCtxSynchronize_v2(CUcontext context) {
  if (context != nullptr && reinterpret_cast<Context*>(context) != currentContext()) {
    return CUDA_ERROR_NOT_SUPPORTED;  // the double only synchronizes the current context
  }
  return synchronizeContext();
}

DOUBLE_API CUresult cuCtxGetDevice(CUdevice* device) {
  if (const CUresult r = needContext(); r != CUDA_SUCCESS) {
    return r;
  }
  if (device == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  *device = currentContext()->device;
  return CUDA_SUCCESS;
}
