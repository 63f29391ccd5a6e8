// Device memory on the host: allocations, copies and memsets, each checked
// against the allocation table so that a test's out-of-bounds copy fails
// like it would on a GPU instead of corrupting the heap.
#include "driver_exports.h"
#include "graph.h"
#include "state.h"

#include <cuda.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <mutex>
#include <string_view>
#include <vector>

namespace kcap_double {

std::atomic<bool> g_deferredCopies{false};

namespace {

struct DeferredCopy {
  void* destination;
  const void* source;
  std::size_t bytes;
};

std::mutex g_deferredMutex;
std::vector<DeferredCopy> g_deferred;

}  // namespace

bool deferCopies() {
  static const bool defer = [] {
    const char* value = std::getenv("KCAP_DOUBLE_DEFER_COPIES");
    return value != nullptr && std::string_view(value) == "1";
  }();
  return defer;
}

void runDeferredCopies() {
  std::vector<DeferredCopy> pending;
  {
    std::lock_guard<std::mutex> lock(g_deferredMutex);
    pending.swap(g_deferred);
    g_deferredCopies.store(false, std::memory_order_release);
  }
  for (const DeferredCopy& c : pending) {
    std::memmove(c.destination, c.source, c.bytes);
  }
}

namespace {

CUresult copy(void* destination, const void* source, std::size_t bytes, CUdeviceptr deviceA, CUdeviceptr deviceB,
              CUstream stream) {
  if (const CUresult r = needContext(); r != CUDA_SUCCESS) {
    return r;
  }
  {
    State& s = state();
    Lock lock(s.mutex);
    if (!validStream(s, stream)) {
      return CUDA_ERROR_INVALID_HANDLE;
    }
    if (const CUresult r = legacyStreamMayRun(s, stream); r != CUDA_SUCCESS) {
      return r;
    }
    if (!streamOfCurrentContext(s, stream)) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    const auto valid = [&](CUdeviceptr device) {
      return device == 0 || s.contains(device, bytes) || capturedReservation(s, stream, device, bytes);
    };
    if (!valid(deviceA) || !valid(deviceB)) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    // Captured: a 1D memcpy node, each side's type by where it lies.
    CUDA_MEMCPY3D linear{};
    const auto isDevice = [&](CUdeviceptr address) {
      CUdeviceptr base = 0;
      std::size_t size = 0;
      return s.rangeOf(address, base, size) || capturedReservation(s, stream, address, 1);
    };
    const auto dst = reinterpret_cast<CUdeviceptr>(destination);
    const auto src = reinterpret_cast<CUdeviceptr>(source);
    linear.dstMemoryType = isDevice(dst) ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
    linear.dstDevice = linear.dstMemoryType == CU_MEMORYTYPE_DEVICE ? dst : 0;
    linear.dstHost = linear.dstMemoryType == CU_MEMORYTYPE_HOST ? destination : nullptr;
    linear.srcMemoryType = isDevice(src) ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
    linear.srcDevice = linear.srcMemoryType == CU_MEMORYTYPE_DEVICE ? src : 0;
    linear.srcHost = linear.srcMemoryType == CU_MEMORYTYPE_HOST ? source : nullptr;
    linear.WidthInBytes = bytes;
    linear.Height = 1;
    linear.Depth = 1;
    if (captureCopy(s, stream, linear)) {
      return CUDA_SUCCESS;
    }
  }
  std::memmove(destination, source, bytes);
  return CUDA_SUCCESS;
}

CUresult copyHtod(CUdeviceptr dst, const void* src, std::size_t bytes, CUstream stream) {
  if (deferCopies()) {
    if (const CUresult r = needContext(); r != CUDA_SUCCESS) {
      return r;
    }
    bool created = false;
    {
      State& s = state();
      Lock lock(s.mutex);
      const Stream* found = findStream(s, stream);
      created = found != nullptr && found->capture == Stream::Capture::kNone;  // a capture takes it as a node
      if (created && !s.contains(dst, bytes)) {
        return CUDA_ERROR_INVALID_VALUE;
      }
    }
    if (!created) {
      return copy(reinterpret_cast<void*>(dst), src, bytes, dst, 0, stream);  // a default stream: as it was
    }
    std::lock_guard<std::mutex> lock(g_deferredMutex);
    g_deferred.push_back({reinterpret_cast<void*>(dst), src, bytes});
    g_deferredCopies.store(true, std::memory_order_release);
    return CUDA_SUCCESS;
  }
  return copy(reinterpret_cast<void*>(dst), src, bytes, dst, 0, stream);
}

CUresult copyDtoh(void* dst, CUdeviceptr src, std::size_t bytes, CUstream stream) {
  return copy(dst, reinterpret_cast<const void*>(src), bytes, src, 0, stream);
}

CUresult copyDtod(CUdeviceptr dst, CUdeviceptr src, std::size_t bytes, CUstream stream) {
  return copy(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), bytes, dst, src, stream);
}

template <class T>
CUresult fill(CUdeviceptr dst, T value, std::size_t count, CUstream stream) {
  if (const CUresult r = needContext(); r != CUDA_SUCCESS) {
    return r;
  }
  {
    State& s = state();
    Lock lock(s.mutex);
    if (!validStream(s, stream)) {
      return CUDA_ERROR_INVALID_HANDLE;
    }
    if (const CUresult r = legacyStreamMayRun(s, stream); r != CUDA_SUCCESS) {
      return r;
    }
    if (!s.contains(dst, count * sizeof(T)) && !capturedReservation(s, stream, dst, count * sizeof(T))) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    if (captureMemset(s, stream, {dst, 0, static_cast<unsigned>(value), static_cast<unsigned>(sizeof(T)), count, 1})) {
      return CUDA_SUCCESS;
    }
  }
  auto* out = reinterpret_cast<T*>(dst);
  for (std::size_t i = 0; i < count; ++i) {
    out[i] = value;
  }
  return CUDA_SUCCESS;
}

// cuMemcpy: unified addressing; each side is device memory if it lies in an
// allocation, host memory otherwise.
CUresult copyUnified(CUdeviceptr dst, CUdeviceptr src, std::size_t bytes, CUstream stream) {
  CUdeviceptr deviceDst = 0;
  CUdeviceptr deviceSrc = 0;
  {
    State& s = state();
    Lock lock(s.mutex);
    CUdeviceptr base = 0;
    std::size_t size = 0;
    deviceDst = s.rangeOf(dst, base, size) ? dst : 0;
    deviceSrc = s.rangeOf(src, base, size) ? src : 0;
  }
  return copy(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), bytes, deviceDst, deviceSrc, stream);
}

CUresult allocateHost(void** pointer, std::size_t bytes) {
  if (const CUresult r = needContext(); r != CUDA_SUCCESS) {
    return r;
  }
  if (pointer == nullptr || bytes == 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  void* memory = std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
  if (memory == nullptr) {
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  State& s = state();
  Lock lock(s.mutex);
  s.hostAllocations[reinterpret_cast<std::uintptr_t>(memory)] = bytes;
  *pointer = memory;
  return CUDA_SUCCESS;
}

CUresult allocateAsync(CUdeviceptr* address, std::size_t bytes, CUstream stream) {
  if (const CUresult r = needContext(); r != CUDA_SUCCESS) {
    return r;
  }
  if (address == nullptr || bytes == 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  State& s = state();
  Lock lock(s.mutex);
  if (!validStream(s, stream)) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  if (CUresult captured = CUDA_SUCCESS; captureAllocation(s, stream, bytes, *address, captured)) {
    return captured;  // an allocation node: the memory exists when the graph runs
  }
  *address = s.allocateFromPool(bytes);
  return *address != 0 ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult freeAsync(CUdeviceptr address, CUstream stream) {
  if (const CUresult r = needContext(); r != CUDA_SUCCESS) {
    return r;
  }
  State& s = state();
  Lock lock(s.mutex);
  if (!validStream(s, stream)) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  if (CUresult captured = CUDA_SUCCESS; captureFree(s, stream, address, captured)) {
    return captured;
  }
  return s.releaseToPool(address) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

}  // namespace

}  // namespace kcap_double

using namespace kcap_double;

// ---- page-locked host memory, pointer queries, stream-ordered allocation ------------

DOUBLE_API CUresult cuMemAllocHost_v2(void** pointer, std::size_t bytes) { return allocateHost(pointer, bytes); }

DOUBLE_API CUresult cuMemHostAlloc(void** pointer, std::size_t bytes, unsigned) { return allocateHost(pointer, bytes); }

DOUBLE_API CUresult cuMemFreeHost(void* pointer) {
  if (const CUresult r = needInit(); r != CUDA_SUCCESS) {
    return r;
  }
  State& s = state();
  Lock lock(s.mutex);
  if (s.hostAllocations.erase(reinterpret_cast<std::uintptr_t>(pointer)) == 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  std::free(pointer);
  return CUDA_SUCCESS;
}

// Page-locking plain host memory: remembered, nothing else (the double's
// copies reach any host memory). KCAP_DOUBLE_HOST_REGISTER=refuse makes
// it fail, as the real driver does where page-locked memory is limited.
DOUBLE_API CUresult cuMemHostRegister_v2(void* pointer, std::size_t bytes, unsigned) {
  if (const CUresult r = needContext(); r != CUDA_SUCCESS) {
    return r;
  }
  if (pointer == nullptr || bytes == 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (const char* refuse = std::getenv("KCAP_DOUBLE_HOST_REGISTER");
      refuse != nullptr && std::strcmp(refuse, "refuse") == 0) {
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  State& s = state();
  Lock lock(s.mutex);
  if (!s.hostRegistrations.emplace(reinterpret_cast<std::uintptr_t>(pointer), bytes).second) {
    return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
  }
  return CUDA_SUCCESS;
}

DOUBLE_API CUresult cuMemHostUnregister(void* pointer) {
  if (const CUresult r = needInit(); r != CUDA_SUCCESS) {
    return r;
  }
  State& s = state();
  Lock lock(s.mutex);
  if (s.hostRegistrations.erase(reinterpret_cast<std::uintptr_t>(pointer)) == 0) {
    return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
  }
  return CUDA_SUCCESS;
}

DOUBLE_API CUresult cuPointerGetAttribute(void* data, CUpointer_attribute attribute, CUdeviceptr pointer) {
  if (const CUresult r = needContext(); r != CUDA_SUCCESS) {
    return r;
  }
  if (data == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (attribute != CU_POINTER_ATTRIBUTE_MEMORY_TYPE) {
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  State& s = state();
  Lock lock(s.mutex);
  CUdeviceptr base = 0;
  std::size_t size = 0;
  unsigned type = 0;
  if (s.rangeOf(pointer, base, size)) {
    type = CU_MEMORYTYPE_DEVICE;
  } else {
    auto it = s.hostAllocations.upper_bound(pointer);
    if (it == s.hostAllocations.begin() || pointer >= std::prev(it)->first + std::prev(it)->second) {
      return CUDA_ERROR_INVALID_VALUE;  // not memory the driver knows
    }
    type = CU_MEMORYTYPE_HOST;
  }
  std::memcpy(data, &type, sizeof type);
  return CUDA_SUCCESS;
}

DOUBLE_API CUresult cuMemAllocAsync(CUdeviceptr* address, std::size_t bytes, CUstream stream) {
  return allocateAsync(address, bytes, stream);
}
DOUBLE_API CUresult cuMemAllocAsync_ptsz(CUdeviceptr* address, std::size_t bytes, CUstream stream) {
  return allocateAsync(address, bytes, stream);
}
DOUBLE_API CUresult cuMemFreeAsync(CUdeviceptr address, CUstream stream) { return freeAsync(address, stream); }
DOUBLE_API CUresult cuMemFreeAsync_ptsz(CUdeviceptr address, CUstream stream) { return freeAsync(address, stream); }

// ---- unified copies, 16-bit memsets -----------------------------------------------------

DOUBLE_API CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, std::size_t bytes) {
  return copyUnified(dst, src, bytes, nullptr);
}
DOUBLE_API CUresult cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, std::size_t bytes) {
  return copyUnified(dst, src, bytes, CU_STREAM_PER_THREAD);
}
DOUBLE_API CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, std::size_t bytes, CUstream stream) {
  return copyUnified(dst, src, bytes, stream);
}
DOUBLE_API CUresult cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, std::size_t bytes, CUstream stream) {
  return copyUnified(dst, src, bytes, stream);
}
// Peer copies: the double's devices share one host memory, so a copy
// between two contexts is a plain copy.
DOUBLE_API CUresult cuMemcpyPeer(CUdeviceptr dst, CUcontext, CUdeviceptr src, CUcontext, std::size_t bytes) {
  return copyDtod(dst, src, bytes, nullptr);
}
DOUBLE_API CUresult cuMemcpyPeer_ptds(CUdeviceptr dst, CUcontext, CUdeviceptr src, CUcontext, std::size_t bytes) {
  return copyDtod(dst, src, bytes, nullptr);
}
DOUBLE_API CUresult cuMemcpyPeerAsync(CUdeviceptr dst, CUcontext, CUdeviceptr src, CUcontext, std::size_t bytes,
                                      CUstream stream) {
  return copyDtod(dst, src, bytes, stream);
}
DOUBLE_API CUresult cuMemcpyPeerAsync_ptsz(CUdeviceptr dst, CUcontext, CUdeviceptr src, CUcontext, std::size_t bytes,
                                           CUstream stream) {
  return copyDtod(dst, src, bytes, stream);
}

DOUBLE_API CUresult cuMemsetD16_v2(CUdeviceptr dst, unsigned short value, std::size_t count) {
  return fill(dst, value, count, nullptr);
}
DOUBLE_API CUresult cuMemsetD16_v2_ptds(CUdeviceptr dst, unsigned short value, std::size_t count) {
  return fill(dst, value, count, CU_STREAM_PER_THREAD);
}
DOUBLE_API CUresult cuMemsetD16Async(CUdeviceptr dst, unsigned short value, std::size_t count, CUstream stream) {
  return fill(dst, value, count, stream);
}
DOUBLE_API CUresult cuMemsetD16Async_ptsz(CUdeviceptr dst, unsigned short value, std::size_t count, CUstream stream) {
  return fill(dst, value, count, stream);
}

// ---- memory -----------------------------------------------------------------------

DOUBLE_API CUresult cuMemAlloc_v2(CUdeviceptr* address, std::size_t bytes) {
  if (const CUresult r = needContext(); r != CUDA_SUCCESS) {
    return r;
  }
  if (address == nullptr || bytes == 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  State& s = state();
  Lock lock(s.mutex);
  *address = s.allocate(bytes);
  return *address != 0 ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

// Managed memory: the double's device memory is host memory already, which
// the host reads and writes directly, as it does managed memory.
DOUBLE_API CUresult cuMemAllocManaged(CUdeviceptr* address, std::size_t bytes, unsigned flags) {
  if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  return cuMemAlloc_v2(address, bytes);
}

DOUBLE_API CUresult cuMemFree_v2(CUdeviceptr address) {
  if (const CUresult r = needContext(); r != CUDA_SUCCESS) {
    return r;
  }
  State& s = state();
  Lock lock(s.mutex);
  return s.release(address) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

DOUBLE_API CUresult cuMemGetAddressRange_v2(CUdeviceptr* base, std::size_t* size, CUdeviceptr address) {
  if (const CUresult r = needContext(); r != CUDA_SUCCESS) {
    return r;
  }
  State& s = state();
  Lock lock(s.mutex);
  CUdeviceptr foundBase = 0;
  std::size_t foundSize = 0;
  if (!s.rangeOf(address, foundBase, foundSize)) {
    return CUDA_ERROR_NOT_FOUND;
  }
  if (base != nullptr) {
    *base = foundBase;
  }
  if (size != nullptr) {
    *size = foundSize;
  }
  return CUDA_SUCCESS;
}

DOUBLE_API CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void* src, std::size_t bytes) {
  return copyHtod(dst, src, bytes, nullptr);
}
DOUBLE_API CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dst, const void* src, std::size_t bytes) {
  return copyHtod(dst, src, bytes, CU_STREAM_PER_THREAD);
}
DOUBLE_API CUresult cuMemcpyDtoH_v2(void* dst, CUdeviceptr src, std::size_t bytes) {
  return copyDtoh(dst, src, bytes, nullptr);
}
DOUBLE_API CUresult cuMemcpyDtoH_v2_ptds(void* dst, CUdeviceptr src, std::size_t bytes) {
  return copyDtoh(dst, src, bytes, CU_STREAM_PER_THREAD);
}
DOUBLE_API CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, std::size_t bytes) {
  return copyDtod(dst, src, bytes, nullptr);
}
DOUBLE_API CUresult cuMemcpyDtoD_v2_ptds(CUdeviceptr dst, CUdeviceptr src, std::size_t bytes) {
  return copyDtod(dst, src, bytes, CU_STREAM_PER_THREAD);
}
DOUBLE_API CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void* src, std::size_t bytes, CUstream stream) {
  return copyHtod(dst, src, bytes, stream);
}
DOUBLE_API CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dst, const void* src, std::size_t bytes, CUstream stream) {
  return copyHtod(dst, src, bytes, stream);
}
DOUBLE_API CUresult cuMemcpyDtoHAsync_v2(void* dst, CUdeviceptr src, std::size_t bytes, CUstream stream) {
  return copyDtoh(dst, src, bytes, stream);
}
DOUBLE_API CUresult cuMemcpyDtoHAsync_v2_ptsz(void* dst, CUdeviceptr src, std::size_t bytes, CUstream stream) {
  return copyDtoh(dst, src, bytes, stream);
}
DOUBLE_API CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, std::size_t bytes, CUstream stream) {
  return copyDtod(dst, src, bytes, stream);
}
DOUBLE_API CUresult cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr dst, CUdeviceptr src, std::size_t bytes, CUstream stream) {
  return copyDtod(dst, src, bytes, stream);
}
DOUBLE_API CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char value, std::size_t count) {
  return fill(dst, value, count, nullptr);
}
DOUBLE_API CUresult cuMemsetD8_v2_ptds(CUdeviceptr dst, unsigned char value, std::size_t count) {
  return fill(dst, value, count, CU_STREAM_PER_THREAD);
}
DOUBLE_API CUresult cuMemsetD32_v2(CUdeviceptr dst, unsigned value, std::size_t count) {
  return fill(dst, value, count, nullptr);
}
DOUBLE_API CUresult cuMemsetD32_v2_ptds(CUdeviceptr dst, unsigned value, std::size_t count) {
  return fill(dst, value, count, CU_STREAM_PER_THREAD);
}
DOUBLE_API CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char value, std::size_t count, CUstream stream) {
  return fill(dst, value, count, stream);
}
DOUBLE_API CUresult cuMemsetD8Async_ptsz(CUdeviceptr dst, unsigned char value, std::size_t count, CUstream stream) {
  return fill(dst, value, count, stream);
}
DOUBLE_API CUresult cuMemsetD32Async(CUdeviceptr dst, unsigned value, std::size_t count, CUstream stream) {
  return fill(dst, value, count, stream);
}
DOUBLE_API CUresult cuMemsetD32Async_ptsz(CUdeviceptr dst, unsigned value, std::size_t count, CUstream stream) {
  return fill(dst, value, count, stream);
}
