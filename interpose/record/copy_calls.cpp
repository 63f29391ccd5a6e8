// 2D and 3D copies as CopyCalls: the observers' copies and the graphs'
// memcpy nodes describe copies with the same structures.
#include "record/recorder.h"

namespace kcap {
namespace {

uint64_t word(const void* pointer) { return reinterpret_cast<uint64_t>(pointer); }

// One side of a CUDA_MEMCPY2D or CUDA_MEMCPY3D: the address of its first
// byte copied (0 for an array, which has none), its pitch and, 3D, the rows
// from one slice to the next.
struct Side {
  uint64_t address = 0;
  uint64_t pitch = 0;
  uint64_t height = 0;
};

Side sideOf(CUmemorytype type, const void* host, CUdeviceptr device, size_t x, size_t y, size_t z, size_t pitch,
            size_t height) {
  const uint64_t offset = (static_cast<uint64_t>(z) * height + y) * pitch + x;
  switch (type) {
    case CU_MEMORYTYPE_HOST:
      return {word(host) + offset, pitch, height};
    case CU_MEMORYTYPE_DEVICE:
    case CU_MEMORYTYPE_UNIFIED:
      return {device + offset, pitch, height};
    default:
      return {};
  }
}

// The direction the memory types give; a unified side is left to the
// recorder (as for cuMemcpy), a copy to or from an array stays UNKNOWN.
void decideDirection(CopyCall& call, CUmemorytype dstType, CUmemorytype srcType, const void* srcHost,
                     const void*& hostSource) {
  hostSource = nullptr;
  const bool toHost = dstType == CU_MEMORYTYPE_HOST;
  if (dstType == CU_MEMORYTYPE_ARRAY || srcType == CU_MEMORYTYPE_ARRAY) {
    call.array = true;
  } else if (dstType == CU_MEMORYTYPE_UNIFIED || srcType == CU_MEMORYTYPE_UNIFIED) {
    // left UNKNOWN: the recorder decides
  } else if (srcType == CU_MEMORYTYPE_HOST) {
    call.direction = toHost ? schema::CopyDirection::HOST_TO_HOST : schema::CopyDirection::HOST_TO_DEVICE;
    hostSource = srcHost != nullptr ? reinterpret_cast<const void*>(call.src) : nullptr;
  } else {
    call.direction = toHost ? schema::CopyDirection::DEVICE_TO_HOST : schema::CopyDirection::DEVICE_TO_DEVICE;
  }
}

}  // namespace

CopyCall copyCallOf(const CUDA_MEMCPY2D& p, const void*& hostSource) {
  const Side dst = sideOf(p.dstMemoryType, p.dstHost, p.dstDevice, p.dstXInBytes, p.dstY, 0, p.dstPitch, 0);
  const Side src = sideOf(p.srcMemoryType, p.srcHost, p.srcDevice, p.srcXInBytes, p.srcY, 0, p.srcPitch, 0);
  CopyCall call{.dst = dst.address,
                .src = src.address,
                .size = static_cast<uint64_t>(p.WidthInBytes) * p.Height,
                .width = p.WidthInBytes,
                .height = p.Height,
                .dstPitch = dst.pitch,
                .srcPitch = src.pitch};
  decideDirection(call, p.dstMemoryType, p.srcMemoryType, p.srcHost, hostSource);
  return call;
}

// Depth slices of Height rows; the Z offsets and the slice heights
// (dstHeight, srcHeight) place each side's first byte and slices. A copy of
// depth 0 copies nothing: it is taken with height 0 (depth 0 alone would
// read as a 2D copy).
CopyCall copyCallOf(const CUDA_MEMCPY3D& p, const void*& hostSource) {
  const Side dst =
      sideOf(p.dstMemoryType, p.dstHost, p.dstDevice, p.dstXInBytes, p.dstY, p.dstZ, p.dstPitch, p.dstHeight);
  const Side src =
      sideOf(p.srcMemoryType, p.srcHost, p.srcDevice, p.srcXInBytes, p.srcY, p.srcZ, p.srcPitch, p.srcHeight);
  const uint64_t height = p.Depth == 0 ? 0 : p.Height;
  CopyCall call{.dst = dst.address,
                .src = src.address,
                .size = static_cast<uint64_t>(p.WidthInBytes) * height * p.Depth,
                .width = p.WidthInBytes,
                .height = height,
                .dstPitch = dst.pitch,
                .srcPitch = src.pitch,
                .depth = p.Depth,
                .dstHeight = dst.height,
                .srcHeight = src.height};
  decideDirection(call, p.dstMemoryType, p.srcMemoryType, p.srcHost, hostSource);
  return call;
}

}  // namespace kcap
