// PointerScanner: which words of a launch's parameters, and of the small
// buffers they point to, are device pointers.
//
// A parameter word is a device pointer when its value falls inside a tracked
// allocation (AllocationMap). Only 8-byte-aligned words are candidates: the
// ABI aligns pointers, including pointer members of by-value structs, to 8
// within the parameter buffer. A 128-byte parameter holding the very bytes a
// recorded cuTensorMapEncode* call made (KnownTensorMaps) is a CUtensorMap:
// its first word is the tensor's global address (CUDA-NOTES), and the rest,
// dimensions and strides, is not scanned. The bytes decide, not the offset:
// on the H200 a map's parameter offset was 112 (cuFuncGetParamInfo aligns
// parameters in the constant bank, not in the packed buffer), and a 128-byte
// struct of sixteen pointers must not be taken for a map. A map the shim did
// not see made is scanned as any struct (its address word is still found).
//
// Grouped kernels (e.g. grouped GEMM) take a pointer to an array of pointers;
// scanIndirect() finds those in a host copy of a small referenced buffer, so
// that the memory they reach is snapshotted and, at replay, relocatable.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <set>
#include <span>
#include <vector>

#include "allocation_map.h"

namespace kcap {

struct ParamSlot {
  uint32_t offset = 0;
  uint32_t size = 0;
};

struct ParamPointer {
  uint32_t offset = 0;          // byte offset of the word in the parameter buffer
  uint64_t value = 0;           // the address it holds
  uint64_t allocationBase = 0;  // the allocation it points into
  bool inTensorMap = false;
  // The allocation holds what re-execution cannot recompute: page-locked
  // host memory or managed memory (the host writes it), or another
  // process's memory.
  bool loggedInput = false;
};

struct IndirectPointer {
  uint64_t bufferAddress = 0;  // device address of the buffer holding the word
  uint64_t offset = 0;         // byte offset of the word in that buffer
  uint64_t value = 0;
  uint64_t allocationBase = 0;
};

inline constexpr uint32_t kTensorMapBytes = 128;

// The tensor maps the program's encode calls made, by their bytes. Thread-safe;
// free to ask while none was made (the common case). Asking takes no lock
// and writes nothing shared (it is asked on every launch with a parameter
// of a tensor map's size): maps are kept in an insert-only open-addressing
// table whose entries, once published, never change; adding takes the lock.
// Maps beyond half the table's size go to a set under the lock, which a
// question the table cannot answer then takes.
class KnownTensorMaps {
 public:
  KnownTensorMaps() = default;
  ~KnownTensorMaps();
  KnownTensorMaps(const KnownTensorMaps&) = delete;
  KnownTensorMaps& operator=(const KnownTensorMaps&) = delete;
  void add(const void* map);
  bool contains(const uint8_t* bytes) const;

 private:
  using Bytes = std::array<uint8_t, kTensorMapBytes>;
  struct Entry {
    std::atomic<bool> ready{false};  // bytes are set (written once, before this)
    Bytes bytes{};
  };
  static constexpr size_t kTableEntries = 1024;  // a power of two
  mutable std::mutex mutex_;
  std::set<Bytes> overflow_;
  size_t tableCount_ = 0;                // under mutex_
  std::atomic<Entry*> table_{nullptr};   // made at the first add
  std::atomic<bool> overflowed_{false};  // overflow_ holds some
};

// Scans `params` (the packed parameter buffer, laid out per `layout`) into
// `found` (cleared first; its capacity is reused: this is on every recorded
// launch's path). The allocation map is locked once, and only when some word
// could be an address.
void scanParams(const uint8_t* params, size_t size, std::span<const ParamSlot> layout, const AllocationMap& allocations,
                const KnownTensorMaps& tensorMaps, std::vector<ParamPointer>& found);
std::vector<ParamPointer> scanParams(const uint8_t* params, size_t size, const std::vector<ParamSlot>& layout,
                                     const AllocationMap& allocations, const KnownTensorMaps& tensorMaps);

// Scans a host copy of device memory [bufferAddress, bufferAddress + size).
// Pointers into the buffer's own allocation are reported too (linked
// structures); the caller decides which allocations to follow.
std::vector<IndirectPointer> scanIndirect(const uint8_t* bytes, size_t size, uint64_t bufferAddress,
                                          const AllocationMap& allocations);

}  // namespace kcap
