#include "record/hang_watchdog.h"

#include "record/background_thread.h"

#include "hooks/real_driver.h"
#include "hooks/shim_log.h"

#include <cuda.h>

#include <chrono>
#include <condition_variable>
#include <thread>
#include <vector>

namespace kcap {
namespace {

using Clock = std::chrono::steady_clock;

struct EventApi {
  CUresult (*ctxSetCurrent)(CUcontext) = nullptr;
  CUresult (*eventCreate)(CUevent*, unsigned) = nullptr;
  CUresult (*eventRecord)(CUevent, CUstream) = nullptr;
  CUresult (*eventQuery)(CUevent) = nullptr;
  CUresult (*eventDestroy)(CUevent) = nullptr;
  bool complete() const { return ctxSetCurrent && eventCreate && eventRecord && eventQuery && eventDestroy; }
};

template <class Fn>
void resolve(Fn& slot, const char* symbol) {
  slot = reinterpret_cast<Fn>(real::driverSymbol(symbol));
}

EventApi eventApi() {
  EventApi api;
  resolve(api.ctxSetCurrent, "cuCtxSetCurrent");
  resolve(api.eventCreate, "cuEventCreate");
  resolve(api.eventRecord, "cuEventRecord");
  resolve(api.eventQuery, "cuEventQuery");
  resolve(api.eventDestroy, "cuEventDestroy_v2");
  return api;
}

// An event the watchdog recorded on a stream, not yet seen complete.
struct Pending {
  CUevent event = nullptr;
  uint64_t lastLaunch = 0;
  Clock::time_point recordedAt;
};

}  // namespace

struct HangWatchdog::Shared {
  uint32_t seconds = 0;
  std::function<bool()> capturing;
  std::function<void(const Hang&)> fire;

  std::mutex mutex;
  std::condition_variable wake;
  bool stopping = false;
  struct Seen {
    uint64_t context = 0;
    uint64_t lastLaunch = 0;
    bool fresh = false;  // launches since the watchdog last looked
  };
  std::unordered_map<uint64_t, Seen> streams;

  void run() noexcept;
  template <class Api, class PendingMap, class Limit>
  void watch(const Api& api, PendingMap& pending, Limit limit);
};

HangWatchdog::HangWatchdog(uint32_t seconds, std::function<bool()> capturing, std::function<void(const Hang&)> fire)
    : shared_(std::make_shared<Shared>()) {
  shared_->seconds = seconds;
  shared_->capturing = std::move(capturing);
  shared_->fire = std::move(fire);
}

bool HangWatchdog::start() noexcept {
  return startBackgroundThread("kcap-watchdog", [shared = shared_] { shared->run(); });
}

void HangWatchdog::launched(uint64_t stream, uint64_t context, uint64_t launchIndex) noexcept {
  if (stream == reinterpret_cast<uint64_t>(CU_STREAM_PER_THREAD)) {
    return;
  }
  std::lock_guard lock(shared_->mutex);
  try {
    auto& seen = shared_->streams[stream];
    seen.context = context;
    seen.lastLaunch = launchIndex;
    seen.fresh = true;
  } catch (...) {
    // no memory: this launch goes unwatched
  }
}

void HangWatchdog::stop() noexcept {
  std::lock_guard lock(shared_->mutex);
  shared_->stopping = true;
  shared_->wake.notify_all();
}

void HangWatchdog::Shared::run() noexcept {
  const EventApi api = eventApi();
  if (!api.complete()) {
    KCAP_LOG_ONCE("the driver lacks the event functions the hang trigger needs; it will not fire");
    return;
  }
  std::unordered_map<uint64_t, Pending> pending;  // this thread's own
  const auto limit = std::chrono::seconds(seconds);
  try {
    watch(api, pending, limit);
  } catch (...) {
    KCAP_LOG_ONCE("the hang watchdog stopped (out of memory); the hang trigger will not fire");
  }
}

template <class Api, class PendingMap, class Limit>
void HangWatchdog::Shared::watch(const Api& api, PendingMap& pending, Limit limit) {
  for (;;) {
    std::vector<std::pair<uint64_t, Seen>> fresh;
    {
      std::unique_lock lock(mutex);
      wake.wait_for(lock, std::chrono::seconds(1), [&] { return stopping; });
      if (stopping) {
        return;
      }
      if (!capturing()) {
        for (auto& [stream, seen] : streams) {
          if (seen.fresh && pending.count(stream) == 0) {
            fresh.emplace_back(stream, seen);
            seen.fresh = false;
          }
        }
      }
    }
    const auto now = Clock::now();
    for (auto it = pending.begin(); it != pending.end();) {
      const CUresult state = api.eventQuery(it->second.event);
      if (state == CUDA_ERROR_NOT_READY) {
        if (now - it->second.recordedAt >= limit) {
          fire(Hang{it->first, it->second.lastLaunch, seconds});
          return;
        }
        ++it;
        continue;
      }
      // Done, or an error the error trigger sees in the program's calls.
      api.eventDestroy(it->second.event);
      it = pending.erase(it);
    }
    for (const auto& [stream, seen] : fresh) {
      if (api.ctxSetCurrent(reinterpret_cast<CUcontext>(seen.context)) != CUDA_SUCCESS) {
        continue;
      }
      CUevent event = nullptr;
      if (api.eventCreate(&event, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS) {
        continue;
      }
      if (api.eventRecord(event, reinterpret_cast<CUstream>(stream)) != CUDA_SUCCESS) {
        api.eventDestroy(event);
        continue;
      }
      pending[stream] = {event, seen.lastLaunch, Clock::now()};
    }
  }
}

}  // namespace kcap
