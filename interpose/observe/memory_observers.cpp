// The observers of memory: allocations and frees, copies, memsets, and the
// tensor maps that describe it; each hands the call to the Recorder when the
// shim records.
#include "observe/observer.h"

#include "record/recorder.h"

#include <vector>

namespace kcap {
namespace {

uint64_t word(const void* pointer) { return reinterpret_cast<uint64_t>(pointer); }

template <class T>
uint64_t madeAddress(CUresult result, T* out) {
  return result == CUDA_SUCCESS && out != nullptr ? static_cast<uint64_t>(reinterpret_cast<uintptr_t>(*out)) : 0;
}
uint64_t madeAddress(CUresult result, CUdeviceptr* out) { return result == CUDA_SUCCESS && out != nullptr ? *out : 0; }

void recordAlloc(const AllocCall& call) {
  if (Recorder* recorder = Recorder::active()) {
    recorder->allocated(call);
  }
}

// What each free took out of the allocation map before the real call, for
// its after(): a stack per thread (before/after pairs nest, never cross).
thread_local std::vector<Recorder::Released> t_released;

void freeBefore(schema::AllocKind kind, uint64_t address, uint64_t size, CUstream stream = nullptr) {
  Recorder::Released released;
  if (Recorder* recorder = Recorder::active()) {
    released = recorder->releasing(kind, address, size, stream);
  }
  t_released.push_back(std::move(released));
}

void freeAfter(const FreeCall& call) {
  Recorder::Released released;
  if (!t_released.empty()) {
    released = std::move(t_released.back());
    t_released.pop_back();
  }
  if (Recorder* recorder = Recorder::current()) {
    recorder->freed(call, released);
  }
}

void recordCopy(const CopyCall& call, const void* hostSource) {
  if (Recorder* recorder = Recorder::active()) {
    recorder->copied(call, hostSource);
  }
}

void recordCopy2D(CUresult result, const CUDA_MEMCPY2D* p, CUstream stream, bool isAsync) {
  if (p == nullptr) {
    return;  // the call failed: apiError has it
  }
  const void* hostSource = nullptr;
  CopyCall call = copyCallOf(*p, hostSource);
  call.result = result;
  call.stream = word(stream);
  call.isAsync = isAsync;
  recordCopy(call, hostSource);
}

void recordCopy3D(CUresult result, const CUDA_MEMCPY3D* p, CUstream stream, bool isAsync) {
  if (p == nullptr) {
    return;  // the call failed: apiError has it
  }
  const void* hostSource = nullptr;
  CopyCall call = copyCallOf(*p, hostSource);
  call.result = result;
  call.stream = word(stream);
  call.isAsync = isAsync;
  recordCopy(call, hostSource);
}

// A peer copy's description is a 3D copy's with each side's context in
// place of the reserved words: the same copy, which the memory types and
// the recorder's devices place.
CUDA_MEMCPY3D withoutContexts(const CUDA_MEMCPY3D_PEER& p) {
  CUDA_MEMCPY3D c{};
  c.srcXInBytes = p.srcXInBytes;
  c.srcY = p.srcY;
  c.srcZ = p.srcZ;
  c.srcLOD = p.srcLOD;
  c.srcMemoryType = p.srcMemoryType;
  c.srcHost = p.srcHost;
  c.srcDevice = p.srcDevice;
  c.srcArray = p.srcArray;
  c.srcPitch = p.srcPitch;
  c.srcHeight = p.srcHeight;
  c.dstXInBytes = p.dstXInBytes;
  c.dstY = p.dstY;
  c.dstZ = p.dstZ;
  c.dstLOD = p.dstLOD;
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

void recordSet(const SetCall& call) {
  if (Recorder* recorder = Recorder::active()) {
    recorder->memset(call);
  }
}

}  // namespace

// ---- allocation ---------------------------------------------------------------------

void Observer<HookId::cuMemAlloc_v2_hook>::after(HookId, CUresult result, CUdeviceptr* address, size_t size) {
  recordAlloc(
      {.kind = schema::AllocKind::MEM_ALLOC, .result = result, .address = madeAddress(result, address), .size = size});
}

void Observer<HookId::cuMemAllocPitch_v2_hook>::after(HookId, CUresult result, CUdeviceptr* address, size_t* pitch,
                                                      size_t, size_t height, unsigned) {
  const uint64_t rowPitch = result == CUDA_SUCCESS && pitch != nullptr ? *pitch : 0;
  recordAlloc({.kind = schema::AllocKind::MEM_ALLOC_PITCH,
               .result = result,
               .address = madeAddress(result, address),
               .size = rowPitch * height,
               .pitch = rowPitch});
}

void Observer<HookId::cuMemAllocManaged_hook>::after(HookId, CUresult result, CUdeviceptr* address, size_t size,
                                                     unsigned flags) {
  recordAlloc({.kind = schema::AllocKind::MANAGED,
               .result = result,
               .address = madeAddress(result, address),
               .size = size,
               .flags = flags});
}

void Observer<HookId::cuMemAllocAsync_hook>::after(HookId, CUresult result, CUdeviceptr* address, size_t size,
                                                   CUstream stream) {
  recordAlloc({.kind = schema::AllocKind::ASYNC,
               .result = result,
               .address = madeAddress(result, address),
               .size = size,
               .stream = word(stream)});
}

void Observer<HookId::cuMemAllocFromPoolAsync_hook>::after(HookId, CUresult result, CUdeviceptr* address, size_t size,
                                                           CUmemoryPool pool, CUstream stream) {
  recordAlloc({.kind = schema::AllocKind::FROM_POOL,
               .result = result,
               .address = madeAddress(result, address),
               .size = size,
               .stream = word(stream),
               .handle = word(pool)});
}

void Observer<HookId::cuMemFree_v2_hook>::before(HookId, CUdeviceptr address) {
  freeBefore(schema::AllocKind::MEM_ALLOC, address, 0);
}

void Observer<HookId::cuMemFree_v2_hook>::after(HookId, CUresult result, CUdeviceptr address) {
  freeAfter({.kind = schema::AllocKind::MEM_ALLOC, .result = result, .address = address});
}

void Observer<HookId::cuMemFreeAsync_hook>::before(HookId, CUdeviceptr address, CUstream stream) {
  freeBefore(schema::AllocKind::ASYNC, address, 0, stream);
}

void Observer<HookId::cuMemFreeAsync_hook>::after(HookId, CUresult result, CUdeviceptr address, CUstream stream) {
  freeAfter({.kind = schema::AllocKind::ASYNC, .result = result, .address = address, .stream = word(stream)});
}

void Observer<HookId::cuMemAddressReserve_hook>::after(HookId, CUresult result, CUdeviceptr* address, size_t size,
                                                       size_t, CUdeviceptr hint, unsigned long long flags) {
  recordAlloc({.kind = schema::AllocKind::VMM_RESERVE,
               .result = result,
               .address = madeAddress(result, address),
               .size = size,
               .offset = hint,
               .flags = flags});
}

void Observer<HookId::cuMemAddressFree_hook>::before(HookId, CUdeviceptr address, size_t size) {
  freeBefore(schema::AllocKind::VMM_RESERVE, address, size);
}

void Observer<HookId::cuMemAddressFree_hook>::after(HookId, CUresult result, CUdeviceptr address, size_t size) {
  freeAfter({.kind = schema::AllocKind::VMM_RESERVE, .result = result, .address = address, .size = size});
}

void Observer<HookId::cuMemCreate_hook>::after(HookId, CUresult result, CUmemGenericAllocationHandle* handle,
                                               size_t size, const CUmemAllocationProp* prop, unsigned long long flags) {
  recordAlloc(
      {.kind = schema::AllocKind::VMM_CREATE,
       .result = result,
       .size = size,
       .handle = result == CUDA_SUCCESS && handle != nullptr ? *handle : 0,
       .flags = flags,
       .device = prop != nullptr && prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE ? prop->location.id : -1});
}

// Another process's physical memory: mapped, it is that process's to write.
void Observer<HookId::cuMemImportFromShareableHandle_hook>::after(HookId, CUresult result,
                                                                  CUmemGenericAllocationHandle* handle, void*,
                                                                  CUmemAllocationHandleType type) {
  recordAlloc({.kind = schema::AllocKind::VMM_IMPORT,
               .result = result,
               .handle = result == CUDA_SUCCESS && handle != nullptr ? *handle : 0,
               .flags = static_cast<uint64_t>(type)});
}

void Observer<HookId::cuMemRelease_hook>::after(HookId, CUresult result, CUmemGenericAllocationHandle handle) {
  if (Recorder* recorder = Recorder::active()) {
    recorder->freed({.kind = schema::AllocKind::VMM_CREATE, .result = result, .handle = handle}, {});
  }
}

void Observer<HookId::cuMemMap_hook>::after(HookId, CUresult result, CUdeviceptr address, size_t size, size_t offset,
                                            CUmemGenericAllocationHandle handle, unsigned long long flags) {
  recordAlloc({.kind = schema::AllocKind::VMM_MAP,
               .result = result,
               .address = address,
               .size = size,
               .handle = handle,
               .offset = offset,
               .flags = flags});
}

void Observer<HookId::cuMemUnmap_hook>::before(HookId, CUdeviceptr address, size_t size) {
  freeBefore(schema::AllocKind::VMM_MAP, address, size);
}

void Observer<HookId::cuMemUnmap_hook>::after(HookId, CUresult result, CUdeviceptr address, size_t size) {
  freeAfter({.kind = schema::AllocKind::VMM_MAP, .result = result, .address = address, .size = size});
}

// The mapping's size is the recorder's to ask (cuMemGetAddressRange).
void Observer<HookId::cuIpcOpenMemHandle_v2_hook>::after(HookId, CUresult result, CUdeviceptr* address, CUipcMemHandle,
                                                         unsigned flags) {
  recordAlloc({.kind = schema::AllocKind::IPC_IMPORT,
               .result = result,
               .address = madeAddress(result, address),
               .flags = flags});
}

void Observer<HookId::cuIpcCloseMemHandle_hook>::before(HookId, CUdeviceptr address) {
  freeBefore(schema::AllocKind::IPC_IMPORT, address, 0);
}

void Observer<HookId::cuIpcCloseMemHandle_hook>::after(HookId, CUresult result, CUdeviceptr address) {
  freeAfter({.kind = schema::AllocKind::IPC_IMPORT, .result = result, .address = address});
}

void Observer<HookId::cuMemAllocHost_v2_hook>::after(HookId, CUresult result, void** pointer, size_t size) {
  recordAlloc(
      {.kind = schema::AllocKind::HOST_ALLOC, .result = result, .address = madeAddress(result, pointer), .size = size});
}

void Observer<HookId::cuMemHostAlloc_hook>::after(HookId, CUresult result, void** pointer, size_t size,
                                                  unsigned flags) {
  recordAlloc({.kind = schema::AllocKind::HOST_ALLOC,
               .result = result,
               .address = madeAddress(result, pointer),
               .size = size,
               .flags = flags});
}

void Observer<HookId::cuMemFreeHost_hook>::before(HookId, void* pointer) {
  freeBefore(schema::AllocKind::HOST_ALLOC, word(pointer), 0);
}

void Observer<HookId::cuMemFreeHost_hook>::after(HookId, CUresult result, void* pointer) {
  freeAfter({.kind = schema::AllocKind::HOST_ALLOC, .result = result, .address = word(pointer)});
}

void Observer<HookId::cuMemHostRegister_v2_hook>::after(HookId, CUresult result, void* pointer, size_t size,
                                                        unsigned flags) {
  recordAlloc({.kind = schema::AllocKind::HOST_REGISTER,
               .result = result,
               .address = word(pointer),
               .size = size,
               .flags = flags});
}

void Observer<HookId::cuMemHostUnregister_hook>::before(HookId, void* pointer) {
  freeBefore(schema::AllocKind::HOST_REGISTER, word(pointer), 0);
}

void Observer<HookId::cuMemHostUnregister_hook>::after(HookId, CUresult result, void* pointer) {
  freeAfter({.kind = schema::AllocKind::HOST_REGISTER, .result = result, .address = word(pointer)});
}

// ---- copies and memsets -----------------------------------------------------------------

void Observer<HookId::cuMemcpyHtoD_v2_hook>::after(HookId, CUresult result, CUdeviceptr dst, const void* src,
                                                   size_t size) {
  recordCopy({.direction = schema::CopyDirection::HOST_TO_DEVICE, .result = result, .dst = dst, .size = size}, src);
}

void Observer<HookId::cuMemcpyHtoDAsync_v2_hook>::after(HookId, CUresult result, CUdeviceptr dst, const void* src,
                                                        size_t size, CUstream stream) {
  recordCopy({.direction = schema::CopyDirection::HOST_TO_DEVICE,
              .result = result,
              .dst = dst,
              .size = size,
              .stream = word(stream),
              .isAsync = true},
             src);
}

void Observer<HookId::cuMemcpyDtoD_v2_hook>::after(HookId, CUresult result, CUdeviceptr dst, CUdeviceptr src,
                                                   size_t size) {
  recordCopy(
      {.direction = schema::CopyDirection::DEVICE_TO_DEVICE, .result = result, .dst = dst, .src = src, .size = size},
      nullptr);
}

void Observer<HookId::cuMemcpyDtoDAsync_v2_hook>::after(HookId, CUresult result, CUdeviceptr dst, CUdeviceptr src,
                                                        size_t size, CUstream stream) {
  recordCopy({.direction = schema::CopyDirection::DEVICE_TO_DEVICE,
              .result = result,
              .dst = dst,
              .src = src,
              .size = size,
              .stream = word(stream),
              .isAsync = true},
             nullptr);
}

// Between two contexts, usually of two devices: the recorder decides
// whether the sides lie on different devices.
void Observer<HookId::cuMemcpyPeer_hook>::after(HookId id, CUresult result, CUdeviceptr dst, CUcontext, CUdeviceptr src,
                                                CUcontext, size_t size) {
  recordCopy({.direction = schema::CopyDirection::DEVICE_TO_DEVICE,
              .result = result,
              .dst = dst,
              .src = src,
              .size = size,
              .stream = spec(id).perThread ? word(CU_STREAM_PER_THREAD) : 0},
             nullptr);
}

void Observer<HookId::cuMemcpyPeerAsync_hook>::after(HookId, CUresult result, CUdeviceptr dst, CUcontext,
                                                     CUdeviceptr src, CUcontext, size_t size, CUstream stream) {
  recordCopy({.direction = schema::CopyDirection::DEVICE_TO_DEVICE,
              .result = result,
              .dst = dst,
              .src = src,
              .size = size,
              .stream = word(stream),
              .isAsync = true},
             nullptr);
}

void Observer<HookId::cuMemcpyDtoH_v2_hook>::after(HookId, CUresult result, void*, CUdeviceptr src, size_t size) {
  recordCopy({.direction = schema::CopyDirection::DEVICE_TO_HOST, .result = result, .src = src, .size = size}, nullptr);
}

void Observer<HookId::cuMemcpyDtoHAsync_v2_hook>::after(HookId, CUresult result, void*, CUdeviceptr src, size_t size,
                                                        CUstream stream) {
  recordCopy({.direction = schema::CopyDirection::DEVICE_TO_HOST,
              .result = result,
              .src = src,
              .size = size,
              .stream = word(stream),
              .isAsync = true},
             nullptr);
}

void Observer<HookId::cuMemcpy_hook>::after(HookId, CUresult result, CUdeviceptr dst, CUdeviceptr src, size_t size) {
  recordCopy({.result = result, .dst = dst, .src = src, .size = size}, nullptr);
}

void Observer<HookId::cuMemcpyAsync_hook>::after(HookId, CUresult result, CUdeviceptr dst, CUdeviceptr src, size_t size,
                                                 CUstream stream) {
  recordCopy({.result = result, .dst = dst, .src = src, .size = size, .stream = word(stream), .isAsync = true},
             nullptr);
}

void Observer<HookId::cuMemsetD8_v2_hook>::after(HookId, CUresult result, CUdeviceptr dst, unsigned char value,
                                                 size_t count) {
  recordSet({.result = result, .dst = dst, .value = value, .elementSize = 1, .count = count});
}

void Observer<HookId::cuMemsetD16_v2_hook>::after(HookId, CUresult result, CUdeviceptr dst, unsigned short value,
                                                  size_t count) {
  recordSet({.result = result, .dst = dst, .value = value, .elementSize = 2, .count = count});
}

void Observer<HookId::cuMemsetD32_v2_hook>::after(HookId, CUresult result, CUdeviceptr dst, unsigned value,
                                                  size_t count) {
  recordSet({.result = result, .dst = dst, .value = value, .elementSize = 4, .count = count});
}

void Observer<HookId::cuMemsetD8Async_hook>::after(HookId, CUresult result, CUdeviceptr dst, unsigned char value,
                                                   size_t count, CUstream stream) {
  recordSet({.result = result,
             .dst = dst,
             .value = value,
             .elementSize = 1,
             .count = count,
             .stream = word(stream),
             .isAsync = true});
}

void Observer<HookId::cuMemsetD16Async_hook>::after(HookId, CUresult result, CUdeviceptr dst, unsigned short value,
                                                    size_t count, CUstream stream) {
  recordSet({.result = result,
             .dst = dst,
             .value = value,
             .elementSize = 2,
             .count = count,
             .stream = word(stream),
             .isAsync = true});
}

void Observer<HookId::cuMemsetD32Async_hook>::after(HookId, CUresult result, CUdeviceptr dst, unsigned value,
                                                    size_t count, CUstream stream) {
  recordSet({.result = result,
             .dst = dst,
             .value = value,
             .elementSize = 4,
             .count = count,
             .stream = word(stream),
             .isAsync = true});
}

void Observer<HookId::cuMemcpy2D_v2_hook>::after(HookId, CUresult result, const CUDA_MEMCPY2D* copy) {
  recordCopy2D(result, copy, nullptr, false);
}

void Observer<HookId::cuMemcpy2DUnaligned_v2_hook>::after(HookId, CUresult result, const CUDA_MEMCPY2D* copy) {
  recordCopy2D(result, copy, nullptr, false);
}

void Observer<HookId::cuMemcpy2DAsync_v2_hook>::after(HookId, CUresult result, const CUDA_MEMCPY2D* copy,
                                                      CUstream stream) {
  recordCopy2D(result, copy, stream, true);
}

void Observer<HookId::cuMemsetD2D8_v2_hook>::after(HookId, CUresult result, CUdeviceptr dst, size_t pitch,
                                                   unsigned char value, size_t width, size_t height) {
  recordSet({.result = result,
             .dst = dst,
             .value = value,
             .elementSize = 1,
             .count = width,
             .height = height,
             .pitch = pitch});
}

void Observer<HookId::cuMemsetD2D16_v2_hook>::after(HookId, CUresult result, CUdeviceptr dst, size_t pitch,
                                                    unsigned short value, size_t width, size_t height) {
  recordSet({.result = result,
             .dst = dst,
             .value = value,
             .elementSize = 2,
             .count = width,
             .height = height,
             .pitch = pitch});
}

void Observer<HookId::cuMemsetD2D32_v2_hook>::after(HookId, CUresult result, CUdeviceptr dst, size_t pitch,
                                                    unsigned value, size_t width, size_t height) {
  recordSet({.result = result,
             .dst = dst,
             .value = value,
             .elementSize = 4,
             .count = width,
             .height = height,
             .pitch = pitch});
}

void Observer<HookId::cuMemsetD2D8Async_hook>::after(HookId, CUresult result, CUdeviceptr dst, size_t pitch,
                                                     unsigned char value, size_t width, size_t height,
                                                     CUstream stream) {
  recordSet({.result = result,
             .dst = dst,
             .value = value,
             .elementSize = 1,
             .count = width,
             .height = height,
             .pitch = pitch,
             .stream = word(stream),
             .isAsync = true});
}

void Observer<HookId::cuMemsetD2D16Async_hook>::after(HookId, CUresult result, CUdeviceptr dst, size_t pitch,
                                                      unsigned short value, size_t width, size_t height,
                                                      CUstream stream) {
  recordSet({.result = result,
             .dst = dst,
             .value = value,
             .elementSize = 2,
             .count = width,
             .height = height,
             .pitch = pitch,
             .stream = word(stream),
             .isAsync = true});
}

void Observer<HookId::cuMemsetD2D32Async_hook>::after(HookId, CUresult result, CUdeviceptr dst, size_t pitch,
                                                      unsigned value, size_t width, size_t height, CUstream stream) {
  recordSet({.result = result,
             .dst = dst,
             .value = value,
             .elementSize = 4,
             .count = width,
             .height = height,
             .pitch = pitch,
             .stream = word(stream),
             .isAsync = true});
}

void Observer<HookId::cuMemcpy3D_v2_hook>::after(HookId, CUresult result, const CUDA_MEMCPY3D* copy) {
  recordCopy3D(result, copy, nullptr, false);
}

void Observer<HookId::cuMemcpy3DAsync_v2_hook>::after(HookId, CUresult result, const CUDA_MEMCPY3D* copy,
                                                      CUstream stream) {
  recordCopy3D(result, copy, stream, true);
}

void Observer<HookId::cuMemcpy3DPeer_hook>::after(HookId, CUresult result, const CUDA_MEMCPY3D_PEER* copy) {
  if (copy == nullptr) return;  // the call failed: apiError has it
  const CUDA_MEMCPY3D plain = withoutContexts(*copy);
  recordCopy3D(result, &plain, nullptr, false);
}

void Observer<HookId::cuMemcpy3DPeerAsync_hook>::after(HookId, CUresult result, const CUDA_MEMCPY3D_PEER* copy,
                                                       CUstream stream) {
  if (copy == nullptr) return;
  const CUDA_MEMCPY3D plain = withoutContexts(*copy);
  recordCopy3D(result, &plain, stream, true);
}

// ---- tensor maps ----------------------------------------------------------------

namespace {

void recordTensorMap(const TensorMapEncodeCall& call) {
  if (Recorder* recorder = Recorder::active()) {
    recorder->tensorMapEncoded(call);
  }
}

}  // namespace

void Observer<HookId::cuTensorMapEncodeTiled_hook>::after(HookId, CUresult result, CUtensorMap* map,
                                                          CUtensorMapDataType dataType, cuuint32_t rank, void* address,
                                                          const cuuint64_t* globalDim, const cuuint64_t* globalStrides,
                                                          const cuuint32_t* boxDim, const cuuint32_t* elementStrides,
                                                          CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,
                                                          CUtensorMapL2promotion l2Promotion,
                                                          CUtensorMapFloatOOBfill oobFill) {
  recordTensorMap({.api = schema::TensorMapApi::TILED,
                   .result = result,
                   .map = map,
                   .dataType = dataType,
                   .rank = rank,
                   .globalAddress = word(address),
                   .globalDim = globalDim,
                   .globalStrides = globalStrides,
                   .boxDim = boxDim,
                   .elementStrides = elementStrides,
                   .interleave = interleave,
                   .swizzle = swizzle,
                   .l2Promotion = l2Promotion,
                   .oobFill = oobFill});
}

void Observer<HookId::cuTensorMapEncodeIm2col_hook>::after(
    HookId, CUresult result, CUtensorMap* map, CUtensorMapDataType dataType, cuuint32_t rank, void* address,
    const cuuint64_t* globalDim, const cuuint64_t* globalStrides, const int* lowerCorner, const int* upperCorner,
    cuuint32_t channelsPerPixel, cuuint32_t pixelsPerColumn, const cuuint32_t* elementStrides,
    CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2Promotion,
    CUtensorMapFloatOOBfill oobFill) {
  recordTensorMap({.api = schema::TensorMapApi::IM2COL,
                   .result = result,
                   .map = map,
                   .dataType = dataType,
                   .rank = rank,
                   .globalAddress = word(address),
                   .globalDim = globalDim,
                   .globalStrides = globalStrides,
                   .elementStrides = elementStrides,
                   .lowerCorner = lowerCorner,
                   .upperCorner = upperCorner,
                   .channelsPerPixel = channelsPerPixel,
                   .pixelsPerColumn = pixelsPerColumn,
                   .interleave = interleave,
                   .swizzle = swizzle,
                   .l2Promotion = l2Promotion,
                   .oobFill = oobFill});
}

void Observer<HookId::cuTensorMapEncodeIm2colWide_hook>::after(
    HookId, CUresult result, CUtensorMap* map, CUtensorMapDataType dataType, cuuint32_t rank, void* address,
    const cuuint64_t* globalDim, const cuuint64_t* globalStrides, int lowerCornerWidth, int upperCornerWidth,
    cuuint32_t channelsPerPixel, cuuint32_t pixelsPerColumn, const cuuint32_t* elementStrides,
    CUtensorMapInterleave interleave, CUtensorMapIm2ColWideMode mode, CUtensorMapSwizzle swizzle,
    CUtensorMapL2promotion l2Promotion, CUtensorMapFloatOOBfill oobFill) {
  recordTensorMap({.api = schema::TensorMapApi::IM2COL_WIDE,
                   .result = result,
                   .map = map,
                   .dataType = dataType,
                   .rank = rank,
                   .globalAddress = word(address),
                   .globalDim = globalDim,
                   .globalStrides = globalStrides,
                   .elementStrides = elementStrides,
                   .lowerCornerWidth = lowerCornerWidth,
                   .upperCornerWidth = upperCornerWidth,
                   .channelsPerPixel = channelsPerPixel,
                   .pixelsPerColumn = pixelsPerColumn,
                   .interleave = interleave,
                   .swizzle = swizzle,
                   .l2Promotion = l2Promotion,
                   .oobFill = oobFill,
                   .im2colWideMode = mode});
}

}  // namespace kcap