#include "piece_memory.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <new>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace kcap::format {

namespace {

constexpr size_t kHugePage = size_t{2} << 20;
constexpr size_t kMinSlab = size_t{64} << 20;

size_t roundUp(size_t value, size_t to) { return (value + to - 1) / to * to; }

}  // namespace

PieceBlock& PieceBlock::operator=(PieceBlock&& other) noexcept {
  if (this != &other) {
    release();
    owner_ = other.owner_;
    data_ = other.data_;
    size_ = other.size_;
    reused_ = other.reused_;
    other.owner_ = nullptr;
    other.data_ = nullptr;
    other.size_ = 0;
  }
  return *this;
}

void PieceBlock::release() {
  if (data_ != nullptr) owner_->giveBack(data_);
  owner_ = nullptr;
  data_ = nullptr;
  size_ = 0;
}

void PieceBlock::fill(const uint8_t* piece, size_t length) {
  size_ = length;
  size_t done = 0;
#if defined(__SSE2__)
  for (; done + 64 <= length; done += 64) {  // blocks are page-aligned
    const auto* from = reinterpret_cast<const __m128i*>(piece + done);
    auto* to = reinterpret_cast<__m128i*>(data_ + done);
    const __m128i a = _mm_loadu_si128(from), b = _mm_loadu_si128(from + 1);
    const __m128i c = _mm_loadu_si128(from + 2), d = _mm_loadu_si128(from + 3);
    _mm_stream_si128(to, a);
    _mm_stream_si128(to + 1, b);
    _mm_stream_si128(to + 2, c);
    _mm_stream_si128(to + 3, d);
  }
  _mm_sfence();  // the stores are visible before the piece is queued
#endif
  std::memcpy(data_ + done, piece + done, length - done);
}

PieceMemory::PieceMemory(size_t blockBytes, size_t maxBytes, SlabHooks hooks)
    : blockBytes_(roundUp(blockBytes, 4096)),
      slabBytes_(roundUp(std::max(blockBytes_, kMinSlab), kHugePage)),
      maxBytes_(maxBytes),
      hooks_(std::move(hooks)) {}

PieceMemory::~PieceMemory() {
  for (size_t i = 0; i < slabs_.size(); ++i) {
    if (hooks_.retire) hooks_.retire(slabs_[i], slabBytes_);
    ::munmap(mappings_[i], slabBytes_ + kHugePage);
  }
}

size_t PieceMemory::mappedBytes() const {
  std::lock_guard lock(mutex_);
  return slabs_.size() * slabBytes_;
}

PieceBlock PieceMemory::take() {
  {
    std::lock_guard lock(mutex_);
    if (!free_.empty()) {
      uint8_t* data = free_.back();
      free_.pop_back();
      return PieceBlock(this, data, true);
    }
    if (!fresh_.empty()) {
      uint8_t* data = fresh_.back();
      fresh_.pop_back();
      return PieceBlock(this, data, false);
    }
    if (maxBytes_ != 0 && (slabs_.size() + growing_ + 1) * slabBytes_ > maxBytes_) return {};
    ++growing_;
  }
  // Mapped and prepared without the lock: blocks come back meanwhile, and
  // preparing (the direct memory's page-locking) takes milliseconds.
  Slab slab;
  try {
    slab = mapSlab();
  } catch (...) {
    std::lock_guard lock(mutex_);
    --growing_;
    throw;
  }
  std::lock_guard lock(mutex_);
  --growing_;
  if (slab.data == nullptr) return {};
  const size_t blocks = slabBytes_ / blockBytes_;
  try {
    slabs_.reserve(slabs_.size() + 1);
    mappings_.reserve(mappings_.size() + 1);
    fresh_.reserve(fresh_.size() + blocks - 1);
    free_.reserve((slabs_.size() + 1) * blocks);  // giveBack never allocates: room for every block there is
  } catch (...) {
    if (hooks_.retire) hooks_.retire(slab.data, slabBytes_);
    ::munmap(slab.mapping, slabBytes_ + kHugePage);
    throw;
  }
  slabs_.push_back(slab.data);
  mappings_.push_back(slab.mapping);
  for (size_t i = blocks; i-- > 1;) fresh_.push_back(slab.data + i * blockBytes_);
  return PieceBlock(this, slab.data, false);
}

PieceMemory::Slab PieceMemory::mapSlab() const {
  // Virtual memory only, until the copies touch it: a huge page at a time
  // where the kernel grants them.
  void* mapping = ::mmap(nullptr, slabBytes_ + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapping == MAP_FAILED) throw std::bad_alloc();
  auto* data = reinterpret_cast<uint8_t*>(roundUp(reinterpret_cast<uintptr_t>(mapping), kHugePage));
#if defined(MADV_HUGEPAGE)
  ::madvise(data, slabBytes_, MADV_HUGEPAGE);
#endif
  if (hooks_.prepare && !hooks_.prepare(data, slabBytes_)) {
    ::munmap(mapping, slabBytes_ + kHugePage);
    return {};
  }
  return {mapping, data};
}

void PieceMemory::giveBack(uint8_t* data) {
  std::lock_guard lock(mutex_);
  free_.push_back(data);
}

}  // namespace kcap::format
