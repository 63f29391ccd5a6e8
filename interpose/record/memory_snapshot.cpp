#include "record/memory_snapshot.h"

#include "core/xxh3_long.h"
#include "hooks/stats.h"
#include "record/device_hash.h"
#include "record/driver_api.h"

#include <capnp/message.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <new>
#include <optional>
#include <unordered_set>

namespace kcap {

namespace {

// Adds the time until it goes out of scope to the snapshot profile
// (stats.h), when that is counted.
class PhaseTimer {
 public:
  explicit PhaseTimer(SnapshotTime what) : what_(what), counting_(counting()) {
    if (counting_) {
      start_ = std::chrono::steady_clock::now();
    }
  }
  ~PhaseTimer() {
    if (counting_) {
      const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start_);
      countSnapshotTime(what_, static_cast<uint64_t>(ns.count()));
    }
  }
  PhaseTimer(const PhaseTimer&) = delete;
  PhaseTimer& operator=(const PhaseTimer&) = delete;

 private:
  SnapshotTime what_;
  bool counting_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace

StagingPool::Lease::~Lease() {
  if (data_ != nullptr) {
    std::lock_guard lock(pool_->mutex_);
    pool_->free_.push_back(data_);
  }
}

StagingPool::Lease StagingPool::acquire() {
  {
    std::lock_guard lock(mutex_);
    if (!free_.empty()) {
      uint8_t* data = free_.back();
      free_.pop_back();
      return Lease(*this, data);
    }
  }
  const PhaseTimer timer(SnapshotTime::kStaging);
  countStagingBufferMade();
  void* memory = nullptr;
  const auto hostAlloc = driverApi().memHostAlloc;
  const size_t bytes = bufferBytes_ + bufferBytes_ / 64;  // and the hash area
  if (hostAlloc == nullptr || hostAlloc(&memory, bytes, CU_MEMHOSTALLOC_PORTABLE) != CUDA_SUCCESS ||
      memory == nullptr) {
    memory = std::aligned_alloc(4096, bytes);
    if (memory == nullptr) {
      throw std::bad_alloc();
    }
    std::lock_guard lock(mutex_);
    plain_.push_back(static_cast<const uint8_t*>(memory));
  }
  return Lease(*this, static_cast<uint8_t*>(memory));
}

bool StagingPool::isPageLocked(const uint8_t* data) {
  std::lock_guard lock(mutex_);
  return std::find(plain_.begin(), plain_.end(), data) == plain_.end();
}

void writeRanges(capnp::List<schema::MemoryRange>::Builder list, const std::vector<TakenRange>& taken) {
  for (unsigned i = 0; i < taken.size(); ++i) {
    list[i].setAddress(taken[i].range.address);
    list[i].setAllocationBase(taken[i].range.allocationBase);
    list[i].setKind(taken[i].range.kind);
    taken[i].content.writeTo(list[i].initContent());
  }
}

void StoredContent::writeTo(schema::Content::Builder out) const {
  out.setSize(size);
  out.setPieceSize(pieceSize);
  auto list = out.initPieces(static_cast<unsigned>(pieces.size()));
  for (unsigned i = 0; i < pieces.size(); ++i) {
    list[i].setHigh(pieces[i].high);
    list[i].setLow(pieces[i].low);
  }
}

namespace {

// Ranges smaller than this are copied whole: a launch of the hash kernel
// and the wait for it cost about as much as copying a few pieces.
constexpr uint64_t kDeviceHashMinBytes = 4u << 20;

// A device-hashed segment bound for the writer's direct blocks spans up to
// this many staging buffers: the device hashes a segment again after its
// copy, and that takes about as long for a few pieces (one warp each) as
// for a wave of them, so longer segments amortise it.
constexpr size_t kDirectSegmentBuffers = 8;

// A part of a range to copy to the host and store: whole pieces (the last
// may be the range's short tail), at most one staging buffer (or
// kDirectSegmentBuffers, device-hashed).
struct Segment {
  uint64_t offset;
  size_t size;
  bool deviceHashed = false;  // its pieces' hashes are the device's (checked again after the copy)
};

// Appends [offset, offset + size) to `segments`, joined to the last one
// where they touch, in pieces of at most `bufferBytes`.
void addSegment(std::vector<Segment>& segments, uint64_t offset, uint64_t size, size_t bufferBytes,
                bool deviceHashed = false) {
  if (!segments.empty()) {
    Segment& last = segments.back();
    if (last.offset + last.size == offset && last.size < bufferBytes && last.deviceHashed == deviceHashed) {
      const size_t more = static_cast<size_t>(std::min<uint64_t>(bufferBytes - last.size, size));
      last.size += more;
      offset += more;
      size -= more;
    }
  }
  while (size > 0) {
    const size_t chunk = static_cast<size_t>(std::min<uint64_t>(bufferBytes, size));
    segments.push_back({offset, chunk, deviceHashed});
    offset += chunk;
    size -= chunk;
  }
}

// Stores one copied segment: from the staging buffer `data`, or, when it
// landed in the writer's direct blocks, those. Its pieces' hashes take their
// places in `out` (a device-hashed segment's are there already).
void storeSegment(format::TraceWriter& writer, capnp::MallocMessageBuilder& scratch, const uint8_t* data,
                  std::vector<format::PieceBlock>& directBlocks, const Segment& segment, StoredContent& out) {
  const PhaseTimer timer(SnapshotTime::kStore);
  countSnapshotChunk();
  countSnapshotBytes(SnapshotBytes::kCopied, segment.size);
  size_t index = static_cast<size_t>(segment.offset / out.pieceSize);
  if (!directBlocks.empty()) {
    countSnapshotBytes(SnapshotBytes::kDirect, segment.size);
    writer.storeDirectPieces(out.pieces.data() + index, directBlocks);
    return;
  }
  auto content = scratch.initRoot<schema::Content>();
  if (segment.deviceHashed) {
    writer.storeHashedContent(data, segment.size, out.pieces.data() + index, content);
    return;
  }
  writer.storeContent(data, segment.size, content);
  for (const auto piece : content.asReader().getPieces()) {
    out.pieces[index++] = {piece.getHigh(), piece.getLow()};
  }
}

// The calling thread's own stream in the current context, for the
// recorder's asynchronous copies: non-blocking, so that it never orders
// itself with the program's work (the recorder has synchronized what it
// snapshots). nullptr when the driver cannot make one. A few contexts per
// thread are remembered; a stream whose context is gone fails its first copy
// and is forgotten (forgetSnapshotStream).
struct ThreadStream {
  uint64_t context;
  CUstream stream;
};
constexpr size_t kThreadStreams = 4;
thread_local ThreadStream t_streams[kThreadStreams] = {};  // trivially destructible

CUstream snapshotStream() {
  const uint64_t context = currentContext();
  const DriverApi& api = driverApi();
  if (context == 0 || api.streamCreate == nullptr || api.memcpyDtoHAsync == nullptr) {
    return nullptr;
  }
  for (const ThreadStream& known : t_streams) {
    if (known.context == context && known.stream != nullptr) {
      return known.stream;
    }
  }
  CUstream stream = nullptr;
  if (api.streamCreate(&stream, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) {
    return nullptr;
  }
  for (ThreadStream& slot : t_streams) {
    if (slot.stream == nullptr) {
      slot = {context, stream};
      return stream;
    }
  }
  t_streams[0] = {context, stream};  // full: the first one is left to the driver
  return stream;
}

void forgetSnapshotStream(CUstream stream) {
  for (ThreadStream& slot : t_streams) {
    if (slot.stream == stream) {
      slot = {};
    }
  }
}

// One staging buffer at a time, copy then store, in series: host-mapped
// memory, or when asynchronous copies are not possible.
CUresult copyInSeries(format::TraceWriter& writer, StagingPool& staging, const SnapshotRange& range,
                      const std::vector<Segment>& segments, StoredContent& out, std::vector<uint8_t>* hostCopy) {
  const bool hostMapped = range.kind == schema::MemoryKind::HOST_MAPPED;
  const auto copy = driverApi().memcpyDtoH;
  if (!hostMapped && copy == nullptr) {
    return CUDA_ERROR_NOT_FOUND;
  }
  StagingPool::Lease buffer = staging.acquire();
  capnp::MallocMessageBuilder scratch(256);
  std::vector<format::PieceBlock> noBlocks;
  for (const Segment& segment : segments) {
    if (hostMapped) {
      std::memcpy(buffer.data(), reinterpret_cast<const void*>(range.address + segment.offset), segment.size);
    } else {
      const PhaseTimer timer(SnapshotTime::kCopyWait);
      if (const CUresult r = copy(buffer.data(), range.address + segment.offset, segment.size); r != CUDA_SUCCESS) {
        return r;
      }
    }
    storeSegment(writer, scratch, buffer.data(), noBlocks, segment, out);
    if (hostCopy != nullptr) {
      std::memcpy(hostCopy->data() + segment.offset, buffer.data(), segment.size);
    }
  }
  return CUDA_SUCCESS;
}

CUresult waitForCopies(CUstream stream) {
  const PhaseTimer timer(SnapshotTime::kCopyWait);
  return driverApi().streamSynchronize(stream);
}

// Waits for the stream when it goes out of scope: a staging buffer goes
// back to its pool only once no copy is landing in it.
class StreamDrain {
 public:
  explicit StreamDrain(CUstream stream) : stream_(stream) {}
  ~StreamDrain() { driverApi().streamSynchronize(stream_); }
  StreamDrain(const StreamDrain&) = delete;
  StreamDrain& operator=(const StreamDrain&) = delete;

 private:
  CUstream stream_;
};

// Queues the copies of [address, address + size) into `blocks`, one piece
// each; blocks that follow each other in memory take one copy.
CUresult copyIntoBlocks(CUstream stream, uint64_t address, uint64_t size, uint32_t pieceSize,
                        std::vector<format::PieceBlock>& blocks) {
  const auto copy = driverApi().memcpyDtoHAsync;
  size_t runStart = 0;
  for (size_t j = 0; j < blocks.size(); ++j) {
    blocks[j].setSize(static_cast<size_t>(std::min<uint64_t>(pieceSize, size - uint64_t{j} * pieceSize)));
    const bool last = j + 1 == blocks.size();
    if (!last && blocks[j + 1].data() == blocks[j].data() + pieceSize) {
      continue;
    }
    const uint64_t offset = uint64_t{runStart} * pieceSize;
    const uint64_t end = last ? size : uint64_t{j + 1} * pieceSize;
    if (const CUresult r = copy(blocks[runStart].data(), address + offset, end - offset, stream); r != CUDA_SUCCESS) {
      return r;
    }
    runStart = j + 1;
  }
  return CUDA_SUCCESS;
}

// What copyOverlapped did besides its copies' result.
struct CopyOutcome {
  CUresult result = CUDA_SUCCESS;
  bool streamGone = false;  // the first copy failed: the stream's context is gone, most likely
  // A device-hashed segment hashed otherwise after its copy (or its check
  // could not be queued): nothing of it was stored, the range must be
  // taken again the host's way.
  bool retake = false;
};

// Two staging buffers: the copy of segment k+1 runs while segment k is
// hashed and stored (on the writer's hashing threads), so a large snapshot
// moves at the slower of the device-to-host copy and the hashing, not their
// sum. A device-hashed segment is hashed on the device again right after
// its copy, on the same stream: when the hashes still match, the copy holds
// the bytes they name (the memory did not change around it), and the writer
// takes them without hashing on the host.
//
// A device-hashed segment lands in the writer's direct blocks where it has
// them: storing it is then only queueing it, and the blocks of segment k+1
// are taken (new memory touched and page-locked) while segment k is copied.
// Such a segment may be larger than a staging buffer (the hashing after each
// copy takes about a millisecond whatever its size: the kernel hashes each
// piece with one warp); one that finds no blocks is staged in parts.
CopyOutcome copyOverlapped(format::TraceWriter& writer, StagingPool::Lease (&leases)[2], CUstream stream,
                           const SnapshotRange& range, std::vector<Segment> segments, StoredContent& out,
                           std::vector<uint8_t>* hostCopy) {
  CopyOutcome outcome;
  if (segments.empty()) {
    return outcome;
  }
  const DriverApi& api = driverApi();
  const uint32_t pieceSize = out.pieceSize;
  const size_t stagingBytes = leases[0].size();
  auto pieceCount = [&](const Segment& segment) { return (segment.size + pieceSize - 1) / pieceSize; };
  bool checkQueued[2] = {false, false};
  // Where segment k's copy lands: landings[k % 2], direct blocks of the
  // writer's, one a piece (page-locked; the writer takes them as they are),
  // or, when it has none to give (empty), leases[k % 2]. Before the drain,
  // so destroyed after it: blocks go back only once no copy lands in them.
  std::vector<format::PieceBlock> landings[2];
  auto land = [&](size_t k) {
    std::vector<format::PieceBlock>& blocks = landings[k % 2];
    blocks.clear();
    if (segments[k].deviceHashed) {  // never with a hostCopy (snapshot)
      blocks = writer.takeDirectBlocks(pieceCount(segments[k]));
    }
    if (blocks.empty() && segments[k].size > stagingBytes) {
      std::vector<Segment> parts;
      addSegment(parts, segments[k].offset, segments[k].size, stagingBytes, segments[k].deviceHashed);
      segments[k] = parts[0];
      segments.insert(segments.begin() + static_cast<std::ptrdiff_t>(k) + 1, parts.begin() + 1, parts.end());
    }
  };
  auto queue = [&](size_t k) {
    const Segment& segment = segments[k];
    const StagingPool::Lease& lease = leases[k % 2];
    std::vector<format::PieceBlock>& blocks = landings[k % 2];
    const uint64_t address = range.address + segment.offset;
    const CUresult r = blocks.empty() ? api.memcpyDtoHAsync(lease.data(), address, segment.size, stream)
                                      : copyIntoBlocks(stream, address, segment.size, pieceSize, blocks);
    checkQueued[k % 2] = r == CUDA_SUCCESS && segment.deviceHashed &&
                         queueDeviceHash(address, segment.size, pieceSize, stream, lease.hashArea()) == CUDA_SUCCESS;
    return r;
  };
  auto sameAsBefore = [&](size_t k) {
    const Segment& segment = segments[k];
    const uint64_t* again = leases[k % 2].hashArea();
    const size_t first = static_cast<size_t>(segment.offset / pieceSize);
    for (size_t j = 0; j < pieceCount(segment); ++j) {
      if (!(out.pieces[first + j] == format::Hash128{again[2 * j], again[2 * j + 1]})) {
        return false;
      }
    }
    return true;
  };
  const StreamDrain drain(stream);  // from the first copy on: the buffers go back once nothing lands in them
  land(0);
  if (queue(0) != CUDA_SUCCESS) {
    outcome.streamGone = true;
    return outcome;
  }
  capnp::MallocMessageBuilder scratch(256);
  for (size_t k = 0; k < segments.size(); ++k) {
    if (k + 1 < segments.size()) {
      land(k + 1);
    }
    if ((outcome.result = waitForCopies(stream)) != CUDA_SUCCESS) {
      return outcome;
    }
    if (segments[k].deviceHashed && (!checkQueued[k % 2] || !sameAsBefore(k))) {
      outcome.retake = true;
      return outcome;
    }
    if (k + 1 < segments.size()) {
      if ((outcome.result = queue(k + 1)) != CUDA_SUCCESS) {
        return outcome;
      }
    }
    storeSegment(writer, scratch, leases[k % 2].data(), landings[k % 2], segments[k], out);
    if (hostCopy != nullptr) {
      std::memcpy(hostCopy->data() + segments[k].offset, leases[k % 2].data(), segments[k].size);
    }
  }
  return outcome;
}

// Hashes the range's pieces on the device, into `lease` (a page-locked
// staging buffer), puts the hashes into out.pieces, and returns what must
// be copied: the pieces the trace lacks, once each (device-hashed
// segments), and a last piece too short for the kernel (hashed on the
// host). nullopt when the device cannot tell: then everything is copied.
std::optional<std::vector<Segment>> hashPiecesOnDevice(const format::TraceWriter& writer, const SnapshotRange& range,
                                                       CUstream stream, const StagingPool::Lease& lease,
                                                       StoredContent& out) {
  const uint32_t pieceSize = out.pieceSize;
  const size_t count = out.pieces.size();
  if (count * 16 > lease.size() || !driverKnowsRange(range.address, range.size)) {
    return std::nullopt;
  }
  {
    const PhaseTimer timer(SnapshotTime::kDeviceHash);
    auto* hashes = reinterpret_cast<uint64_t*>(lease.data());
    if (queueDeviceHash(range.address, range.size, pieceSize, stream, hashes) != CUDA_SUCCESS ||
        driverApi().streamSynchronize(stream) != CUDA_SUCCESS) {
      return std::nullopt;
    }
    for (size_t i = 0; i < count; ++i) {
      out.pieces[i] = {hashes[2 * i], hashes[2 * i + 1]};
    }
  }
  countSnapshotBytes(SnapshotBytes::kDeviceHashed, range.size);
  const std::vector<uint8_t> missing = writer.missingPieces(out.pieces);
  std::unordered_set<format::Hash128, format::Hash128Hasher> copying;
  // Device-hashed segments up to kDirectSegmentBuffers staging buffers
  // (copyOverlapped), as long as their hashes fit a lease's hash area.
  const size_t directBytes = std::min(kDirectSegmentBuffers * lease.size(), lease.size() / 64 / 16 * size_t{pieceSize});
  std::vector<Segment> toCopy;
  for (size_t i = 0; i < count; ++i) {
    const uint64_t offset = uint64_t{i} * pieceSize;
    const uint64_t length = std::min<uint64_t>(pieceSize, range.size - offset);
    if (length < xxh3::kMinLength) {
      addSegment(toCopy, offset, length, lease.size());
    } else if (missing[i] != 0 && copying.insert(out.pieces[i]).second) {
      addSegment(toCopy, offset, length, directBytes, true);
    }
  }
  return toCopy;
}

}  // namespace

format::PageLocker& driverPageLocker() {
  // The writer's direct memory is page-locked on the thread taking the
  // blocks, a snapshotting thread: its context is current. Portable: any
  // context's copies may land there.
  class DriverPageLocker final : public format::PageLocker {
   public:
    bool lock(void* data, size_t bytes) override {
      const auto hostRegister = driverApi().memHostRegister;
      return hostRegister != nullptr && hostRegister(data, bytes, CU_MEMHOSTREGISTER_PORTABLE) == CUDA_SUCCESS;
    }
    void unlock(void* data, size_t) override {
      if (const auto unregister = driverApi().memHostUnregister) {
        unregister(data);  // fails harmlessly once the driver is torn down, at exit
      }
    }
  };
  static auto* locker = new DriverPageLocker;  // never destroyed: a writer may go after the shim's statics
  return *locker;
}

CUresult snapshot(format::TraceWriter& writer, StagingPool& staging, const SnapshotRange& range, StoredContent& out,
                  std::vector<uint8_t>* hostCopy, bool deviceHashing, bool ownStreamOnly) {
  countSnapshotRange(range.size);
  out.size = range.size;
  out.pieceSize = writer.pieceSize();
  out.pieces.assign(static_cast<size_t>((range.size + out.pieceSize - 1) / out.pieceSize), {});
  if (hostCopy != nullptr) {
    hostCopy->resize(range.size);
  }
  std::vector<Segment> whole;
  addSegment(whole, 0, range.size, staging.bufferBytes());

  const DriverApi& api = driverApi();
  // Device memory, this process's or another's (imported): hashed where it
  // lies, only the pieces the trace lacks crossing to the host.
  const bool device = range.kind == schema::MemoryKind::ALLOCATION || range.kind == schema::MemoryKind::VMM ||
                      range.kind == schema::MemoryKind::IMPORTED;
  const bool onDevice = deviceHashing && device && hostCopy == nullptr && range.size >= kDeviceHashMinBytes &&
                        out.pieceSize % 1024 == 0 && range.address % 16 == 0 && deviceHashingUsable();
  const bool hostMapped = range.kind == schema::MemoryKind::HOST_MAPPED;
  const bool overlap = !hostMapped && (range.size > staging.bufferBytes() || onDevice || ownStreamOnly) &&
                       api.streamSynchronize != nullptr;
  CUstream stream = overlap ? snapshotStream() : nullptr;
  if (stream == nullptr) {
    if (ownStreamOnly && !hostMapped) return CUDA_ERROR_NOT_SUPPORTED;
    return copyInSeries(writer, staging, range, whole, out, hostCopy);
  }
  StagingPool::Lease leases[2] = {staging.acquire(), staging.acquire()};
  CopyOutcome copied;
  if (onDevice && leases[0].pageLocked() && leases[1].pageLocked()) {
    if (const auto toCopy = hashPiecesOnDevice(writer, range, stream, leases[0], out)) {
      copied = copyOverlapped(writer, leases, stream, range, *toCopy, out, nullptr);
      if (!copied.retake && !copied.streamGone) {
        return copied.result;
      }
      // The program wrote the memory between the hashing and a copy
      // (from another stream), most likely: taken again, all on the host.
    }
  }
  if (!copied.streamGone) {
    copied = copyOverlapped(writer, leases, stream, range, whole, out, hostCopy);
  }
  if (copied.streamGone) {
    forgetSnapshotStream(stream);
    if (ownStreamOnly) return CUDA_ERROR_NOT_SUPPORTED;
    return copyInSeries(writer, staging, range, whole, out, hostCopy);
  }
  return copied.result;
}

}  // namespace kcap
