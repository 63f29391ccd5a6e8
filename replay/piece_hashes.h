// The content hash (XXH3-128, format::contentHash) of each piece of a range
// of replayed device memory, computed where the memory lies by the shim's own
// hashing kernel (interpose/record/content_hash.cu, built into kcap with the
// change-hash kernel: change_hash_image.cpp). A recorded range is a list of
// piece hashes, so the GPU can tell which pieces it already holds: restoring
// a pre-state copies only the pieces that differ, and comparing a
// post-state reads back only the pieces whose hashes differ from the
// recorded ones. A launch that reaches a pool of 100 GiB and changes a few
// MiB of it then costs two passes over the pool at the GPU's memory
// bandwidth, not two trips of the whole pool over PCIe.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <vector>

#include "hash.h"
#include "kcap.capnp.h"

namespace kcap::replay {

struct Driver;

class PieceHasher {
 public:
  PieceHasher(Driver& driver, CUstream stream) : driver_(driver), stream_(stream) {}
  ~PieceHasher();
  PieceHasher(const PieceHasher&) = delete;
  PieceHasher& operator=(const PieceHasher&) = delete;

  // Whether [address, address + size), in pieces of `pieceSize`, is worth
  // and fit for hashing here: more than one piece (a single piece costs no
  // more to copy), the kernel's alignment (16-byte address, pieces a
  // multiple of 1 KiB), and a kernel that loads (not in a build without
  // nvcc). Loads the kernel into the current context the first time.
  bool suits(CUdeviceptr address, uint64_t size, uint64_t pieceSize);

  // Which pieces of `content`, placed at `address` (a range that suits()),
  // the device does not hold as recorded: their hashes here differ from
  // the recorded ones, or are not computed on the device (pieces too short).
  // Throws ReplayError when the content lists another number of pieces
  // than its size makes, CudaError when hashing fails.
  std::vector<bool> differing(CUdeviceptr address, schema::Content::Reader content);

 private:
  // Each piece's hash, once the GPU computed it (the stream is waited for).
  // A piece shorter than XXH3's long-input threshold is not hashed on the
  // device: see `hashed`. Throws CudaError.
  std::vector<format::Hash128> hash(CUdeviceptr address, uint64_t size, uint32_t pieceSize);
  // Whether hash() computed piece `index`'s hash (false: compare its bytes).
  static bool hashed(uint64_t size, uint64_t pieceSize, uint64_t index);

  bool load();

  Driver& driver_;
  CUstream stream_;
  enum class State { kNotLoaded, kLoaded, kUnusable } state_ = State::kNotLoaded;
  CUmodule module_ = nullptr;
  CUfunction function_ = nullptr;
  uint64_t* out_ = nullptr;  // page-locked host memory the kernel writes: no device address taken
  uint64_t outPieces_ = 0;
};

}  // namespace kcap::replay
