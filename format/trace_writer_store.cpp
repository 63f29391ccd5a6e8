#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>

#include "trace_writer_impl.h"

namespace kcap::format {

void TraceWriterImpl::storeContent(const void* data, size_t size, schema::Content::Builder out) {
  store(data, size, nullptr, out);
}

void TraceWriterImpl::storeHashedContent(const void* data, size_t size, const Hash128* hashes,
                                         schema::Content::Builder out) {
  store(data, size, hashes, out);
}

std::vector<PieceBlock> TraceWriterImpl::takeDirectBlocks(size_t count) {
  std::vector<PieceBlock> blocks;
  if (directMemory_ == nullptr || directRefused_.load(std::memory_order_relaxed)) return blocks;
  blocks.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    PieceBlock block = directMemory_->take();
    if (!block) return {};  // those taken go back
    blocks.push_back(std::move(block));
  }
  return blocks;
}

void TraceWriterImpl::storeDirectPieces(const Hash128* hashes, std::vector<PieceBlock>& blocks) {
  size_t bytes = 0;
  for (const PieceBlock& block : blocks) bytes += block.size();
  settleAppends();
  std::unique_lock lock(mutex_);
  throwIfFailed();
  throwIfClosed();
  stats_.contentBytes += bytes;
  stats_.directBytes += bytes;
  queueNewPieces(lock, hashes, blocks);
  blocks.clear();
}

std::vector<uint8_t> TraceWriterImpl::missingPieces(const std::vector<Hash128>& hashes) const {
  std::vector<uint8_t> missing(hashes.size(), 0);
  std::lock_guard lock(mutex_);
  for (size_t i = 0; i < hashes.size(); ++i) missing[i] = storedPieces_.count(hashes[i]) == 0 ? 1 : 0;
  return missing;
}

void TraceWriterImpl::storeEncodedPiece(const Hash128& hash, uint64_t rawSize, std::vector<uint8_t> chunk) {
  if (chunk.size() < kChunkHeaderSize + kBlobHashSize) {
    throw FormatError(path_ + ": an encoded piece of " + std::to_string(chunk.size()) + " bytes is no blob chunk");
  }
  settleAppends();
  std::unique_lock lock(mutex_);
  throwIfFailed();
  throwIfClosed();
  stats_.contentBytes += rawSize;
  if (!storedPieces_.insert(hash).second) return;
  stats_.uniqueBytes += rawSize;
  auto job = std::make_unique<Job>();
  job->kind = ChunkKind::kBlob;
  job->hash = hash;
  job->encoded = std::move(chunk);
  job->rawSize = rawSize;
  job->done = true;  // nothing to compress: straight to the writer thread
  submit(lock, std::move(job));
}

void TraceWriterImpl::store(const void* data, size_t size, const Hash128* known, schema::Content::Builder out) {
  const auto* bytes = static_cast<const uint8_t*>(data);
  const size_t count = size == 0 ? 0 : (size + pieceSize() - 1) / pieceSize();
  out.setSize(size);
  out.setPieceSize(pieceSize());
  auto pieces = out.initPieces(static_cast<unsigned>(count));
  auto pieceLength = [&](size_t i) { return std::min<size_t>(pieceSize(), size - i * pieceSize()); };

  // Hashing and copying run at a few GB/s a core: a snapshot of device
  // memory, copied at tens of GB/s, needs several cores to keep up.
  WorkerPool* pool = count > 1 ? hashingPool() : nullptr;
  auto forEachPiece = [&](size_t n, const std::function<void(size_t)>& fn) {
    if (pool != nullptr && n > 1) {
      pool->forEach(n, fn);
    } else {
      for (size_t i = 0; i < n; ++i) fn(i);
    }
  };
  // Each piece is hashed and, if the trace has not seen it, copied right
  // away by the same thread, while it is still in that core's cache.
  std::vector<Hash128> hashes(count);
  std::vector<PieceBlock> copies(count);
  std::atomic<uint64_t> reused{0};
  forEachPiece(count, [&](size_t i) {
    const uint8_t* piece = bytes + i * pieceSize();
    hashes[i] = known != nullptr ? known[i] : contentHash(piece, pieceLength(i));
    {
      std::lock_guard lock(mutex_);
      if (storedPieces_.count(hashes[i]) != 0) return;
    }
    copies[i] = pieceMemory_.take();
    copies[i].fill(piece, pieceLength(i));
    if (copies[i].reused()) reused.fetch_add(1, std::memory_order_relaxed);
  });
  for (size_t i = 0; i < count; ++i) {
    pieces[static_cast<unsigned>(i)].setHigh(hashes[i].high);
    pieces[static_cast<unsigned>(i)].setLow(hashes[i].low);
  }

  // Then queued in piece order, so that the file does not depend on the
  // threads. A copy made for a piece that turned out to be stored already
  // (twice in this content, or queued by another thread meanwhile) goes
  // back unused. The copies exist before they are counted as pending: a
  // producer holds at most one call's worth beyond the bound.
  if (std::any_of(copies.begin(), copies.end(), [](const PieceBlock& copy) { return bool(copy); })) {
    settleAppends();
  }
  std::unique_lock lock(mutex_);
  throwIfFailed();
  throwIfClosed();
  stats_.contentBytes += size;
  stats_.reusedBuffers += reused.load();
  queueNewPieces(lock, hashes.data(), copies);
}

void TraceWriterImpl::queueNewPieces(std::unique_lock<std::mutex>& lock, const Hash128* hashes,
                                     std::vector<PieceBlock>& copies) {
  size_t bytes = 0;
  for (const PieceBlock& copy : copies) bytes += copy.size();
  if (bytes > 0) waitForSpace(lock, bytes);
  for (size_t i = 0; i < copies.size(); ++i) {
    if (copies[i]) queueNewPiece(hashes[i], copies[i]);
  }
}

void TraceWriterImpl::queueNewPiece(const Hash128& hash, PieceBlock& copy) {
  if (!storedPieces_.insert(hash).second) {
    copy.release();
    return;
  }
  stats_.uniqueBytes += copy.size();
  auto job = std::make_unique<Job>();
  job->kind = ChunkKind::kBlob;
  job->hash = hash;
  job->piece = std::move(copy);
  const size_t cost = job->piece.size();
  enqueue(std::move(job), cost);
}

std::unique_ptr<PieceMemory> TraceWriterImpl::makeDirectMemory() {
  if (options_.pageLocker == nullptr || options_.maxDirectBytes == 0) return nullptr;
  SlabHooks hooks;
  hooks.prepare = [this](uint8_t* slab, size_t bytes) { return prepareDirectSlab(slab, bytes); };
  hooks.retire = [locker = options_.pageLocker](uint8_t* slab, size_t bytes) { locker->unlock(slab, bytes); };
  return std::make_unique<PieceMemory>(options_.pieceSize, options_.maxDirectBytes, std::move(hooks));
}

bool TraceWriterImpl::prepareDirectSlab(uint8_t* slab, size_t bytes) {
  const auto start = std::chrono::steady_clock::now();
  constexpr size_t kUnit = size_t{2} << 20;
  const size_t units = (bytes + kUnit - 1) / kUnit;
  auto touch = [&](size_t u) {
    const size_t end = std::min(bytes, (u + 1) * kUnit);
    for (size_t at = u * kUnit; at < end; at += 4096) slab[at] = 0;
  };
  if (WorkerPool* pool = hashingPool()) {
    pool->forEach(units, touch);
  } else {
    for (size_t u = 0; u < units; ++u) touch(u);
  }
  const bool locked = options_.pageLocker->lock(slab, bytes);
  // Refused once, refused for good (a limit on locked memory, most
  // likely): no slab is touched in vain before each segment.
  if (!locked) directRefused_.store(true, std::memory_order_relaxed);
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start);
  std::lock_guard lock(mutex_);
  stats_.pageLockNs += static_cast<uint64_t>(ns.count());
  if (locked) stats_.pageLockedBytes += bytes;
  return locked;
}

WorkerPool* TraceWriterImpl::hashingPool() {
  std::call_once(hashingPoolMade_, [&] {
    unsigned threads = options_.hashingThreads;
    if (threads == 0) threads = std::min(8u, std::max(2u, std::thread::hardware_concurrency()) - 1);
    hashingPool_ = std::make_unique<WorkerPool>(threads, "kcap-hash", options_.threads);
  });
  return hashingPool_->threads() > 0 ? hashingPool_.get() : nullptr;
}

}  // namespace kcap::format
