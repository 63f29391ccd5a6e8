#include "record/captured_copies.h"

#include "record/driver_api.h"

namespace kcap {
namespace {

// Slots take at most this fraction of the device's memory in all, and one
// slot at most this fraction of what is free when it is made: the program's
// own allocations come first.
constexpr uint64_t kDeviceShare = 32;
constexpr uint64_t kFreeShare = 8;

std::string resultText(CUresult result) { return "CUresult " + std::to_string(static_cast<int>(result)); }

// The current device's memory, 0 when the driver cannot say.
uint64_t deviceMemory() {
  const DriverApi& api = driverApi();
  CUdevice device = 0;
  size_t total = 0;
  if (api.ctxGetDevice == nullptr || api.deviceTotalMem == nullptr || api.ctxGetDevice(&device) != CUDA_SUCCESS ||
      api.deviceTotalMem(&total, device) != CUDA_SUCCESS) {
    return 0;
  }
  return total;
}

}  // namespace

std::string CapturedCopies::add(CUstream stream, uint64_t written, uint64_t size, uint64_t& slot) {
  slot = 0;
  const DriverApi& api = driverApi();
  if (api.memAlloc == nullptr || api.memFree == nullptr || api.memcpyDtoDAsync == nullptr) {
    return "the driver lacks cuMemAlloc, cuMemFree or cuMemcpyDtoDAsync";
  }
  const uint64_t total = deviceMemory();
  const std::lock_guard lock(mutex_);
  if (total != 0 && (size > total / kDeviceShare || bytes_ > total / kDeviceShare - size)) {
    return "kcap's copies of what NCCL calls captured into graphs write would pass 1/" + std::to_string(kDeviceShare) +
           " of the device's memory (" + std::to_string(bytes_) + " bytes taken)";
  }
  size_t free = 0, all = 0;
  if (api.memGetInfo != nullptr && api.memGetInfo(&free, &all) == CUDA_SUCCESS && size > free / kFreeShare) {
    return "the device has too little free memory for kcap's copy (" + std::to_string(free) + " bytes free)";
  }
  CUdeviceptr made = 0;
  if (const CUresult result = api.memAlloc(&made, size); result != CUDA_SUCCESS) {
    return "cuMemAlloc of kcap's copy failed (" + resultText(result) + ")";
  }
  if (const CUresult result = api.memcpyDtoDAsync(made, written, size, stream); result != CUDA_SUCCESS) {
    api.memFree(made);
    return "capturing kcap's copy failed (" + resultText(result) + ")";
  }
  slots_.emplace(made, size);
  bytes_ += size;
  slot = made;
  return {};
}

std::optional<uint64_t> CapturedCopies::slotAt(uint64_t address) const {
  const std::lock_guard lock(mutex_);
  const auto it = slots_.find(address);
  if (it == slots_.end()) return std::nullopt;
  return it->second;
}

}  // namespace kcap
