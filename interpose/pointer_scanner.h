// PointerScanner: which words of a launch's parameters, and of the small
// buffers they point to, are device pointers.
//
// A parameter word is a device pointer when its value falls inside a tracked
// allocation (AllocationMap). Only 8-byte-aligned words are candidates: the
// ABI aligns pointers, including pointer members of by-value structs, to 8
// within the parameter buffer. A 128-byte parameter at a 64-aligned offset is
// taken for a CUtensorMap: its first word is the tensor's global address
// (CUDA-NOTES: cuTensorMapReplaceAddress rewrites exactly those bytes).
//
// Grouped kernels (e.g. grouped GEMM) take a pointer to an array of pointers;
// scanIndirect() finds those in a host copy of a small referenced buffer, so
// that the memory they reach is snapshotted and, at replay, relocatable.
#pragma once

#include <cstddef>
#include <cstdint>
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
};

struct IndirectPointer {
    uint64_t bufferAddress = 0;  // device address of the buffer holding the word
    uint64_t offset = 0;         // byte offset of the word in that buffer
    uint64_t value = 0;
    uint64_t allocationBase = 0;
};

inline constexpr uint32_t kTensorMapBytes = 128;

// Scans `params` (the packed parameter buffer, laid out per `layout`).
std::vector<ParamPointer> scanParams(const uint8_t* params, size_t size, const std::vector<ParamSlot>& layout,
                                     const AllocationMap& allocations);

// Scans a host copy of device memory [bufferAddress, bufferAddress + size).
// Pointers into the buffer's own allocation are reported too (linked
// structures); the caller decides which allocations to follow.
std::vector<IndirectPointer> scanIndirect(const uint8_t* bytes, size_t size, uint64_t bufferAddress,
                                          const AllocationMap& allocations);

}  // namespace kcap
