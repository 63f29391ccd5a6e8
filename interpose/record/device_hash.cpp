#include "record/device_hash.h"

#include "core/xxh3_long.h"
#include "hooks/shim_log.h"
#include "record/driver_api.h"

#include <algorithm>
#include <atomic>

namespace kcap {

namespace {

std::atomic<bool> g_deviceHashOff{false};

struct HashKernel {
  CUresult loaded = CUDA_ERROR_NOT_SUPPORTED;  // CUDA_SUCCESS when `kernel` can be launched
  const char* missing = nullptr;               // what this process lacks for it, if anything
  CUkernel kernel = nullptr;
  CUkernel changeKernel = nullptr;  // kcap_change_hash; nullptr in an image without it
  xxh3::Secret secret{};
};

// Loaded the first time a snapshot asks, once per process; never unloaded
// (the driver lets it go with the process).
const HashKernel& hashKernel() noexcept {
  static const HashKernel loaded = [] {
    HashKernel k;
    const DriverApi& api = driverApi();
    const std::span<const uint8_t> image = contentHashImage();
    if (image.empty()) {
      k.missing = "this build of the shim has no hash kernel (built without nvcc)";
      return k;
    }
    if (api.libraryLoadData == nullptr || api.libraryGetKernel == nullptr || api.launchKernel == nullptr) {
      k.missing = "the driver has no cuLibraryLoadData (CUDA 12.0 and later)";
      return k;
    }
    CUlibrary library = nullptr;
    k.loaded = api.libraryLoadData(&library, image.data(), nullptr, nullptr, 0, nullptr, nullptr, 0);
    if (k.loaded == CUDA_SUCCESS) {
      k.loaded = api.libraryGetKernel(&k.kernel, library, kContentHashKernel);
    }
    if (k.loaded == CUDA_SUCCESS && api.libraryGetKernel(&k.changeKernel, library, kChangeHashKernel) != CUDA_SUCCESS) {
      k.changeKernel = nullptr;
    }
    k.secret = xxh3::defaultSecret();
    return k;
  }();
  return loaded;
}

// Failures that are the context's or the stream's, not the kernel's: the
// next snapshot (another context, another stream) may hash on the device.
bool notTheKernels(CUresult result) {
  switch (result) {
    case CUDA_ERROR_INVALID_CONTEXT:
    case CUDA_ERROR_CONTEXT_IS_DESTROYED:
    case CUDA_ERROR_INVALID_HANDLE:
    case CUDA_ERROR_OUT_OF_MEMORY:
    case CUDA_ERROR_ILLEGAL_ADDRESS:  // the program's own sticky errors, seen by our launch
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_ASSERT:
    case CUDA_ERROR_ECC_UNCORRECTABLE:
      return true;
    default:
      return false;
  }
}

void switchOff(const char* what, CUresult result) noexcept {
  g_deviceHashOff.store(true, std::memory_order_relaxed);
  char name[32];
  KCAP_LOG_ONCE("hashing device memory on the GPU failed (%s: %s); snapshots hash on the host", what,
                resultName(result, name));
}

}  // namespace

bool driverKnowsRange(uint64_t address, uint64_t size) noexcept {
  const auto get = driverApi().memGetAddressRange;
  if (get == nullptr || size == 0) {
    return false;
  }
  const uint64_t end = address + size;
  uint64_t at = address;
  // A range the shim joined from adjacent mappings is a few allocations to
  // the driver: follow them, a bounded number.
  for (int steps = 0; steps < 64 && at < end; ++steps) {
    CUdeviceptr base = 0;
    size_t length = 0;
    if (get(&base, &length, at) != CUDA_SUCCESS || base > at || base + length <= at) {
      return false;
    }
    at = base + length;
  }
  return at >= end;
}

bool deviceHashingUsable() noexcept { return !g_deviceHashOff.load(std::memory_order_relaxed); }

CUresult queueDeviceHash(uint64_t address, uint64_t size, uint32_t pieceSize, CUstream stream,
                         uint64_t* hashes) noexcept {
  if (!deviceHashingUsable()) {
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  const HashKernel& k = hashKernel();
  if (k.missing != nullptr) {
    g_deviceHashOff.store(true, std::memory_order_relaxed);
    KCAP_LOG_ONCE("%s: snapshots hash on the host", k.missing);
    return k.loaded;
  }
  if (k.loaded != CUDA_SUCCESS) {
    switchOff("loading the kernel", k.loaded);
    return k.loaded;
  }
  constexpr unsigned kThreads = 256;  // 8 warps: 8 pieces a block
  const uint64_t pieces = (size + pieceSize - 1) / pieceSize;
  const uint64_t blocks = (pieces * 32 + kThreads - 1) / kThreads;
  if (size == 0 || pieceSize % 1024 != 0 || address % 16 != 0 || blocks > 0x7fffffffu) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  CUdeviceptr base = address;
  uint64_t length = size;
  uint32_t piece = pieceSize;
  xxh3::Secret secret = k.secret;
  uint64_t* out = hashes;
  void* params[] = {&base, &length, &piece, &secret, &out};
  const DriverApi& api = driverApi();
  const CUresult launched = api.launchKernel(reinterpret_cast<CUfunction>(k.kernel), static_cast<unsigned>(blocks), 1,
                                             1, kThreads, 1, 1, 0, stream, params, nullptr);
  if (launched != CUDA_SUCCESS && !notTheKernels(launched)) {
    switchOff("launching the kernel", launched);
  }
  return launched;
}

CUresult queueChangeHash(const ChangeHashPiece* pieces, uint64_t count, CUstream stream, uint64_t* hashes) noexcept {
  const HashKernel& k = hashKernel();
  if (k.missing != nullptr || k.loaded != CUDA_SUCCESS) {
    return k.loaded != CUDA_SUCCESS ? k.loaded : CUDA_ERROR_NOT_SUPPORTED;
  }
  if (k.changeKernel == nullptr) {
    return CUDA_ERROR_NOT_FOUND;
  }
  if (count == 0) {
    return CUDA_SUCCESS;
  }
  // Enough blocks to keep every multiprocessor reading; each loops over
  // pieces when there are more.
  const unsigned blocks = static_cast<unsigned>(std::min<uint64_t>(count, 65535));
  const ChangeHashPiece* list = pieces;
  uint64_t n = count;
  uint64_t* out = hashes;
  void* params[] = {&list, &n, &out};
  return driverApi().launchKernel(reinterpret_cast<CUfunction>(k.changeKernel), blocks, 1, 1, kChangeHashThreads, 1, 1,
                                  0, stream, params, nullptr);
}

}  // namespace kcap
