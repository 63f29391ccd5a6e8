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

// 2D and 3D forms, row by row. A side is host or device memory by its
// type, or, unified, by whether it lies in an allocation. The double keeps
// no CUDA arrays: any non-null array handle is taken, and a copy with an
// array on either side succeeds without moving a byte (what a recorder sees
// of it is all the tests need).
struct Layout {  // one side of a CUDA_MEMCPY2D / CUDA_MEMCPY3D (2D: z = height = 0)
  CUmemorytype type = CU_MEMORYTYPE_HOST;
  const void* host = nullptr;
  CUdeviceptr device = 0;
  CUarray array = nullptr;
  std::size_t x = 0, y = 0, z = 0;
  std::size_t pitch = 0;
  std::size_t height = 0;  // rows from one slice to the next
};

struct Side {
  std::uintptr_t address = 0;  // row 0's first byte (of slice 0)
  std::size_t pitch = 0;
  std::size_t slice = 0;  // bytes from one slice to the next
  bool device = false;
  bool array = false;
};

CUresult sideOf(const State& s, const Layout& l, Side& out) {
  CUdeviceptr base = 0;
  std::size_t size = 0;
  const std::size_t offset = (l.z * l.height + l.y) * l.pitch + l.x;
  const std::size_t slice = l.pitch * l.height;
  switch (l.type) {
    case CU_MEMORYTYPE_HOST:
      out = {reinterpret_cast<std::uintptr_t>(l.host) + offset, l.pitch, slice, false, false};
      return CUDA_SUCCESS;
    case CU_MEMORYTYPE_DEVICE:
      out = {l.device + offset, l.pitch, slice, true, false};
      return CUDA_SUCCESS;
    case CU_MEMORYTYPE_UNIFIED:
      out = {l.device + offset, l.pitch, slice, s.rangeOf(l.device, base, size), false};
      return CUDA_SUCCESS;
    case CU_MEMORYTYPE_ARRAY:
      out = {0, 0, 0, false, true};
      return l.array != nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

// `depth` slices of `height` rows of `width` bytes (a 2D copy: depth 1).
CUresult copyPitched(const Layout& to, const Layout& from, std::size_t width, std::size_t height, std::size_t depth,
                     CUstream stream) {
  if (const CUresult r = needContext(); r != CUDA_SUCCESS) {
    return r;
  }
  Side dst;
  Side src;
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
    if (const CUresult r = sideOf(s, to, dst); r != CUDA_SUCCESS) {
      return r;
    }
    if (const CUresult r = sideOf(s, from, src); r != CUDA_SUCCESS) {
      return r;
    }
    if (width == 0 || height == 0 || depth == 0) {
      return CUDA_SUCCESS;
    }
    for (const Layout* layout : {&to, &from}) {
      if (layout->type == CU_MEMORYTYPE_ARRAY) {
        continue;
      }
      if ((height > 1 && layout->pitch < width) || (depth > 1 && layout->height < height)) {
        return CUDA_ERROR_INVALID_VALUE;
      }
    }
    for (const Side& side : {dst, src}) {
      if (side.device && !s.contains(side.address, (depth - 1) * side.slice + (height - 1) * side.pitch + width)) {
        return CUDA_ERROR_INVALID_VALUE;
      }
    }
  }
  if (dst.array || src.array) {
    return CUDA_SUCCESS;
  }
  for (std::size_t z = 0; z < depth; ++z) {
    for (std::size_t row = 0; row < height; ++row) {
      std::memmove(reinterpret_cast<void*>(dst.address + z * dst.slice + row * dst.pitch),
                   reinterpret_cast<const void*>(src.address + z * src.slice + row * src.pitch), width);
    }
  }
  return CUDA_SUCCESS;
}

// A copy into a capturing stream becomes a memcpy node (a 2D copy as a 3D
// one of depth 1, as CUDA's nodes hold it); CUDA_ERROR_NOT_PERMITTED: the
// stream does not capture.
CUresult capturedCopy(const CUDA_MEMCPY3D& p, CUstream stream) {
  if (const CUresult r = needContext(); r != CUDA_SUCCESS) {
    return r;
  }
  State& s = state();
  Lock lock(s.mutex);
  return captureCopy(s, stream, p) ? CUDA_SUCCESS : CUDA_ERROR_NOT_PERMITTED;
}

CUresult capturedCopy(const CUDA_MEMCPY2D& p, CUstream stream) {
  CUDA_MEMCPY3D volume{};
  volume.srcXInBytes = p.srcXInBytes;
  volume.srcY = p.srcY;
  volume.srcMemoryType = p.srcMemoryType;
  volume.srcHost = p.srcHost;
  volume.srcDevice = p.srcDevice;
  volume.srcArray = p.srcArray;
  volume.srcPitch = p.srcPitch;
  volume.srcHeight = p.Height;
  volume.dstXInBytes = p.dstXInBytes;
  volume.dstY = p.dstY;
  volume.dstMemoryType = p.dstMemoryType;
  volume.dstHost = p.dstHost;
  volume.dstDevice = p.dstDevice;
  volume.dstArray = p.dstArray;
  volume.dstPitch = p.dstPitch;
  volume.dstHeight = p.Height;
  volume.WidthInBytes = p.WidthInBytes;
  volume.Height = p.Height;
  volume.Depth = 1;
  return capturedCopy(volume, stream);
}

CUresult copy2d(const CUDA_MEMCPY2D* p, CUstream stream) {
  if (p == nullptr) {
    const CUresult r = needContext();
    return r != CUDA_SUCCESS ? r : CUDA_ERROR_INVALID_VALUE;
  }
  const Layout dst{.type = p->dstMemoryType,
                   .host = p->dstHost,
                   .device = p->dstDevice,
                   .array = p->dstArray,
                   .x = p->dstXInBytes,
                   .y = p->dstY,
                   .pitch = p->dstPitch};
  const Layout src{.type = p->srcMemoryType,
                   .host = p->srcHost,
                   .device = p->srcDevice,
                   .array = p->srcArray,
                   .x = p->srcXInBytes,
                   .y = p->srcY,
                   .pitch = p->srcPitch};
  if (const CUresult r = capturedCopy(*p, stream); r != CUDA_ERROR_NOT_PERMITTED) {
    return r;
  }
  return copyPitched(dst, src, p->WidthInBytes, p->Height, 1, stream);
}

CUresult copy3d(const CUDA_MEMCPY3D* p, CUstream stream) {
  if (p == nullptr) {
    const CUresult r = needContext();
    return r != CUDA_SUCCESS ? r : CUDA_ERROR_INVALID_VALUE;
  }
  const Layout dst{.type = p->dstMemoryType,
                   .host = p->dstHost,
                   .device = p->dstDevice,
                   .array = p->dstArray,
                   .x = p->dstXInBytes,
                   .y = p->dstY,
                   .z = p->dstZ,
                   .pitch = p->dstPitch,
                   .height = p->dstHeight};
  const Layout src{.type = p->srcMemoryType,
                   .host = p->srcHost,
                   .device = p->srcDevice,
                   .array = p->srcArray,
                   .x = p->srcXInBytes,
                   .y = p->srcY,
                   .z = p->srcZ,
                   .pitch = p->srcPitch,
                   .height = p->srcHeight};
  if (const CUresult r = capturedCopy(*p, stream); r != CUDA_ERROR_NOT_PERMITTED) {
    return r;
  }
  return copyPitched(dst, src, p->WidthInBytes, p->Height, p->Depth, stream);
}

template <class T>
CUresult fill2d(CUdeviceptr dst, std::size_t pitch, T value, std::size_t width, std::size_t height, CUstream stream) {
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
    if (width == 0 || height == 0) {
      return CUDA_SUCCESS;
    }
    const std::size_t extent = (height - 1) * pitch + width * sizeof(T);
    if ((height > 1 && pitch < width * sizeof(T)) ||
        (!s.contains(dst, extent) && !capturedReservation(s, stream, dst, extent))) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    if (captureMemset(s, stream,
                      {dst, pitch, static_cast<unsigned>(value), static_cast<unsigned>(sizeof(T)), width, height})) {
      return CUDA_SUCCESS;
    }
  }
  for (std::size_t row = 0; row < height; ++row) {
    auto* out = reinterpret_cast<T*>(dst + row * pitch);
    for (std::size_t i = 0; i < width; ++i) {
      out[i] = value;
    }
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

CUresult runCopy3d(const CUDA_MEMCPY3D& copy) { return copy3d(&copy, nullptr); }

CUresult runMemset(const CUDA_MEMSET_NODE_PARAMS& p) {
  const std::size_t pitch = p.height > 1 ? p.pitch : p.width * p.elementSize;
  switch (p.elementSize) {
    case 1:
      return fill2d(p.dst, pitch, static_cast<unsigned char>(p.value), p.width, p.height, nullptr);
    case 2:
      return fill2d(p.dst, pitch, static_cast<unsigned short>(p.value), p.width, p.height, nullptr);
    case 4:
      return fill2d(p.dst, pitch, p.value, p.width, p.height, nullptr);
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

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

namespace {
// A peer copy's description without its contexts (the double's memory is
// one address space): the same 3D copy.
CUDA_MEMCPY3D withoutContexts(const CUDA_MEMCPY3D_PEER& p) {
  CUDA_MEMCPY3D c{};
  c.srcXInBytes = p.srcXInBytes;
  c.srcY = p.srcY;
  c.srcZ = p.srcZ;
  c.srcMemoryType = p.srcMemoryType;
  c.srcHost = p.srcHost;
  c.srcDevice = p.srcDevice;
  c.srcArray = p.srcArray;
  c.srcPitch = p.srcPitch;
  c.srcHeight = p.srcHeight;
  c.dstXInBytes = p.dstXInBytes;
  c.dstY = p.dstY;
  c.dstZ = p.dstZ;
  c.dstMemoryType = p.dstMemoryType;
  c.dstHost = p.dstHost;
  c.dstDevice = p.dstDevice;
  c.dstArray = p.dstArray;
  c.dstPitch = p.dstPitch;
  c.dstHeight = p.dstHeight;
  c.WidthInBytes = p.WidthInBytes;
  c.Height = p.Height;
  c.Depth = p.Depth;
  return c;
}
CUresult copy3dPeer(const CUDA_MEMCPY3D_PEER* copy, CUstream stream) {
  if (copy == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  const CUDA_MEMCPY3D plain = withoutContexts(*copy);
  return copy3d(&plain, stream);
}
}  // namespace

DOUBLE_API CUresult cuMemcpy3DPeer(const CUDA_MEMCPY3D_PEER* copy) { return copy3dPeer(copy, nullptr); }
DOUBLE_API CUresult cuMemcpy3DPeer_ptds(const CUDA_MEMCPY3D_PEER* copy) {
  return copy3dPeer(copy, CU_STREAM_PER_THREAD);
}
DOUBLE_API CUresult cuMemcpy3DPeerAsync(const CUDA_MEMCPY3D_PEER* copy, CUstream stream) {
  return copy3dPeer(copy, stream);
}
DOUBLE_API CUresult cuMemcpy3DPeerAsync_ptsz(const CUDA_MEMCPY3D_PEER* copy, CUstream stream) {
  return copy3dPeer(copy, stream);
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

// ---- pitched memory: allocation, 2D and 3D copies, 2D memsets ------------------------

// Rows 512 bytes apart at least, as an H200 pitches them.
DOUBLE_API CUresult cuMemAllocPitch_v2(CUdeviceptr* address, std::size_t* pitch, std::size_t width, std::size_t height,
                                       unsigned elementSize) {
  if (const CUresult r = needContext(); r != CUDA_SUCCESS) {
    return r;
  }
  if (address == nullptr || pitch == nullptr || width == 0 || height == 0 ||
      (elementSize != 4 && elementSize != 8 && elementSize != 16)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  const std::size_t rowPitch = (width + 511) / 512 * 512;
  State& s = state();
  Lock lock(s.mutex);
  *address = s.allocate(rowPitch * height);
  if (*address == 0) {
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  *pitch = rowPitch;
  return CUDA_SUCCESS;
}

DOUBLE_API CUresult cuMemcpy2D_v2(const CUDA_MEMCPY2D* copy) { return copy2d(copy, nullptr); }
DOUBLE_API CUresult cuMemcpy2D_v2_ptds(const CUDA_MEMCPY2D* copy) { return copy2d(copy, CU_STREAM_PER_THREAD); }
DOUBLE_API CUresult cuMemcpy2DUnaligned_v2(const CUDA_MEMCPY2D* copy) { return copy2d(copy, nullptr); }
DOUBLE_API CUresult cuMemcpy2DUnaligned_v2_ptds(const CUDA_MEMCPY2D* copy) {
  return copy2d(copy, CU_STREAM_PER_THREAD);
}
DOUBLE_API CUresult cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D* copy, CUstream stream) { return copy2d(copy, stream); }
DOUBLE_API CUresult cuMemcpy2DAsync_v2_ptsz(const CUDA_MEMCPY2D* copy, CUstream stream) { return copy2d(copy, stream); }

DOUBLE_API CUresult cuMemcpy3D_v2(const CUDA_MEMCPY3D* copy) { return copy3d(copy, nullptr); }
DOUBLE_API CUresult cuMemcpy3D_v2_ptds(const CUDA_MEMCPY3D* copy) { return copy3d(copy, CU_STREAM_PER_THREAD); }
DOUBLE_API CUresult cuMemcpy3DAsync_v2(const CUDA_MEMCPY3D* copy, CUstream stream) { return copy3d(copy, stream); }
DOUBLE_API CUresult cuMemcpy3DAsync_v2_ptsz(const CUDA_MEMCPY3D* copy, CUstream stream) { return copy3d(copy, stream); }

DOUBLE_API CUresult cuMemsetD2D8_v2(CUdeviceptr dst, std::size_t pitch, unsigned char value, std::size_t width,
                                    std::size_t height) {
  return fill2d(dst, pitch, value, width, height, nullptr);
}
DOUBLE_API CUresult cuMemsetD2D8_v2_ptds(CUdeviceptr dst, std::size_t pitch, unsigned char value, std::size_t width,
                                         std::size_t height) {
  return fill2d(dst, pitch, value, width, height, CU_STREAM_PER_THREAD);
}
DOUBLE_API CUresult cuMemsetD2D16_v2(CUdeviceptr dst, std::size_t pitch, unsigned short value, std::size_t width,
                                     std::size_t height) {
  return fill2d(dst, pitch, value, width, height, nullptr);
}
DOUBLE_API CUresult cuMemsetD2D16_v2_ptds(CUdeviceptr dst, std::size_t pitch, unsigned short value, std::size_t width,
                                          std::size_t height) {
  return fill2d(dst, pitch, value, width, height, CU_STREAM_PER_THREAD);
}
DOUBLE_API CUresult cuMemsetD2D32_v2(CUdeviceptr dst, std::size_t pitch, unsigned value, std::size_t width,
                                     std::size_t height) {
  return fill2d(dst, pitch, value, width, height, nullptr);
}
DOUBLE_API CUresult cuMemsetD2D32_v2_ptds(CUdeviceptr dst, std::size_t pitch, unsigned value, std::size_t width,
                                          std::size_t height) {
  return fill2d(dst, pitch, value, width, height, CU_STREAM_PER_THREAD);
}
DOUBLE_API CUresult cuMemsetD2D8Async(CUdeviceptr dst, std::size_t pitch, unsigned char value, std::size_t width,
                                      std::size_t height, CUstream stream) {
  return fill2d(dst, pitch, value, width, height, stream);
}
DOUBLE_API CUresult cuMemsetD2D8Async_ptsz(CUdeviceptr dst, std::size_t pitch, unsigned char value, std::size_t width,
                                           std::size_t height, CUstream stream) {
  return fill2d(dst, pitch, value, width, height, stream);
}
DOUBLE_API CUresult cuMemsetD2D16Async(CUdeviceptr dst, std::size_t pitch, unsigned short value, std::size_t width,
                                       std::size_t height, CUstream stream) {
  return fill2d(dst, pitch, value, width, height, stream);
}
DOUBLE_API CUresult cuMemsetD2D16Async_ptsz(CUdeviceptr dst, std::size_t pitch, unsigned short value, std::size_t width,
                                            std::size_t height, CUstream stream) {
  return fill2d(dst, pitch, value, width, height, stream);
}
DOUBLE_API CUresult cuMemsetD2D32Async(CUdeviceptr dst, std::size_t pitch, unsigned value, std::size_t width,
                                       std::size_t height, CUstream stream) {
  return fill2d(dst, pitch, value, width, height, stream);
}
DOUBLE_API CUresult cuMemsetD2D32Async_ptsz(CUdeviceptr dst, std::size_t pitch, unsigned value, std::size_t width,
                                            std::size_t height, CUstream stream) {
  return fill2d(dst, pitch, value, width, height, stream);
}
