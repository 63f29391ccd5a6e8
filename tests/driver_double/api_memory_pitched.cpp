// Pitched and volume memory on the host: 2D and 3D copies (peer ones too),
// 2D memsets, pitched allocations, and the copy and memset nodes a graph
// launch runs; each side checked against the allocation table as
// api_memory.cpp does for linear copies.
#include "driver_exports.h"
#include "graph.h"
#include "state.h"

#include <cuda.h>

#include <cstring>

namespace kcap_double {
namespace {

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
