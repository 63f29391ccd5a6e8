// Kernels that wait for the host: they spin on a host-mapped flag that the
// program sets only after it has queued more work behind them (XLA's GPU
// timer: a delay kernel holds the stream until every timed kernel is
// queued, so that the timing measures the kernels, not the launches). Any
// synchronization while such a kernel runs waits for a release the program
// has not sent yet: the kernel times out and the program sees it. So while
// one may still be running, the recorder takes no snapshot and no
// checkpoint: the launches queued behind it are recorded without memory,
// each saying why.
#pragma once

#include <cuda.h>

#include <atomic>
#include <mutex>
#include <string_view>
#include <vector>

namespace kcap {

// Whether a kernel, by its name, waits for the host (XLA's DelayKernel).
bool waitsForHost(std::string_view kernelName);

class HostWaiters {
 public:
  // A kernel that waits for the host was launched on `stream`: an event
  // recorded behind it tells when it is done.
  void launched(CUstream stream);
  // Whether one may still be running (false once each one's event completed;
  // cheap when none was ever launched).
  bool pending();

 private:
  std::atomic<size_t> count_{0};
  std::mutex mutex_;
  std::vector<CUevent> running_;
};

}  // namespace kcap
