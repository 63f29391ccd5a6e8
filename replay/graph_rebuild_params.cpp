// The parameters of a rebuilt graph's nodes: recorded addresses relocated
// (the graph's own allocations first, then the replay's placed memory), a
// copy from host memory fed from the bytes the launch recorded for it, and
// conditional handles replaced by the ones made here. Every size and offset
// from the trace is checked in 64 bits.
#include <algorithm>
#include <cstring>

#include "graph_rebuild.h"

namespace kcap::replay {

std::optional<uint64_t> RebuiltGraph::translate(uint64_t recorded) const {
  auto it = allocations_.upper_bound(recorded);
  if (it != allocations_.begin()) {
    --it;
    const auto [size, replay] = it->second;
    if (recorded - it->first < size) return replay + (recorded - it->first);
  }
  return context_.translate(recorded);
}

// The replay address of [recorded, recorded + extent) when all of it lies in
// one placed range (so that nothing the node touches falls outside it).
std::optional<uint64_t> RebuiltGraph::translateExtent(uint64_t recorded, uint64_t extent) const {
  const auto first = translate(recorded);
  if (!first || extent == 0) return first;
  uint64_t last = 0;
  if (__builtin_add_overflow(recorded, extent - 1, &last)) return std::nullopt;
  const auto lastPlaced = translate(last);
  if (!lastPlaced || *lastPlaced != *first + (extent - 1)) return std::nullopt;
  return first;
}

// The bytes the launch holds for a copy node (GraphLaunch.hostCopies).
std::optional<schema::GraphHostCopy::Reader> RebuiltGraph::launchBytesOf(const GraphNodeRun& node) const {
  for (const auto hostCopy : run_.launch->event().getHostCopies()) {
    if (std::find(node.handles.begin(), node.handles.end(), hostCopy.getNode()) != node.handles.end()) return hostCopy;
  }
  return std::nullopt;
}

// kcap's copy after an NCCL call: what the call wrote at this launch, read
// back then, written where the call wrote it (the copy's source).
CUDA_MEMCPY3D RebuiltGraph::writtenCopyOf(const GraphNodeRun& node) {
  const auto copy = node.params.getMemcpy();
  const std::string what = node.path + " (kcap's copy of what the NCCL call before it wrote)";
  const auto found = launchBytesOf(node);
  if (!found || found->getMissing().size() != 0) {
    throw NotReplayable(what + ": the trace holds no bytes of it for this launch" +
                        (found ? " (" + std::string(found->getMissing().cStr()) + ")" : std::string()));
  }
  const uint64_t size = copy.getSize();
  const auto data = found->getData();
  // One row: kcap captures a 1D copy.
  if ((copy.getWidth() != 0 && copy.getWidth() != size) || data.getSize() != size) {
    throw ReplayError(what + ": the launch read back " + std::to_string(data.getSize()) + " bytes for a copy of " +
                      std::to_string(size) + " (a damaged trace?)");
  }
  const auto dst = translateExtent(copy.getSrc(), size);
  if (!dst) throw ReplayError(what + ": where the call wrote has no place in this replay");
  uint8_t* buffer = pinned(size);
  context_.reader->readContentInto(data, buffer, size);
  CUDA_MEMCPY3D p{};
  p.WidthInBytes = size;
  p.Height = 1;
  p.Depth = 1;
  p.srcMemoryType = CU_MEMORYTYPE_HOST;
  p.srcHost = buffer;
  p.srcPitch = size;
  p.srcHeight = 1;
  p.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  p.dstDevice = *dst;
  p.dstPitch = size;
  p.dstHeight = 1;
  return p;
}

CUDA_MEMCPY3D RebuiltGraph::copyOf(const GraphNodeRun& node) {
  if (node.params.getWrittenReadBack()) return writtenCopyOf(node);
  const auto copy = node.params.getMemcpy();
  const std::string what = node.path + " (memcpy)";
  const auto direction = copy.getDirection();
  if (direction == schema::CopyDirection::UNKNOWN) {
    throw NotReplayable(what + ": a copy to or from a CUDA array, or between memory kcap could not tell");
  }
  const bool srcHost =
      direction == schema::CopyDirection::HOST_TO_DEVICE || direction == schema::CopyDirection::HOST_TO_HOST;
  const bool dstHost =
      direction == schema::CopyDirection::DEVICE_TO_HOST || direction == schema::CopyDirection::HOST_TO_HOST;

  // The shape: 1D copies as one row of `size` bytes.
  uint64_t width = copy.getSize(), rows = 1, slices = 1;
  uint64_t dstExtent = width, srcExtent = width;
  uint64_t dstPitch = width, srcPitch = width, dstHeight = 1, srcHeight = 1;
  if (copy.getWidth() != 0) {
    const auto shape = copyRows(copy);
    if (!shape) throw ReplayError(what + " has rows past the end of the address space (a damaged trace?)");
    width = shape->width, rows = shape->rows, slices = shape->slices;
    dstPitch = shape->dstPitch, srcPitch = shape->srcPitch;
    dstHeight = copy.getDstHeight() != 0 ? copy.getDstHeight() : rows;
    srcHeight = copy.getSrcHeight() != 0 ? copy.getSrcHeight() : rows;
    // copyRows checked that these sums do not wrap.
    dstExtent = rows == 0 ? 0 : (slices - 1) * shape->dstSlicePitch + (rows - 1) * dstPitch + width;
    srcExtent = rows == 0 ? 0 : (slices - 1) * shape->srcSlicePitch + (rows - 1) * srcPitch + width;
  }
  uint64_t packed = 0;
  if (__builtin_mul_overflow(width, rows, &packed) || __builtin_mul_overflow(packed, slices, &packed)) {
    throw ReplayError(what + ": its size overflows (a damaged trace?)");
  }

  CUDA_MEMCPY3D p{};
  p.WidthInBytes = width;
  p.Height = rows;
  p.Depth = slices;
  if (srcHost) {
    const auto found = launchBytesOf(node);
    if (!found) {
      throw NotReplayable(what +
                          " copies from host memory, and the trace holds no bytes of it for this launch "
                          "(GraphLaunch.hostCopies: recorded in full and checkpoint modes)");
    }
    const auto data = found->getData();
    if (data.getSize() != packed) {
      throw ReplayError(what + ": the launch recorded " + std::to_string(data.getSize()) +
                        " bytes of its host source for a copy of " + std::to_string(packed));
    }
    uint8_t* buffer = pinned(packed);
    context_.reader->readContentInto(data, buffer, packed);
    p.srcMemoryType = CU_MEMORYTYPE_HOST;
    p.srcHost = buffer;
    p.srcPitch = width;
    p.srcHeight = rows;
  } else {
    const auto src = translateExtent(copy.getSrc(), srcExtent);
    if (!src) throw ReplayError(what + ": its source has no place in this replay");
    p.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    p.srcDevice = *src;
    p.srcPitch = srcPitch;
    p.srcHeight = srcHeight;
  }
  if (dstHost) {
    // Host memory of the recorded process: the bytes land in a buffer here.
    p.dstMemoryType = CU_MEMORYTYPE_HOST;
    p.dstHost = pinned(packed);
    p.dstPitch = width;
    p.dstHeight = rows;
  } else {
    const auto dst = translateExtent(copy.getDst(), dstExtent);
    if (!dst) throw ReplayError(what + ": its destination has no place in this replay");
    p.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    p.dstDevice = *dst;
    p.dstPitch = dstPitch;
    p.dstHeight = dstHeight;
  }
  return p;
}

CUDA_MEMSET_NODE_PARAMS RebuiltGraph::memsetOf(const GraphNodeRun& node) const {
  const auto set = node.params.getMemset();
  const std::string what = node.path + " (memset)";
  const uint32_t element = set.getElementSize();
  if (element != 1 && element != 2 && element != 4) {
    throw ReplayError(what + ": an element size of " + std::to_string(element) + " bytes (1, 2 or 4)");
  }
  const uint64_t rows = std::max<uint64_t>(set.getHeight(), 1);
  uint64_t rowBytes = 0, extent = 0;
  if (__builtin_mul_overflow(set.getCount(), element, &rowBytes) ||
      (rows > 1 && (__builtin_mul_overflow(rows - 1, set.getPitch(), &extent) ||
                    __builtin_add_overflow(extent, rowBytes, &extent)))) {
    throw ReplayError(what + ": its extent overflows (a damaged trace?)");
  }
  if (rows == 1) extent = rowBytes;
  const auto dst = translateExtent(set.getDst(), extent);
  if (!dst) throw ReplayError(what + ": its destination has no place in this replay");
  CUDA_MEMSET_NODE_PARAMS p{};
  p.dst = *dst;
  p.pitch = rows > 1 ? set.getPitch() : rowBytes;
  p.value = set.getValue();
  p.elementSize = element;
  p.width = set.getCount();
  p.height = rows;
  return p;
}

KernelNodeCode RebuiltGraph::kernelOf(const GraphNodeRun& node) const {
  KernelNodeCode code = context_.kernel(node);
  const auto e = node.params.getKernel();
  const auto recorded = e.getParams();
  std::vector<uint8_t>& params = code.params;
  // Pointer words into the graph's own allocations: the replay placed no
  // memory there, the allocation nodes made it elsewhere.
  for (const auto word : e.getPointers()) {
    const uint64_t offset = word.getOffset();
    if (word.getInTensorMap() || offset > params.size() || params.size() - offset < 8) continue;
    auto it = allocations_.upper_bound(word.getValue());
    if (it == allocations_.begin()) continue;
    --it;
    if (word.getValue() - it->first >= it->second.first) continue;
    const uint64_t moved = it->second.second + (word.getValue() - it->first);
    std::memcpy(params.data() + offset, &moved, sizeof moved);
  }
  // Conditional handles (cudaGraphSetConditional's argument): an 8-byte
  // parameter slot holding a recorded one holds the one made here.
  if (!conditionals_.empty()) {
    for (uint64_t offset = 0; offset + 8 <= recorded.size() && offset + 8 <= params.size(); offset += 8) {
      uint64_t value = 0;
      std::memcpy(&value, recorded.begin() + offset, sizeof value);
      if (const auto it = conditionals_.find(value); it != conditionals_.end()) {
        const uint64_t handle = it->second;
        std::memcpy(params.data() + offset, &handle, sizeof handle);
      }
    }
  }
  return code;
}

}  // namespace kcap::replay
