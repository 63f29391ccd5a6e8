// PieceMemory: where the trace writer keeps the raw bytes of new memory
// pieces between a producer's copy and their compression.
//
// A burst of memory the trace has not seen (a snapshot of gigabytes) needs
// that much host memory at once, and memory a process touches for the first
// time costs a page fault every 4 KiB: on the H200 host nine threads copied
// into fresh 4 KiB pages at 14.6 GB/s, into fresh huge pages at 24.9, into
// pages used before at 59.6 (docs/benchmarks.md, 2026-12-01). So blocks are
// carved from 2 MiB-aligned slabs the kernel is asked to back with huge
// pages (madvise MADV_HUGEPAGE; ignored where transparent huge pages are
// off), and a block given back is reused by the next piece. Slabs go back
// to the system only with the PieceMemory: it holds what the writer's peak
// held, which --buffer bounds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

namespace kcap::format {

class PieceMemory;

// One block of PieceMemory holding a piece's bytes; gives the block back
// when it goes. Move-only. Empty (no block) when default-made.
class PieceBlock {
 public:
  PieceBlock() = default;
  PieceBlock(PieceBlock&& other) noexcept { *this = std::move(other); }
  PieceBlock& operator=(PieceBlock&& other) noexcept;
  PieceBlock(const PieceBlock&) = delete;
  PieceBlock& operator=(const PieceBlock&) = delete;
  ~PieceBlock() { release(); }

  explicit operator bool() const { return data_ != nullptr; }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  bool reused() const { return reused_; }  // the block held a piece before (no page faults)

  // Copies `length` bytes (at most the memory's block size) into the block,
  // with streaming stores: the piece is read next by a compression thread,
  // later and from another core, so the stores need not bring the block's
  // old lines in nor evict what the copying thread works on.
  void fill(const uint8_t* piece, size_t length);

  void release();  // back to its memory now

 private:
  friend class PieceMemory;
  PieceBlock(PieceMemory* owner, uint8_t* data, bool reused) : owner_(owner), data_(data), reused_(reused) {}

  PieceMemory* owner_ = nullptr;
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  bool reused_ = false;
};

class PieceMemory {
 public:
  explicit PieceMemory(size_t blockBytes);  // the largest piece
  ~PieceMemory();                           // every block must have come back
  PieceMemory(const PieceMemory&) = delete;
  PieceMemory& operator=(const PieceMemory&) = delete;

  // A block, reused where one is free. Throws std::bad_alloc when the system
  // has no memory left.
  PieceBlock take();
  size_t blockBytes() const { return blockBytes_; }

 private:
  friend class PieceBlock;
  void giveBack(uint8_t* data);

  const size_t blockBytes_;
  const size_t slabBytes_;
  std::mutex mutex_;
  std::vector<uint8_t*> free_;
  std::vector<void*> slabs_;  // mmap'd, slabBytes_ + alignment each
  uint8_t* carveAt_ = nullptr;   // the next block never used, in the newest slab
  uint8_t* carveEnd_ = nullptr;
};

}  // namespace kcap::format
