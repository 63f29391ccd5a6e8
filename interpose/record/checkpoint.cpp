#include "record/checkpoint.h"

#include "record/device_hash.h"
#include "record/driver_api.h"

#include <capnp/message.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

namespace kcap {
namespace {

uint64_t piecesOf(uint64_t size, uint32_t pieceSize) { return (size + pieceSize - 1) / pieceSize; }

}  // namespace

void CheckpointTaker::addStream(CUstream stream) {
  const uint64_t generation = generation_.load(std::memory_order_relaxed);
  if (stream != nullptr && stream != CU_STREAM_LEGACY) {  // the legacy stream is always drained
    const std::lock_guard lock(streamsMutex_);
    streams_.insert(stream);
  }
  t_lastStream = stream;
  t_lastTaker = this;
  t_lastGeneration = generation;
}

void CheckpointTaker::streamDestroyed(CUstream stream) {
  const std::lock_guard lock(streamsMutex_);
  streams_.erase(stream);
  generation_.fetch_add(1, std::memory_order_relaxed);
}

void CheckpointTaker::hostReadingLaunch(CUstream stream) {
  const DriverApi& api = driverApi();
  if (api.eventCreate == nullptr || api.eventRecord == nullptr || api.eventQuery == nullptr) {
    return;
  }
  const RelaxedCaptureMode relaxed;
  const std::lock_guard lock(streamsMutex_);
  // Bounded: those already complete make room.
  std::erase_if(hostReaders_, [&](CUevent event) {
    if (api.eventQuery(event) == CUDA_ERROR_NOT_READY) return false;
    spareEvents_.push_back(event);
    return true;
  });
  CUevent event = nullptr;
  if (!spareEvents_.empty()) {
    event = spareEvents_.back();
    spareEvents_.pop_back();
  } else if (hostReaders_.size() >= 256 || api.eventCreate(&event, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS) {
    return;
  }
  if (api.eventRecord(event, stream) == CUDA_SUCCESS) {
    hostReaders_.push_back(event);
  } else {
    spareEvents_.push_back(event);
  }
}

bool CheckpointTaker::hostReadersPending() {
  const DriverApi& api = driverApi();
  const std::lock_guard lock(streamsMutex_);
  std::erase_if(hostReaders_, [&](CUevent event) {
    if (api.eventQuery(event) == CUDA_ERROR_NOT_READY) return false;
    spareEvents_.push_back(event);
    return true;
  });
  return !hostReaders_.empty();
}

CUresult CheckpointTaker::drain(uint64_t drainMs, bool& drained) {
  drained = false;
  const DriverApi& api = driverApi();
  if (api.eventCreate == nullptr || api.eventRecord == nullptr || api.eventQuery == nullptr) {
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  std::vector<CUstream> streams{CU_STREAM_LEGACY};
  {
    const std::lock_guard lock(streamsMutex_);
    streams.insert(streams.end(), streams_.begin(), streams_.end());
  }
  std::vector<CUevent> pending;
  for (size_t i = 0; i < streams.size(); ++i) {
    if (i == events_.size()) {
      CUevent event = nullptr;
      if (const CUresult made = api.eventCreate(&event, CU_EVENT_DISABLE_TIMING); made != CUDA_SUCCESS) {
        return made;
      }
      events_.push_back(event);
    }
    const CUresult recorded = api.eventRecord(events_[i], streams[i]);
    if (recorded == CUDA_SUCCESS) {
      pending.push_back(events_[i]);
    } else if (streams[i] == CU_STREAM_LEGACY) {
      return recorded;
    } else {
      streamDestroyed(streams[i]);  // destroyed behind the shim's back, or another context's
    }
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(drainMs);
  auto sleep = std::chrono::microseconds(5);
  while (!pending.empty()) {
    const CUresult state = api.eventQuery(pending.back());
    if (state == CUDA_SUCCESS) {
      pending.pop_back();
      continue;
    }
    if (state != CUDA_ERROR_NOT_READY) {
      return state;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return CUDA_SUCCESS;  // not drained: postponed
    }
    std::this_thread::sleep_for(sleep);
    sleep = std::min(sleep * 2, std::chrono::microseconds(500));
  }
  drained = true;
  return CUDA_SUCCESS;
}

bool CheckpointTaker::ensureBuffers(uint64_t pieces) {
  if (pieces <= capacity_) {
    return true;
  }
  const DriverApi& api = driverApi();
  if (api.memHostAlloc == nullptr) {
    return false;
  }
  if (api.memFreeHost != nullptr) {
    if (pieces_ != nullptr) api.memFreeHost(pieces_);
    if (hashes_ != nullptr) api.memFreeHost(hashes_);
  }
  pieces_ = nullptr;
  hashes_ = nullptr;
  capacity_ = 0;
  const uint64_t capacity = std::max<uint64_t>(pieces + pieces / 4, 1024);
  void* list = nullptr;
  void* out = nullptr;
  constexpr unsigned kFlags = CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP;
  if (api.memHostAlloc(&list, capacity * sizeof(ChangeHashPiece), kFlags) != CUDA_SUCCESS ||
      api.memHostAlloc(&out, capacity * format::kChangeHashBytes, kFlags) != CUDA_SUCCESS) {
    if (list != nullptr && api.memFreeHost != nullptr) api.memFreeHost(list);
    return false;
  }
  pieces_ = static_cast<ChangeHashPiece*>(list);
  hashes_ = static_cast<uint64_t*>(out);
  capacity_ = capacity;
  return true;
}

CUresult CheckpointTaker::hashAll(const std::vector<SnapshotRange>& ranges, std::vector<format::ChangeHash>& hashes) {
  const uint32_t pieceSize = writer_.pieceSize();
  uint64_t count = 0;
  for (const SnapshotRange& range : ranges) count += piecesOf(range.size, pieceSize);
  hashes.assign(count, {});
  if (count == 0) {
    return CUDA_SUCCESS;
  }
  if (!ensureBuffers(count)) {
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  uint64_t at = 0;
  for (const SnapshotRange& range : ranges) {
    for (uint64_t offset = 0; offset < range.size; offset += pieceSize) {
      pieces_[at++] = {range.address + offset, std::min<uint64_t>(pieceSize, range.size - offset)};
    }
  }
  const DriverApi& api = driverApi();
  if (hashStream_ == nullptr) {
    if (api.streamCreate == nullptr) return CUDA_ERROR_NOT_SUPPORTED;
    if (const CUresult made = api.streamCreate(&hashStream_, CU_STREAM_NON_BLOCKING); made != CUDA_SUCCESS) {
      hashStream_ = nullptr;
      return made;
    }
  }
  if (const CUresult queued = queueChangeHash(pieces_, count, hashStream_, hashes_); queued != CUDA_SUCCESS) {
    return queued;
  }
  if (const CUresult done = api.streamSynchronize(hashStream_); done != CUDA_SUCCESS) {
    return done;
  }
  for (uint64_t p = 0; p < count; ++p) hashes[p] = {hashes_[2 * p], hashes_[2 * p + 1]};
  return CUDA_SUCCESS;
}

const format::ChangeHash& CheckpointTaker::zeroHash(uint64_t length) {
  const auto known = zeroHashes_.find(length);
  if (known != zeroHashes_.end()) {
    return known->second;
  }
  return zeroHashes_[length] = format::zeroChangeHash(length);
}

const format::Hash128& CheckpointTaker::zeroContent(uint64_t length) {
  const auto known = zeroPieces_.find(length);
  if (known != zeroPieces_.end()) {
    return known->second;
  }
  const std::vector<uint8_t> zeros(length, 0);
  capnp::MallocMessageBuilder message;
  auto content = message.initRoot<schema::Content>();
  writer_.storeContent(zeros.data(), zeros.size(), content);
  auto piece = content.getPieces()[0];
  return zeroPieces_[length] = format::Hash128{piece.getHigh(), piece.getLow()};
}

CheckpointTaker::Result CheckpointTaker::take(const std::vector<Allocation>& allocations,
                                              const std::vector<SnapshotRange>& globals, uint64_t drainMs) {
  Result result;
  const RelaxedCaptureMode relaxed;
  // The checkpoints' context current while this one is taken: its device's
  // memory is the one covered, and the events, stream and buffers below
  // were made in it.
  const auto current = reinterpret_cast<CUcontext>(currentContext());
  CUcontext pinnedContext = context_.load(std::memory_order_relaxed);
  if (pinnedContext == nullptr) {
    pinnedContext = current;
    context_.store(current, std::memory_order_relaxed);
  }
  const ContextSwitch pinned(pinnedContext, current);
  if (pinned.result() != CUDA_SUCCESS) {
    result.error = pinned.result();
    result.errorWhere = "making the first checkpoint's context current";
    return result;
  }
  if (hostReadersPending()) {
    result.postponed = true;
    return result;
  }
  bool drained = false;
  if (const CUresult drainResult = drain(drainMs, drained); drainResult != CUDA_SUCCESS) {
    result.error = drainResult;
    result.errorWhere = "waiting for the program's queued work";
    return result;
  }
  if (!drained) {
    result.postponed = true;
    result.drainTimedOut = true;
    return result;
  }

  // The live ranges of this device, by address, without overlaps (a stale
  // entry the shim did not see freed is dropped by the driver check).
  result.device = currentDevice();
  std::vector<SnapshotRange> ranges;
  for (const Allocation& a : allocations) {
    // Host memory, managed memory and other processes' memory: logged at
    // the launches that reach it.
    if (writtenOutsideCuda(a.kind)) continue;
    // NCCL's own: written by its kernels and its peers', which re-execution does not run.
    if (a.byNccl) continue;
    if (a.device >= 0 && result.device >= 0 && a.device != result.device) {
      ++result.otherDeviceRanges;
      continue;
    }
    ranges.push_back({a.base, a.size, a.base, memoryKind(a.kind)});
  }
  ranges.insert(ranges.end(), globals.begin(), globals.end());
  std::sort(ranges.begin(), ranges.end(),
            [](const SnapshotRange& a, const SnapshotRange& b) { return a.address < b.address; });
  std::vector<SnapshotRange> live;
  for (const SnapshotRange& range : ranges) {
    if (range.size == 0 || (!live.empty() && range.address < live.back().address + live.back().size)) continue;
    if (range.kind != schema::MemoryKind::MODULE_GLOBAL && !driverKnowsRange(range.address, range.size)) continue;
    live.push_back(range);
  }

  std::vector<format::ChangeHash> hashes;
  if (const CUresult hashed = hashAll(live, hashes); hashed != CUDA_SUCCESS) {
    result.error = hashed;
    result.errorWhere = "hashing device memory (kcap_change_hash)";
    return result;
  }

  const uint32_t pieceSize = writer_.pieceSize();
  std::map<uint64_t, CheckpointRangeState> next;
  uint64_t at = 0;
  for (const SnapshotRange& range : live) {
    CheckpointRangeState state;
    state.range = range;
    const uint64_t count = piecesOf(range.size, pieceSize);
    state.changeHashes.assign(hashes.begin() + static_cast<ptrdiff_t>(at),
                              hashes.begin() + static_cast<ptrdiff_t>(at + count));
    at += count;
    state.content.assign(count, {});
    const auto before = previous_.find(range.address);
    const bool comparable = before != previous_.end() && before->second.range.size == range.size;
    std::vector<bool> copy(count, false);
    for (uint64_t p = 0; p < count; ++p) {
      const uint64_t length = std::min<uint64_t>(pieceSize, range.size - p * pieceSize);
      if (comparable && before->second.changeHashes[p] == state.changeHashes[p]) {
        state.content[p] = before->second.content[p];
        continue;
      }
      ++result.changedPieces;
      if (state.changeHashes[p] == zeroHash(length)) {
        state.content[p] = zeroContent(length);
      } else {
        copy[p] = true;
      }
    }
    // Runs of pieces to copy, each taken as one snapshot.
    for (uint64_t p = 0; p < count;) {
      if (!copy[p]) {
        ++p;
        continue;
      }
      uint64_t end = p;
      while (end < count && copy[end]) ++end;
      const uint64_t offset = p * pieceSize;
      const SnapshotRange run{range.address + offset, std::min<uint64_t>(range.size - offset, (end - p) * pieceSize),
                              range.allocationBase, range.kind};
      StoredContent stored;
      const CUresult taken = snapshot(writer_, staging_, run, stored, nullptr, hashOnDevice_);
      if (taken != CUDA_SUCCESS || stored.pieces.size() != end - p) {
        result.error = taken != CUDA_SUCCESS ? taken : CUDA_ERROR_UNKNOWN;
        result.errorWhere = "copying changed memory from the device";
        previous_.clear();
        return result;
      }
      std::copy(stored.pieces.begin(), stored.pieces.end(), state.content.begin() + static_cast<ptrdiff_t>(p));
      result.changedBytes += run.size;
      p = end;
    }
    next.emplace(range.address, state);
    result.ranges.push_back(std::move(state));
  }
  previous_ = std::move(next);
  return result;
}

void CheckpointTaker::write(const Result& result, uint32_t pieceSize, schema::Checkpoint::Builder out) {
  out.setDevice(result.device);
  out.setChangedPieces(result.changedPieces);
  out.setChangedBytes(result.changedBytes);
  out.setResult(result.error);
  auto ranges = out.initRanges(static_cast<unsigned>(result.ranges.size()));
  for (unsigned i = 0; i < result.ranges.size(); ++i) {
    const CheckpointRangeState& state = result.ranges[i];
    auto range = ranges[i];
    range.setAddress(state.range.address);
    range.setAllocationBase(state.range.allocationBase);
    range.setKind(state.range.kind);
    auto data = range.initChangeHashes(static_cast<unsigned>(state.changeHashes.size() * format::kChangeHashBytes));
    for (size_t p = 0; p < state.changeHashes.size(); ++p) {
      std::memcpy(data.begin() + p * format::kChangeHashBytes, &state.changeHashes[p].high, 8);
      std::memcpy(data.begin() + p * format::kChangeHashBytes + 8, &state.changeHashes[p].low, 8);
    }
    auto stored = range.initContent();
    stored.setSize(state.range.size);
    stored.setPieceSize(pieceSize);
    auto pieces = stored.initPieces(static_cast<unsigned>(state.content.size()));
    for (unsigned p = 0; p < state.content.size(); ++p) {
      pieces[p].setHigh(state.content[p].high);
      pieces[p].setLow(state.content[p].low);
    }
  }
}

}  // namespace kcap
