#include "record/host_waiters.h"

#include "record/driver_api.h"

namespace kcap {

bool waitsForHost(std::string_view kernelName) {
  // stream_executor::gpu::(anonymous)::DelayKernel, mangled.
  return kernelName.find("stream_executor") != std::string_view::npos &&
         kernelName.find("DelayKernel") != std::string_view::npos;
}

void HostWaiters::launched(CUstream stream) {
  const DriverApi& api = driverApi();
  CUevent done = nullptr;
  const RelaxedCaptureMode relaxed;
  if (api.eventCreate == nullptr || api.eventRecord == nullptr ||
      api.eventCreate(&done, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS) {
    return;  // nothing to wait on: the next launches are snapshotted as usual
  }
  if (api.eventRecord(done, stream) != CUDA_SUCCESS) {
    if (api.eventDestroy != nullptr) api.eventDestroy(done);
    return;
  }
  std::lock_guard lock(mutex_);
  running_.push_back(done);
  count_.store(running_.size(), std::memory_order_release);
}

bool HostWaiters::pending() {
  if (count_.load(std::memory_order_acquire) == 0) return false;
  const DriverApi& api = driverApi();
  std::lock_guard lock(mutex_);
  std::erase_if(running_, [&](CUevent done) {
    if (api.eventQuery != nullptr && api.eventQuery(done) == CUDA_ERROR_NOT_READY) return false;
    if (api.eventDestroy != nullptr) api.eventDestroy(done);
    return true;
  });
  count_.store(running_.size(), std::memory_order_release);
  return !running_.empty();
}

}  // namespace kcap
