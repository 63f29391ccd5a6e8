#include "record/captured_copies.h"

#include "record/driver_api.h"

#include <limits>

namespace kcap {
namespace {

// Slots take at most this fraction of the device's memory in all, and one
// slot at most this fraction of what is free when it is made: the program's
// own allocations come first.
constexpr uint64_t kDeviceShare = 32;
constexpr uint64_t kFreeShare = 8;
// Captures whose slots are remembered: more than this many in progress at
// once (on different threads) is not expected.
constexpr size_t kRememberedCaptures = 64;

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

// The id of the capture `stream` takes part in, 0 when the driver does not say.
uint64_t captureOf(CUstream stream) {
  const auto info = driverApi().streamGetCaptureInfo;
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  cuuint64_t id = 0;
  if (info == nullptr || info(stream, &status, &id, nullptr, nullptr, nullptr, nullptr) != CUDA_SUCCESS ||
      status != CU_STREAM_CAPTURE_STATUS_ACTIVE) {
    return 0;
  }
  return id;
}

}  // namespace

// The smallest slot of `context`'s of at least `size` bytes that `capture`
// does not hold.
std::optional<uint64_t> CapturedCopies::reusable(uint64_t capture, CUcontext context, uint64_t size) const {
  if (capture == 0) return std::nullopt;
  const auto taken = takenBy_.find(capture);
  std::optional<uint64_t> best;
  uint64_t bestSize = std::numeric_limits<uint64_t>::max();
  for (const auto& [address, slot] : slots_) {
    if (!slot.shareable || slot.context != context || slot.size < size || slot.size >= bestSize) continue;
    if (taken != takenBy_.end() && taken->second.count(address) != 0) continue;
    best = address;
    bestSize = slot.size;
  }
  return best;
}

std::string CapturedCopies::add(CUstream stream, uint64_t written, uint64_t size, uint64_t& slot) {
  slot = 0;
  const DriverApi& api = driverApi();
  if (api.memAlloc == nullptr || api.memFree == nullptr || api.memcpyDtoDAsync == nullptr) {
    return "the driver lacks cuMemAlloc, cuMemFree or cuMemcpyDtoDAsync";
  }
  const uint64_t capture = captureOf(stream);
  CUcontext context = nullptr;
  if (api.ctxGetCurrent == nullptr || api.ctxGetCurrent(&context) != CUDA_SUCCESS) context = nullptr;
  const std::lock_guard lock(mutex_);
  std::optional<uint64_t> into = reusable(capture, context, size);
  if (!into) {
    const uint64_t total = deviceMemory();
    if (total != 0 && (size > total / kDeviceShare || bytes_ > total / kDeviceShare - size)) {
      return "kcap's copies of what NCCL calls captured into graphs write would pass 1/" +
             std::to_string(kDeviceShare) + " of the device's memory (" + std::to_string(bytes_) + " bytes taken)";
    }
    size_t free = 0, all = 0;
    if (api.memGetInfo != nullptr && api.memGetInfo(&free, &all) == CUDA_SUCCESS && size > free / kFreeShare) {
      return "the device has too little free memory for kcap's copy (" + std::to_string(free) + " bytes free)";
    }
    CUdeviceptr made = 0;
    if (const CUresult result = api.memAlloc(&made, size); result != CUDA_SUCCESS) {
      return "cuMemAlloc of kcap's copy failed (" + resultText(result) + ")";
    }
    Slot fresh;
    fresh.size = size;
    fresh.context = context;
    if (api.eventCreate != nullptr && api.eventRecord != nullptr && api.streamWaitEvent != nullptr &&
        api.eventCreate(&fresh.ordering, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS) {
      fresh.ordering = nullptr;
    }
    // Without its capture's id, or an event to order launches by, the slot
    // is this call's alone.
    fresh.shareable = capture != 0 && context != nullptr && fresh.ordering != nullptr;
    slots_.emplace(made, fresh);
    bytes_ += size;
    into = made;
  }
  if (const CUresult result = api.memcpyDtoDAsync(*into, written, size, stream); result != CUDA_SUCCESS) {
    return "capturing kcap's copy failed (" + resultText(result) + ")";  // the slot stays for another call
  }
  if (capture != 0) {
    if (takenBy_.count(capture) == 0) {
      captures_.push_back(capture);
      if (captures_.size() > kRememberedCaptures) {
        takenBy_.erase(captures_.front());
        captures_.pop_front();
      }
    }
    takenBy_[capture].insert(*into);
  }
  slot = *into;
  return {};
}

std::optional<uint64_t> CapturedCopies::slotAt(uint64_t address) const {
  const std::lock_guard lock(mutex_);
  const auto it = slots_.find(address);
  if (it == slots_.end()) return std::nullopt;
  return it->second.size;
}

std::unique_lock<std::mutex> CapturedCopies::beforeLaunch(const std::vector<uint64_t>& slots, CUstream stream,
                                                          std::string& problem) {
  std::unique_lock launching(launchMutex_);
  const DriverApi& api = driverApi();
  const std::lock_guard lock(mutex_);
  for (const uint64_t address : slots) {
    const auto it = slots_.find(address);
    if (it == slots_.end()) continue;
    Slot& slot = it->second;
    if (slot.launched && slot.lastStream != stream && slot.ordering != nullptr) {
      // An event recorded on a stream that is capturing would become a node
      // of that capture, and waiting for it would pull this stream in.
      CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
      CUresult waited =
          api.streamIsCapturing != nullptr ? api.streamIsCapturing(slot.lastStream, &status) : CUDA_ERROR_NOT_FOUND;
      if (waited == CUDA_SUCCESS && status != CU_STREAM_CAPTURE_STATUS_NONE) {
        waited = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
      }
      if (waited == CUDA_SUCCESS) waited = api.eventRecord(slot.ordering, slot.lastStream);
      if (waited == CUDA_SUCCESS) waited = api.streamWaitEvent(stream, slot.ordering, 0);
      if (waited != CUDA_SUCCESS && problem.empty()) {
        problem =
            "a graph launch could not wait for the read-back of kcap's copy after an earlier launch on another "
            "stream (" +
            resultText(waited) + "): that read-back may hold this launch's bytes";
      }
    }
    slot.launched = true;
    slot.lastStream = stream;
  }
  return launching;
}

}  // namespace kcap
