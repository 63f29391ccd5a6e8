// Memory and ordering: allocations and frees (kept in the AllocationMap that
// launches resolve pointers with), copies and memsets into device memory,
// stream and event operations, graph launches, API errors.
#include "record/recorder.h"

#include "hooks/nccl_calls.h"
#include "record/driver_api.h"
#include "record/written_readback.h"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

namespace kcap {
namespace {

AllocationKind mapKind(schema::AllocKind kind) {
  switch (kind) {
    case schema::AllocKind::MANAGED:
      return AllocationKind::kManaged;
    case schema::AllocKind::HOST_ALLOC:
    case schema::AllocKind::HOST_REGISTER:
      return AllocationKind::kHostMapped;
    case schema::AllocKind::VMM_MAP:
      return AllocationKind::kVmm;
    case schema::AllocKind::IPC_IMPORT:
      return AllocationKind::kImported;
    default:
      return AllocationKind::kDevice;
  }
}

// The size of the allocation `address` starts (cuIpcOpenMemHandle says
// only where it mapped one); 0 when the driver does not say.
uint64_t allocationSize(uint64_t address) {
  const auto query = driverApi().memGetAddressRange;
  CUdeviceptr base = 0;
  size_t size = 0;
  if (query == nullptr || query(&base, &size, address) != CUDA_SUCCESS || base != address) {
    return 0;
  }
  return size;
}

}  // namespace

void Recorder::allocated(const AllocCall& call) {
  if (call.result != CUDA_SUCCESS) {
    return;  // apiError has it
  }
  Operation operation(*this);
  if (!operation) {
    return;
  }
  int device = call.device >= 0 ? call.device : currentDevice();
  const bool byNccl = call.kind != schema::AllocKind::VMM_CREATE && call.kind != schema::AllocKind::VMM_IMPORT &&
                      call.kind != schema::AllocKind::VMM_RESERVE && madeByNccl();
  const uint64_t size =
      call.kind == schema::AllocKind::IPC_IMPORT && call.size == 0 ? allocationSize(call.address) : call.size;
  bool othersMemory = byNccl;  // NCCL's, or another process's: left out of checkpoints
  // An allocation node of the graph being captured: no memory until the
  // graph runs (each launch adds it to the map: graphMemoryChanged).
  const bool captured = (call.kind == schema::AllocKind::ASYNC || call.kind == schema::AllocKind::FROM_POOL) &&
                        streamCapturing(reinterpret_cast<CUstream>(call.stream));
  switch (call.kind) {
    case schema::AllocKind::VMM_RESERVE:
      allocations_.addReservation(call.address, call.size);
      break;
    case schema::AllocKind::VMM_CREATE:
    case schema::AllocKind::VMM_IMPORT: {
      std::unique_lock lock(vmmMutex_);
      vmmHandles_[call.handle] = {device, call.kind == schema::AllocKind::VMM_IMPORT};
      break;
    }
    case schema::AllocKind::VMM_MAP: {
      VmmHandle handle;
      {
        std::shared_lock lock(vmmMutex_);
        const auto it = vmmHandles_.find(call.handle);
        if (it != vmmHandles_.end()) handle = it->second;
      }
      device = handle.device;
      othersMemory = handle.imported;
      const auto reservation = allocations_.findReservation(call.address);
      allocations_.add({call.address, call.size, handle.imported ? AllocationKind::kImported : AllocationKind::kVmm,
                        device, reservation ? reservation->first : 0, byNccl});
      break;
    }
    default:
      (captured ? graphMemory_ : allocations_).add({call.address, size, mapKind(call.kind), device, 0, byNccl});
      break;
  }
  EventMessage message(*this);
  auto alloc = message.event().initAlloc();
  alloc.setKind(call.kind);
  alloc.setAddress(call.address);
  alloc.setSize(size);
  alloc.setPitch(call.pitch);
  alloc.setDevice(device);
  alloc.setContext(currentContext());
  alloc.setStream(call.stream);
  alloc.setHandle(call.handle);
  alloc.setOffset(call.offset);
  alloc.setFlags(call.flags);
  alloc.setResult(call.result);
  alloc.setByNccl(byNccl);
  alloc.setCaptured(captured);
  const bool later = !othersMemory && !captured && logInitialContent(call, size, alloc);
  const uint64_t seq = append(message);
  if (later) {
    const RelaxedCaptureMode relaxed;
    readback_->request({seq, 0}, reinterpret_cast<CUstream>(call.stream), {call.address, size});
  }
}

// Checkpoint mode: the content device memory allocated after the first
// checkpoint holds when the driver hands it over, which is whatever an
// earlier allocation left (the driver clears memory only when it first
// comes from the system). A later checkpoint hashes all of it, written or
// not, so re-execution must start from the same bytes: they are logged
// with the allocation (hashed on the device; pieces of zeros are not
// copied). Read on kcap's own non-blocking stream, never by a synchronous
// copy: a caching allocator grows its pool while the program captures into
// a graph (a graph's private pool), and a copy that waits on the legacy
// stream would invalidate that capture.
bool Recorder::logInitialContent(const AllocCall& call, uint64_t size, schema::Alloc::Builder alloc) {
  if (checkpoints_ == nullptr || !checkpointWritten_.load(std::memory_order_relaxed) || size == 0) return false;
  if (call.kind == schema::AllocKind::ASYNC || call.kind == schema::AllocKind::FROM_POOL) {
    return logPoolInitialContent(call, size, alloc);
  }
  const bool device = call.kind == schema::AllocKind::MEM_ALLOC || call.kind == schema::AllocKind::MEM_ALLOC_PITCH ||
                      call.kind == schema::AllocKind::VMM_MAP;
  if (!device) return false;
  const schema::MemoryKind kind =
      call.kind == schema::AllocKind::VMM_MAP ? schema::MemoryKind::VMM : schema::MemoryKind::ALLOCATION;
  const RelaxedCaptureMode relaxed;
  readInitialContent(call.address, size, kind, CUDA_SUCCESS, alloc);
  return false;
}

// `ready`: CUDA_SUCCESS once the memory may be read (else why not).
void Recorder::readInitialContent(uint64_t address, uint64_t size, schema::MemoryKind kind, CUresult ready,
                                  schema::Alloc::Builder alloc) {
  std::vector<TakenRange> taken(1);
  taken[0].range = {address, size, address, kind};
  const CUresult result = ready != CUDA_SUCCESS ? ready
                                                : snapshot(*writer_, staging_, taken[0].range, taken[0].content,
                                                           nullptr, options_.hashOnDevice, true);
  if (result != CUDA_SUCCESS) {
    char name[32];
    noteOnce(
        notedInitialContentFailed_, schema::Message::Level::WARNING,
        std::string("the first content of device memory allocated after the first checkpoint could not be read (") +
            resultName(result, name) + "): an interval that reads it before writing it will differ");
    return;
  }
  writeRanges(alloc.initInitial(1), taken);
}

// A stream-ordered allocation's memory is the program's only where its
// stream reaches the allocation: until then, work queued earlier may still
// use it. Its first content is read back on that stream without holding the
// program (WrittenReadback), unless re-execution rebuilds it (every byte
// freed to the pool since the last checkpoint: freed_pool_memory.h). One
// too large for the read-back's bound waits for the stream, then is read as
// a device allocation's. (One made while its stream captures into a graph
// is a node of that graph and holds nothing yet: allocated() leaves it out.)
bool Recorder::logPoolInitialContent(const AllocCall& call, uint64_t size, schema::Alloc::Builder alloc) {
  const auto stream = reinterpret_cast<CUstream>(call.stream);
  if (freedSinceCheckpoint_.covers(call.address, size)) return false;
  if (readback_ != nullptr && readback_->takes(size)) {  // (readsBackLater, the capture already asked)
    alloc.setInitialDeferred(true);
    return true;
  }
  const RelaxedCaptureMode relaxed;
  const DriverApi& api = driverApi();
  const CUresult ready = api.streamSynchronize == nullptr ? CUDA_ERROR_NOT_SUPPORTED : api.streamSynchronize(stream);
  readInitialContent(call.address, size, schema::MemoryKind::ALLOCATION, ready, alloc);
  return false;
}

Recorder::Released Recorder::releasing(schema::AllocKind kind, uint64_t address, uint64_t size, CUstream stream) {
  Operation operation(*this);
  if (!operation) {
    return {};
  }
  // A free node of the graph being captured: the memory stays until the
  // graph runs (graphMemoryChanged).
  if (kind == schema::AllocKind::ASYNC && streamCapturing(stream)) return {{}, true};
  switch (kind) {
    case schema::AllocKind::VMM_MAP:
      return {allocations_.removeRange(address, size)};
    case schema::AllocKind::VMM_RESERVE:
      allocations_.removeReservation(address);
      return {};
    case schema::AllocKind::VMM_CREATE:
      return {};
    default:
      if (auto removed = allocations_.remove(address)) {
        return {{*removed}};
      }
      return {};
  }
}

void Recorder::freed(const FreeCall& call, const Released& released) {
  Operation operation(*this);
  if (!operation) {
    return;
  }
  if (call.result != CUDA_SUCCESS) {
    for (const Allocation& allocation : released.allocations) {
      allocations_.add(allocation);  // still allocated after all
    }
    return;
  }
  schema::AllocKind kind = call.kind;
  uint64_t size = call.size;
  if (released.allocations.size() == 1) {
    size = released.allocations.front().size;
    if (kind == schema::AllocKind::MEM_ALLOC && released.allocations.front().kind == AllocationKind::kManaged) {
      kind = schema::AllocKind::MANAGED;
    }
  }
  if (kind == schema::AllocKind::VMM_CREATE) {
    std::unique_lock lock(vmmMutex_);
    vmmHandles_.erase(call.handle);
  }
  if (checkpoints_ != nullptr && (kind == schema::AllocKind::ASYNC || kind == schema::AllocKind::FROM_POOL)) {
    freedSinceCheckpoint_.freed(call.address, size);
  }
  EventMessage message(*this);
  auto free = message.event().initFree();
  free.setCaptured(released.captured);
  free.setKind(kind);
  free.setAddress(call.address);
  free.setSize(size);
  free.setStream(call.stream);
  free.setHandle(call.handle);
  free.setResult(call.result);
  append(message);
}

schema::CopyDirection Recorder::copyDirection(const CopyCall& call, const void*& hostSource) {
  if (call.direction != schema::CopyDirection::UNKNOWN || call.array) {
    return call.direction;
  }
  // cuMemcpy, or a unified side of a 2D/3D copy: unified addressing; which
  // side is the device's? Tracked allocations say; otherwise ask the
  // driver. Host bytes are read only when the source is known to be host
  // memory.
  const auto side = [&](uint64_t pointer) -> int {  // 1 device, 0 host, -1 unknown
    if (const auto allocation = allocations_.find(pointer)) {
      return allocation->kind == AllocationKind::kHostMapped ? 0 : 1;
    }
    const auto query = driverApi().pointerGetAttribute;
    if (query == nullptr) {
      return -1;
    }
    unsigned type = 0;
    const CUresult r = query(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, pointer);
    if (r == CUDA_ERROR_INVALID_VALUE) {
      return 0;  // not memory the driver knows: pageable host memory
    }
    if (r != CUDA_SUCCESS) {
      return -1;
    }
    return type == CU_MEMORYTYPE_HOST ? 0 : 1;
  };
  const int dst = side(call.dst);
  const int src = side(call.src);
  if (dst == 1 && src == 0) {
    hostSource = reinterpret_cast<const void*>(call.src);
    return schema::CopyDirection::HOST_TO_DEVICE;
  }
  if (dst == 0 && src == 1) {
    return schema::CopyDirection::DEVICE_TO_HOST;
  }
  if (dst == 1 && src == 1) {
    return schema::CopyDirection::DEVICE_TO_DEVICE;
  }
  if (dst == 0 && src == 0) {
    return schema::CopyDirection::HOST_TO_HOST;
  }
  return schema::CopyDirection::UNKNOWN;
}

void writeCopyShape(schema::Memcpy::Builder copy, const CopyCall& call, schema::CopyDirection direction) {
  copy.setDirection(direction);
  const bool toDevice =
      direction == schema::CopyDirection::HOST_TO_DEVICE || direction == schema::CopyDirection::DEVICE_TO_DEVICE;
  const bool fromDevice =
      direction == schema::CopyDirection::DEVICE_TO_HOST || direction == schema::CopyDirection::DEVICE_TO_DEVICE;
  const bool unknown = direction == schema::CopyDirection::UNKNOWN;
  copy.setDst(toDevice || unknown ? call.dst : 0);
  copy.setSrc(fromDevice || unknown ? call.src : 0);
  copy.setSize(call.size);
  copy.setStream(call.stream);
  copy.setIsAsync(call.isAsync);
  copy.setResult(call.result);
  copy.setWidth(call.width);
  copy.setHeight(call.height);
  copy.setDstPitch(call.dstPitch);
  copy.setSrcPitch(call.srcPitch);
  copy.setDepth(call.depth);
  copy.setDstHeight(call.dstHeight);
  copy.setSrcHeight(call.srcHeight);
}

// The device a device address lies on: the tracked allocation's, else the
// driver's answer; -1 when neither says.
int Recorder::deviceOfAddress(uint64_t address) {
  if (const auto allocation = allocations_.find(address); allocation && allocation->device >= 0) {
    return allocation->device;
  }
  const auto query = driverApi().pointerGetAttribute;
  int ordinal = -1;
  if (query == nullptr || query(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, address) != CUDA_SUCCESS) {
    return -1;
  }
  return ordinal;
}

// What a copy from another device wrote (`written`: its destination, as the
// trace holds it), once it is done: the source is memory a replay of this
// device's work does not hold. The copy's stream is waited for (a
// synchronous device-to-device copy too may return before it is done); not
// while the stream captures into a graph, where nothing ran.
void Recorder::storeCrossDeviceWrite(uint64_t stream, const WrittenReadback::Region& written,
                                     schema::Memcpy::Builder copy) {
  const auto waitFor = reinterpret_cast<CUstream>(stream);
  if (streamCapturing(waitFor)) {
    return;
  }
  const RelaxedCaptureMode relaxed;
  const DriverApi& api = driverApi();
  if (api.streamSynchronize == nullptr || api.streamSynchronize(waitFor) != CUDA_SUCCESS) {
    return;
  }
  if (written.width == 0) {
    StoredContent stored;
    if (storeWritten(written.address, written.size, stored) == CUDA_SUCCESS) stored.writeTo(copy.initData());
    return;
  }
  // A 2D or 3D copy's rows: one 3D copy from the device into host memory.
  if (api.memcpy3D == nullptr) return;
  std::vector<uint8_t> packed(written.size);
  const CUDA_MEMCPY3D rows = packedRowsCopy(written, packed.data());
  if (api.memcpy3D(&rows) == CUDA_SUCCESS) writer_->storeContent(packed.data(), packed.size(), copy.initData());
}

// Device memory another agent wrote (a copy from another device, an NCCL
// call), read back once that write is done and stored in the trace.
CUresult Recorder::storeWritten(uint64_t address, uint64_t size, StoredContent& out) {
  const auto allocation = allocations_.findExtent(address);
  const SnapshotRange range{address, size, allocation ? allocation->base : 0,
                            allocation ? memoryKind(allocation->kind) : schema::MemoryKind::UNKNOWN};
  return snapshot(*writer_, staging_, range, out, nullptr, false);
}

namespace {

// What a cross-device copy wrote, as the trace holds it: `size` bytes at
// dst, or a 2D/3D copy's destination rows, packed (Memcpy.data). False
// when the rows' shape does not add up to the copy's size.
bool crossDeviceRegion(const CopyCall& call, WrittenReadback::Region& region) {
  region = {call.dst, call.size};
  if (call.width == 0) return true;
  const uint64_t rows = std::max<uint64_t>(call.height, 1), slices = std::max<uint64_t>(call.depth, 1);
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(call.width, rows, &bytes) || __builtin_mul_overflow(bytes, slices, &bytes) ||
      bytes != call.size) {
    return false;
  }
  region.width = call.width;
  region.pitch = call.dstPitch;
  region.sliceRows = call.dstHeight != 0 ? call.dstHeight : rows;
  region.rows = rows;
  region.slices = slices;
  return true;
}

}  // namespace

void Recorder::copied(const CopyCall& call, const void* hostSource) {
  if (call.result != CUDA_SUCCESS) {
    return;
  }
  Operation operation(*this);
  if (!operation) {
    return;
  }
  if (call.isAsync) {
    streamUsed(reinterpret_cast<CUstream>(call.stream));
  }
  const schema::CopyDirection direction = copyDirection(call, hostSource);
  EventMessage message(*this);
  auto copy = message.event().initMemcpy();
  writeCopyShape(copy, call, direction);
  // (Only an async call can be captured: a synchronous one on a capturing stream fails.)
  copy.setCaptured(call.isAsync && streamCapturing(reinterpret_cast<CUstream>(call.stream)));
  if (direction == schema::CopyDirection::HOST_TO_DEVICE && hostSource != nullptr && call.size != 0 &&
      options_.mode != CaptureMode::kMetadata) {
    std::vector<uint8_t> packed;
    writer_->storeContent(packHostRows(hostSource, hostRowsOf(call), packed), call.size, copy.initData());
  }
  bool later = false;
  WrittenReadback::Region written;
  if (direction == schema::CopyDirection::DEVICE_TO_DEVICE && call.size != 0) {
    const int dstDevice = deviceOfAddress(call.dst);
    const int srcDevice = deviceOfAddress(call.src);
    if (dstDevice >= 0 && srcDevice >= 0 && dstDevice != srcDevice) {
      copy.setCrossDevice(true);
      // Checkpoint mode reads the bytes back without waiting for the
      // copy; full mode waits.
      const bool shaped = crossDeviceRegion(call, written);
      later = shaped && readsBackLater(call.stream, call.size);
      if (later) {
        copy.setDataDeferred(true);
      } else if (shaped && options_.mode != CaptureMode::kMetadata) {
        storeCrossDeviceWrite(call.stream, written, copy);
      }
    }
  }
  const uint64_t seq = append(message);
  if (later) {
    const RelaxedCaptureMode relaxed;
    readback_->request({seq, 0}, reinterpret_cast<CUstream>(call.stream), written);
  }
}

void Recorder::memset(const SetCall& call) {
  if (call.result != CUDA_SUCCESS) {
    return;
  }
  Operation operation(*this);
  if (!operation) {
    return;
  }
  if (call.isAsync) {
    streamUsed(reinterpret_cast<CUstream>(call.stream));
  }
  EventMessage message(*this);
  auto set = message.event().initMemset();
  set.setDst(call.dst);
  set.setValue(call.value);
  set.setElementSize(call.elementSize);
  set.setCount(call.count);
  set.setHeight(call.height);
  set.setPitch(call.pitch);
  set.setStream(call.stream);
  set.setIsAsync(call.isAsync);
  set.setResult(call.result);
  set.setCaptured(call.isAsync && streamCapturing(reinterpret_cast<CUstream>(call.stream)));
  append(message);
}

void Recorder::synchronized(const SyncCall& call) {
  Operation operation(*this);
  if (!operation) {
    return;
  }
  if (call.kind == schema::SyncKind::STREAM_DESTROY && call.result == CUDA_SUCCESS) {
    streamDestroyed(reinterpret_cast<CUstream>(call.stream));
  }
  if (call.kind == schema::SyncKind::STREAM_BEGIN_CAPTURE && call.result == CUDA_SUCCESS) {
    activeCaptures_.fetch_add(1);
  } else if (call.kind == schema::SyncKind::STREAM_END_CAPTURE) {
    // The capture is over whatever the result (an invalidated capture
    // ends too); never below zero if the begin was not seen.
    int count = activeCaptures_.load();
    while (count > 0 && !activeCaptures_.compare_exchange_weak(count, count - 1)) {}
  }
  EventMessage message(*this);
  auto sync = message.event().initSync();
  sync.setOp(call.kind);
  sync.setStream(call.stream);
  sync.setEvent(call.event);
  sync.setFlags(call.flags);
  sync.setPriority(call.priority);
  sync.setResult(call.result);
  append(message);
}

void Recorder::tensorMapEncoded(const TensorMapEncodeCall& call) {
  Operation operation(*this);
  if (!operation) {
    return;
  }
  constexpr uint32_t kMaxRank = 5;  // the driver's limit: no more entries are read
  const uint32_t rank = call.rank <= kMaxRank ? call.rank : 0;
  const bool im2col = call.api != schema::TensorMapApi::TILED;
  EventMessage message(*this);
  auto encode = message.event().initTensorMapEncode();
  encode.setApi(call.api);
  encode.setDataType(call.dataType);
  encode.setRank(call.rank);
  encode.setGlobalAddress(call.globalAddress);
  const auto copy = [](auto list, const auto* from, uint32_t count) {
    for (uint32_t i = 0; i < count; ++i) {
      list.set(i, from[i]);
    }
  };
  if (call.globalDim != nullptr) {
    copy(encode.initGlobalDim(rank), call.globalDim, rank);
  }
  if (call.globalStrides != nullptr && rank > 1) {
    copy(encode.initGlobalStrides(rank - 1), call.globalStrides, rank - 1);
  }
  if (!im2col && call.boxDim != nullptr) {
    copy(encode.initBoxDim(rank), call.boxDim, rank);
  }
  if (call.elementStrides != nullptr) {
    copy(encode.initElementStrides(rank), call.elementStrides, rank);
  }
  if (call.api == schema::TensorMapApi::IM2COL && rank > 2) {
    if (call.lowerCorner != nullptr) {
      copy(encode.initPixelBoxLowerCorner(rank - 2), call.lowerCorner, rank - 2);
    }
    if (call.upperCorner != nullptr) {
      copy(encode.initPixelBoxUpperCorner(rank - 2), call.upperCorner, rank - 2);
    }
  }
  encode.setPixelBoxLowerCornerWidth(call.lowerCornerWidth);
  encode.setPixelBoxUpperCornerWidth(call.upperCornerWidth);
  encode.setChannelsPerPixel(call.channelsPerPixel);
  encode.setPixelsPerColumn(call.pixelsPerColumn);
  encode.setInterleave(call.interleave);
  encode.setSwizzle(call.swizzle);
  encode.setL2Promotion(call.l2Promotion);
  encode.setOobFill(call.oobFill);
  encode.setIm2colWideMode(call.im2colWideMode);
  encode.setResult(call.result);
  if (call.result == CUDA_SUCCESS && call.map != nullptr) {
    tensorMaps_.add(call.map->opaque);
    encode.setMap(capnp::Data::Reader(reinterpret_cast<const kj::byte*>(call.map->opaque), sizeof call.map->opaque));
  }
  append(message);
}

void Recorder::apiError(HookId id, CUresult result) {
  {
    Operation operation(*this);
    if (!operation) {
      return;
    }
    EventMessage message(*this);
    auto error = message.event().initApiError();
    error.setFunction(spec(id).symbol.data());
    error.setResult(result);
    char buffer[32];
    error.setResultName(resultName(result, buffer));
    append(message);
  }
  // Out of the operation: firing ends the recording, which waits for them.
  if (ring_ != nullptr) {
    apiErrorTrigger(id, result);
  }
}

}  // namespace kcap
