// PieceMemory: where the trace writer keeps the raw bytes of new memory
// pieces between a producer's copy and their compression.
//
// A burst of memory the trace has not seen (a snapshot of gigabytes) needs
// that much host memory at once, and memory a process touches for the first
// time costs a page fault every 4 KiB: copying into fresh small pages is
// several times slower than into pages used before, and fresh huge pages
// sit in between (docs/benchmarks.md, page locking). So blocks are
// carved from 2 MiB-aligned slabs the kernel is asked to back with huge
// pages (madvise MADV_HUGEPAGE; ignored where transparent huge pages are
// off), and a block given back is reused by the next piece. Slabs go back
// to the system only with the PieceMemory: it holds what the writer's peak
// held, which --buffer bounds.
//
// The writer's direct memory (TraceWriter::takeDirectBlocks) is a
// PieceMemory whose slabs are prepared before use: touched and page-locked,
// so that the shim's device-to-host copies land in the blocks themselves.
// It has a bound: page-locked memory is the system's to lose.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
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
  uint8_t* data() { return data_; }
  size_t size() const { return size_; }
  bool reused() const { return reused_; }  // the block held a piece before (no page faults)

  // How many of the block's bytes hold the piece, when something other than
  // fill() wrote them through data() (a device's copy). At most the
  // memory's block size.
  void setSize(size_t size) { size_ = size; }

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

// What is done to a slab before its blocks are handed out, and before it is
// unmapped. prepare returning false leaves the slab unused (unmapped again).
// Called without the memory's lock, from the thread that takes a block.
struct SlabHooks {
  std::function<bool(uint8_t* slab, size_t bytes)> prepare;
  std::function<void(uint8_t* slab, size_t bytes)> retire;
};

class PieceMemory {
 public:
  // `blockBytes`: the largest piece. `maxBytes`: bound on the slabs'
  // memory, 0 for none.
  explicit PieceMemory(size_t blockBytes, size_t maxBytes = 0, SlabHooks hooks = {});
  ~PieceMemory();  // every block must have come back
  PieceMemory(const PieceMemory&) = delete;
  PieceMemory& operator=(const PieceMemory&) = delete;

  // A block, one used before where one is free, of size 0 until filled.
  // Empty when no block is free and another slab would pass maxBytes, or
  // the hooks' prepare refused it. Throws std::bad_alloc when the system
  // has no memory left.
  PieceBlock take();
  size_t blockBytes() const { return blockBytes_; }
  size_t slabBytes() const { return slabBytes_; }
  size_t mappedBytes() const;  // slabs in use

 private:
  friend class PieceBlock;
  struct Slab {
    void* mapping = nullptr;  // as mmap returned it: slabBytes_ and the alignment
    uint8_t* data = nullptr;  // 2 MiB-aligned; nullptr when prepare refused it
  };
  void giveBack(uint8_t* data);
  Slab mapSlab() const;

  const size_t blockBytes_;
  const size_t slabBytes_;
  const size_t maxBytes_;
  const SlabHooks hooks_;
  mutable std::mutex mutex_;
  std::vector<uint8_t*> free_;   // blocks that held a piece before
  std::vector<uint8_t*> fresh_;  // blocks never used, lowest address last
  std::vector<uint8_t*> slabs_;  // 2 MiB-aligned starts of the mappings
  std::vector<void*> mappings_;  // as mmap returned them, slabBytes_ + alignment each
  size_t growing_ = 0;           // slabs being mapped and prepared (outside the lock)
};

}  // namespace kcap::format
