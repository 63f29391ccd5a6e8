// The Replayer's memory side: restoring a launch's recorded pre-state (large
// contents in windows through page-locked buffers, so that a snapshot of any
// size is never held whole), and the copies and memsets recorded between
// launches, applied on the replay stream.
#include "replayer.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <set>

#include "driver.h"
#include "hex_text.h"
#include "piece_hashes.h"

namespace kcap::replay {

// Restores the launch's recorded pre-state: every range, or with
// `restoredBefore` (sequences) only ranges not in it, which it adds.
void Replayer::restore(const LaunchRecord& launch, const LoadedKernel& kernel, RestoreStats& stats,
                       std::set<uint64_t>* restoredBefore) {
  restoreRanges(launch.event().getPre(), kernel, stats, restoredBefore);
  // Pointers stored inside buffers: rewritten where their target moved.
  for (const auto p : launch.event().getIndirectPointers()) {
    uint64_t at = 0;
    if (__builtin_add_overflow(p.getBufferAddress(), p.getOffset(), &at) || at > UINT64_MAX - 7) continue;
    const auto where = translate(at, kernel);
    const auto value = translate(p.getValue(), kernel);
    // The whole word must lie in one placed range, so that writing it
    // cannot reach past that range's end.
    const auto last = translate(at + 7, kernel);
    if (where && value && last && *last == *where + 7 && *value != p.getValue()) {
      uint64_t word = *value;
      copyToDevice(*where, reinterpret_cast<const uint8_t*>(&word), sizeof word);
    }
  }
}

// Recorded ranges (a launch's or a graph launch's pre-state) restored at
// their places; with `restoredBefore`, only ranges not in it, which it adds.
void Replayer::restoreRanges(capnp::List<schema::MemoryRange>::Reader ranges, const LoadedKernel& kernel,
                             RestoreStats& stats, std::set<uint64_t>* restoredBefore) {
  for (const auto range : ranges) {
    const uint64_t address = range.getAddress();
    if (restoredBefore != nullptr && !restoredBefore->insert(address).second) continue;
    const auto content = range.getContent();
    const auto dst = translate(address, kernel);
    if (!dst) {
      throw ReplayError("recorded range at " + std::to_string(address) + " has no place in this replay");
    }
    restoreContent(content, *dst, stats);
    stats.bytes += content.getSize();
  }
}

// Pieces [first, first + count) of `content` as a Content of their own (in
// `message`): the same pieces, a shorter run.
schema::Content::Reader contentPart(capnp::MallocMessageBuilder& message, schema::Content::Reader content,
                                    uint64_t first, uint64_t count) {
  const uint64_t pieceSize = content.getPieceSize();
  const uint64_t size = content.getSize();
  const auto pieces = content.getPieces();
  // The trace's own numbers: checked before any piece is picked by index.
  const uint64_t whole = pieceSize == 0 ? 0 : size / pieceSize + (size % pieceSize != 0);
  if (pieceSize == 0 || pieces.size() != whole || first > whole || count > whole - first) {
    throw ReplayError("a recorded range of " + std::to_string(size) + " bytes lists " + std::to_string(pieces.size()) +
                      " pieces of " + std::to_string(pieceSize) + " bytes");
  }
  auto part = message.initRoot<schema::Content>();
  part.setSize(std::min(count * pieceSize, size - first * pieceSize));
  part.setPieceSize(static_cast<uint32_t>(pieceSize));
  auto list = part.initPieces(static_cast<unsigned>(count));
  for (uint64_t i = 0; i < count; ++i)
    list.setWithCaveats(static_cast<unsigned>(i), pieces[static_cast<unsigned>(first + i)]);
  return part.asReader();
}

// A content of more than one piece, where the GPU can hash (piece_hashes.h),
// is restored by difference: the pieces the device already holds (memory
// left by the launch before, zeros of fresh memory) stay, and only the rest
// are copied. Otherwise every byte is copied: large contents in 32 MiB
// windows of whole pieces through a ring of page-locked buffers, decoding
// window k+1 (checking and decompressing the trace's pieces, on the reader's
// threads) while window k is copied to the GPU; a copy that runs late delays
// the decoding only once every buffer is waiting for one. Pinned memory stays
// at kRestoreWindows * kRestoreWindow.
void Replayer::restoreContent(schema::Content::Reader content, CUdeviceptr dst, RestoreStats& stats) {
  const uint64_t size = content.getSize();
  const uint64_t pieceSize = content.getPieceSize();
  if (pieceSize <= kRestoreWindow && hasher_->suits(dst, size, pieceSize)) {
    const std::vector<bool> differs = hasher_->differing(dst, content);
    uint64_t window = 0;
    for (uint64_t i = 0; i < differs.size();) {
      if (!differs[i]) {
        ++i;
        continue;
      }
      uint64_t end = i + 1;
      while (end < differs.size() && differs[end]) ++end;
      uploadPieces(content, dst, i, end - i, window, stats);
      i = end;
    }
    waitForUploads(stats);
    return;
  }
  if (!throughWindows(content)) {
    uint8_t* buffer = staging(size);
    reader_.readContentInto(content, buffer, size);
    const auto start = std::chrono::steady_clock::now();
    copyToDevice(dst, buffer, size);
    stats.waitNs += nsSince(start);
    stats.uploadedBytes += size;
    return;
  }
  uint64_t window = 0;
  uploadPieces(content, dst, 0, content.getPieces().size(), window, stats);
  waitForUploads(stats);
}

// Pieces [first, first + count) copied to their place through the windows;
// `window` counts the windows used so far (the ring's position). The copies
// are queued: waitForUploads() waits for them.
void Replayer::uploadPieces(schema::Content::Reader content, CUdeviceptr dst, uint64_t first, uint64_t count,
                            uint64_t& window, RestoreStats& stats) {
  const uint64_t pieceSize = content.getPieceSize();
  const uint64_t piecesPerWindow = kRestoreWindow / pieceSize;
  allocateWindows();
  for (uint64_t at = first; at < first + count; at += piecesPerWindow, ++window) {
    const uint64_t pieces = std::min(piecesPerWindow, first + count - at);
    capnp::MallocMessageBuilder message;
    const auto part = contentPart(message, content, at, pieces);
    const uint64_t bytes = part.getSize();
    const size_t slot = window % kRestoreWindows;
    if (window >= kRestoreWindows) {
      const auto start = std::chrono::steady_clock::now();
      check(driver_.cuEventSynchronize(windowDone_[slot]), "waiting for a restore copy");
      stats.waitNs += nsSince(start);
    }
    reader_.readContentInto(part, windows_[slot], bytes);
    check(driver_.cuMemcpyHtoDAsync(dst + at * pieceSize, windows_[slot], bytes, stream_),
          "restoring a window of memory");
    check(driver_.cuEventRecord(windowDone_[slot], stream_), "cuEventRecord");
    stats.uploadedBytes += bytes;
  }
}

void Replayer::waitForUploads(RestoreStats& stats) {
  const auto start = std::chrono::steady_clock::now();
  check(driver_.cuStreamSynchronize(stream_), "restoring memory");
  stats.waitNs += nsSince(start);
}

// Contents over a window that are split into pieces go through the
// page-locked windows; the rest through one staging buffer.
bool Replayer::throughWindows(schema::Content::Reader content) {
  return content.getSize() > kRestoreWindow && content.getPieceSize() != 0 && content.getPieceSize() <= kRestoreWindow;
}

void Replayer::allocateWindows() {
  for (auto& buffer : windows_) {
    if (buffer == nullptr) {
      void* p = nullptr;
      check(driver_.cuMemAllocHost(&p, kRestoreWindow), "cuMemAllocHost");
      buffer = static_cast<uint8_t*>(p);
    }
  }
  for (auto& event : windowDone_) {
    if (event == nullptr) check(driver_.cuEventCreate(&event, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
  }
}

// Page-locked buffers take milliseconds to allocate: done while placing the
// memory, so that the restore's time is the restore's.
void Replayer::allocateRestoreBuffers(const LaunchRecord& launch) { allocateRestoreBuffers(launch.event().getPre()); }

void Replayer::allocateRestoreBuffers(capnp::List<schema::MemoryRange>::Reader ranges) {
  uint64_t largestSmall = 0;
  bool large = false;
  for (const auto range : ranges) {
    const auto content = range.getContent();
    if (throughWindows(content)) {
      large = true;
    } else {
      largestSmall = std::max(largestSmall, content.getSize());
    }
  }
  staging(largestSmall);
  if (large) allocateWindows();
}

// Device-side copies and memsets go on the replay stream, and the stream is
// drained before returning: the stream does not wait for the legacy default
// stream (it is non-blocking), and a host-to-device copy from the staging
// buffer next must not overtake them.
void Replayer::applyMemoryOp(const StoredEvent& op) {
  applyMemoryOpOnStream(op);
  check(driver_.cuStreamSynchronize(stream_), "waiting for a recorded copy or memset");
}

// Writes a content the trace holds (a copy's or an NCCL call's bytes) at dst,
// through the staging buffer.
void Replayer::writeContent(CUdeviceptr dst, schema::Content::Reader data) {
  if (data.getSize() == 0) return;
  uint8_t* buffer = staging(data.getSize());
  reader_.readContentInto(data, buffer, data.getSize());
  copyToDevice(dst, buffer, data.getSize());
}

// Issues the op on the replay stream; the caller waits for the stream before
// the staging buffer is used again.
void Replayer::applyMemoryOpOnStream(const StoredEvent& op) {
  const auto event = op.get();
  const LoadedKernel& globals = opGlobals_;  // none but when re-executing
  if (event.isMemcpy()) {
    const auto copy = event.getMemcpy();
    if (copy.getResult() != 0) return;
    if (copy.getWidth() != 0) {
      applyCopyRows(op);
      return;
    }
    const bool deviceToDevice =
        copy.getDirection() == schema::CopyDirection::DEVICE_TO_DEVICE && copy.getData().getSize() == 0;
    const auto dst =
        writeTarget(op, copy.getDst(), deviceToDevice ? copy.getSize() : copy.getData().getSize(), globals);
    if (!dst) return;  // into memory no replayed launch reaches
    if (deviceToDevice) {
      if (const auto src = writeTarget(op, copy.getSrc(), copy.getSize(), globals, true)) {
        check(driver_.cuMemcpyDtoDAsync(*dst, *src, copy.getSize(), stream_),
              "replaying a recorded device-to-device copy");
      }
      return;
    }
    writeContent(*dst, copy.getData());
  } else if (event.isAlloc()) {
    // What the allocation held when the driver handed it over (checkpoint
    // mode), one range at a time through the staging buffer.
    const auto alloc = event.getAlloc();
    for (const auto range : alloc.getInitial()) {
      const uint64_t offset = range.getAddress() - alloc.getAddress(), size = range.getContent().getSize();
      if (range.getAddress() < alloc.getAddress() || offset > alloc.getSize() || size > alloc.getSize() - offset) {
        throw ReplayError("the trace is malformed at event #" + std::to_string(op.seq()) + ": the first content (" +
                          std::to_string(size) + " bytes at " + hexText(range.getAddress()) +
                          ") lies outside the allocation (" + std::to_string(alloc.getSize()) + " bytes at " +
                          hexText(alloc.getAddress()) + ")");
      }
      const auto dst = writeTarget(op, range.getAddress(), size, globals);
      if (!dst) continue;  // memory no re-executed launch reaches
      writeContent(*dst, range.getContent());
      check(driver_.cuStreamSynchronize(stream_), "waiting for an allocation's first content");
    }
  } else if (event.isCollective()) {
    // What an NCCL call wrote on this rank, logged: its kernels are not run.
    const auto collective = event.getCollective();
    if (collective.getResult() != 0) return;
    if (const auto dst = writeTarget(op, collective.getRecvBuffer(), collective.getData().getSize(), globals)) {
      writeContent(*dst, collective.getData());
    }
  } else if (event.isMemset()) {
    const auto set = event.getMemset();
    if (set.getResult() != 0) return;
    // 1D memsets are recorded with height 1 and pitch 0; a 2D one of 0 rows
    // sets nothing. Each row is translated on its own (rows may fall in
    // memory no launch reaches), and must stay inside the memory it starts in.
    const uint64_t rows = set.getPitch() == 0 ? 1 : set.getHeight();
    const uint64_t elementBytes = set.getElementSize() == 1 || set.getElementSize() == 2 ? set.getElementSize() : 4;
    uint64_t rowBytes = 0;
    if (__builtin_mul_overflow(set.getCount(), elementBytes, &rowBytes) || (rows > 1 && set.getPitch() < rowBytes)) {
      throw ReplayError("the trace is malformed at event #" + std::to_string(op.seq()) + ": a memset of " +
                        std::to_string(set.getCount()) + " elements a row with a pitch of " +
                        std::to_string(set.getPitch()) + " bytes");
    }
    for (uint64_t row = 0; row < rows; ++row) {
      uint64_t at = 0;
      if (__builtin_mul_overflow(row, set.getPitch(), &at) || __builtin_add_overflow(set.getDst(), at, &at)) break;
      const auto dst = writeTarget(op, at, rowBytes, globals);
      if (!dst) continue;
      switch (set.getElementSize()) {
        case 1:
          check(driver_.cuMemsetD8Async(*dst, static_cast<unsigned char>(set.getValue()), set.getCount(), stream_),
                "memset");
          break;
        case 2:
          check(driver_.cuMemsetD16Async(*dst, static_cast<unsigned short>(set.getValue()), set.getCount(), stream_),
                "memset");
          break;
        default:
          check(driver_.cuMemsetD32Async(*dst, set.getValue(), set.getCount(), stream_), "memset");
          break;
      }
    }
  }
}

// A recorded 2D or 3D copy, row by row: row y of slice z goes to dst +
// dstAt(y, z), from the packed rows the trace holds (host to device) or from
// src + srcAt(y, z) (device to device). Each row is translated on its own, as
// the memset rows are.
void Replayer::applyCopyRows(const StoredEvent& op) {
  const auto copy = op.get().getMemcpy();
  const LoadedKernel& globals = opGlobals_;  // none but when re-executing
  const std::string what =
      std::string(copy.getDepth() != 0 ? "the 3D copy" : "the 2D copy") + " at event #" + std::to_string(op.seq());
  if (copy.getDirection() == schema::CopyDirection::UNKNOWN && (copy.getDst() == 0 || copy.getSrc() == 0)) {
    // A CUDA array on one side: recorded without data, and replay holds no
    // arrays. Harmless only when it writes memory no replayed launch reaches.
    if (copy.getDst() != 0 && !translate(copy.getDst(), globals)) return;
    throw ReplayError(what + " is to or from a CUDA array, recorded without its data: replay cannot re-apply it");
  }
  const auto shape = copyRows(copy);
  if (!shape) throw ReplayError(what + " has rows past the end of the address space (a damaged trace?)");
  const CopyRows& r = *shape;
  const auto data = copy.getData();
  if (copy.getDirection() == schema::CopyDirection::DEVICE_TO_DEVICE && data.getSize() == 0) {
    for (uint64_t z = 0; z < r.slices; ++z) {
      for (uint64_t y = 0; y < r.rows; ++y) {
        const auto dst = translate(copy.getDst() + r.dstAt(y, z), globals);
        const auto src = translate(copy.getSrc() + r.srcAt(y, z), globals);
        if (dst && src) {
          check(driver_.cuMemcpyDtoDAsync(*dst, *src, r.width, stream_),
                "replaying a recorded 2D/3D device-to-device copy");
        }
      }
    }
    return;
  }
  if (data.getSize() == 0) return;
  // The packed rows must be exactly width * rows * slices bytes. (Divided,
  // not multiplied, so that a damaged trace's sizes cannot overflow into a
  // match and read past the staging buffer.)
  const uint64_t size = data.getSize(), perSlice = size / r.slices;
  if (r.rows == 0 || r.width == 0 || size % r.slices != 0 || perSlice % r.rows != 0 || perSlice / r.rows != r.width) {
    throw ReplayError(what + " holds " + std::to_string(size) + " bytes for " +
                      (copy.getDepth() != 0 ? std::to_string(r.slices) + " slices of " : std::string()) +
                      std::to_string(r.rows) + " rows of " + std::to_string(r.width));
  }
  uint8_t* buffer = staging(size);
  reader_.readContentInto(data, buffer, size);
  // The staging buffer is page-locked, so the rows can all go out before the
  // one wait of applyMemoryOp (nothing rewrites the staging buffer before it).
  for (uint64_t z = 0; z < r.slices; ++z) {
    for (uint64_t y = 0; y < r.rows; ++y) {
      if (const auto dst = translate(copy.getDst() + r.dstAt(y, z), globals)) {
        check(driver_.cuMemcpyHtoDAsync(*dst, buffer + r.packedAt(y, z), r.width, stream_),
              "replaying a row of " + what);
      }
    }
  }
}

}  // namespace kcap::replay
