// Content hashes of device memory computed on the device, where it lies
// (content_hash.cu), so that a snapshot copies to the host only the pieces
// the trace does not hold yet (memory_snapshot.cpp).
//
// The kernel's image is built into the shim (content_hash_image.cpp) and
// loaded once per process as a context-independent library
// (cuLibraryLoadData): the driver loads it into each context the first time
// a launch there needs it, so no handle of the shim's outlives a context the
// program destroys. Its launches go to the real driver directly: the trace
// never sees them.
#pragma once

#include "record/change_hash.cuh"

#include <cuda.h>

#include <cstdint>
#include <span>

namespace kcap {

// The fatbin of content_hash.cu; empty in a build without nvcc (snapshots
// then always hash on the host).
std::span<const uint8_t> contentHashImage() noexcept;

// True when the driver says [address, address + size) lies in live device
// allocations (cuMemGetAddressRange, one allocation or mapping after
// another). The kernel reads the whole range: a fault there would be the
// program's (a sticky error that ends its context), so what the shim
// believes about the allocation is not enough.
bool driverKnowsRange(uint64_t address, uint64_t size) noexcept;

// False once hashing on the device is known not to work in this process (no
// image, a driver without libraries, an image the GPU cannot run).
bool deviceHashingUsable() noexcept;

// The kernels' names, as profilers and CUPTI's kernel records show them.
inline constexpr const char* kContentHashKernel = "kcap_content_hash";
inline constexpr const char* kChangeHashKernel = "kcap_change_hash";

// Queues on `stream` the hashing of [address, address + size) in pieces of
// `pieceSize` bytes: once the stream is synchronized, hashes[2p] and
// hashes[2p + 1] (page-locked host memory, which the device writes) hold
// piece p's XXH3-128, high and low half; pieces shorter than
// xxh3::kMinLength get zeros (the host hashes those). `address` must be
// 16-byte aligned, `pieceSize` a multiple of 1 KiB. On a failure that says
// the kernel cannot run here, device hashing is switched off for the
// process (said once on stderr).
CUresult queueDeviceHash(uint64_t address, uint64_t size, uint32_t pieceSize, CUstream stream,
                         uint64_t* hashes) noexcept;

// Queues on `stream` the change hashes (format/change_hash.h) of `count`
// pieces: `pieces` and `hashes` (16 bytes a piece: high, low) must be
// memory the device can read and write (page-locked, mapped). Unlike
// queueDeviceHash this never switches device hashing off: a checkpoint
// that cannot hash is recorded as incomplete.
CUresult queueChangeHash(const ChangeHashPiece* pieces, uint64_t count, CUstream stream, uint64_t* hashes) noexcept;

}  // namespace kcap
