#include "piece_hashes.h"

#include <algorithm>
#include <string>

#include "driver.h"
#include "reexecute.h"
#include "xxh3_long.h"

namespace kcap::replay {
namespace {

constexpr unsigned kThreads = 256;  // 8 warps: the kernel hashes one piece per warp
constexpr const char* kKernel = "kcap_content_hash";

}  // namespace

PieceHasher::~PieceHasher() {
  if (out_ != nullptr) driver_.cuMemFreeHost(out_);
  if (module_ != nullptr) driver_.cuModuleUnload(module_);
}

bool PieceHasher::load() {
  if (state_ != State::kNotLoaded) return state_ == State::kLoaded;
  state_ = State::kUnusable;
  const std::vector<uint8_t> image = changeHashImage();
  if (image.empty()) return false;  // built without nvcc: every range goes by the host
  if (driver_.cuModuleLoadDataEx(&module_, image.data(), 0, nullptr, nullptr) != CUDA_SUCCESS) {
    module_ = nullptr;
    return false;
  }
  if (driver_.cuModuleGetFunction(&function_, module_, kKernel) != CUDA_SUCCESS) return false;
  state_ = State::kLoaded;
  return true;
}

bool PieceHasher::suits(CUdeviceptr address, uint64_t size, uint64_t pieceSize) {
  if (pieceSize == 0 || pieceSize % xxh3::kBlock != 0 || size <= pieceSize || address % 16 != 0) return false;
  const uint64_t pieces = (size + pieceSize - 1) / pieceSize;
  if ((pieces * 32 + kThreads - 1) / kThreads > 0x7fffffffu) return false;  // more blocks than a grid holds
  return load();
}

bool PieceHasher::hashed(uint64_t size, uint64_t pieceSize, uint64_t index) {
  const uint64_t start = index * pieceSize;
  return start < size && std::min(pieceSize, size - start) >= xxh3::kMinLength;
}

std::vector<format::Hash128> PieceHasher::hash(CUdeviceptr address, uint64_t size, uint32_t pieceSize) {
  const uint64_t pieces = (size + pieceSize - 1) / pieceSize;
  if (pieces > outPieces_) {
    if (out_ != nullptr) driver_.cuMemFreeHost(out_);
    out_ = nullptr;
    outPieces_ = 0;
    void* p = nullptr;
    check(driver_.cuMemAllocHost(&p, pieces * 2 * sizeof(uint64_t)), "cuMemAllocHost for piece hashes");
    out_ = static_cast<uint64_t*>(p);
    outPieces_ = pieces;
  }
  CUlaunchConfig config{};
  config.gridDimX = static_cast<unsigned>((pieces * 32 + kThreads - 1) / kThreads);
  config.gridDimY = config.gridDimZ = 1;
  config.blockDimX = kThreads, config.blockDimY = config.blockDimZ = 1;
  config.hStream = stream_;
  CUdeviceptr base = address;
  uint64_t length = size;
  uint32_t piece = pieceSize;
  xxh3::Secret secret = xxh3::defaultSecret();
  uint64_t* out = out_;
  void* args[] = {&base, &length, &piece, &secret, &out};
  check(driver_.cuLaunchKernelEx(&config, function_, args, nullptr), "launching kcap_content_hash");
  check(driver_.cuStreamSynchronize(stream_), "hashing device memory");
  std::vector<format::Hash128> hashes(pieces);
  for (uint64_t i = 0; i < pieces; ++i) hashes[i] = {out_[2 * i], out_[2 * i + 1]};
  return hashes;
}

std::vector<bool> PieceHasher::differing(CUdeviceptr address, schema::Content::Reader content) {
  const uint64_t size = content.getSize();
  const uint32_t pieceSize = content.getPieceSize();
  const auto recorded = content.getPieces();
  const std::vector<format::Hash128> here = hash(address, size, pieceSize);
  if (here.size() != recorded.size()) {
    throw ReplayError("a recorded range of " + std::to_string(size) + " bytes lists " +
                      std::to_string(recorded.size()) + " pieces, not " + std::to_string(here.size()));
  }
  std::vector<bool> differs(here.size());
  for (uint64_t i = 0; i < here.size(); ++i) {
    const auto piece = recorded[static_cast<unsigned>(i)];
    differs[i] = !hashed(size, pieceSize, i) || here[i] != format::Hash128{piece.getHigh(), piece.getLow()};
  }
  return differs;
}

}  // namespace kcap::replay
