#include "record/written_readback.h"

#include "record/background_thread.h"
#include "record/driver_api.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

namespace kcap {
namespace {

// Page-locked buffers are made in whole MiB, so that requests of nearby
// sizes reuse them.
constexpr uint64_t kGrain = 1u << 20;

uint64_t capacityFor(uint64_t size) { return (size + kGrain - 1) / kGrain * kGrain; }

bool driverHasWhatItNeeds() {
  const DriverApi& api = driverApi();
  return api.memHostAlloc != nullptr && api.memFreeHost != nullptr && api.memcpyDtoHAsync != nullptr &&
         api.eventCreate != nullptr && api.eventRecord != nullptr && api.eventQuery != nullptr &&
         api.eventDestroy != nullptr && api.ctxGetCurrent != nullptr && api.ctxSetCurrent != nullptr;
}

// Queues the copy of `region` into `buffer`, packed.
CUresult queueCopy(uint8_t* buffer, const WrittenReadback::Region& region, CUstream stream) {
  const DriverApi& api = driverApi();
  if (region.width == 0) return api.memcpyDtoHAsync(buffer, region.address, region.size, stream);
  if (api.memcpy3DAsync == nullptr) return CUDA_ERROR_NOT_FOUND;
  const CUDA_MEMCPY3D copy = packedRowsCopy(region, buffer);
  return api.memcpy3DAsync(&copy, stream);
}

std::string resultText(CUresult result) { return "CUresult " + std::to_string(static_cast<int>(result)); }

// Locks `mutex` unless that takes past `deadline`: on a fatal signal the
// thread ending the recording may itself hold it (interrupted in request()),
// and then never gets it.
bool lockBy(std::unique_lock<std::mutex>& lock, std::chrono::steady_clock::time_point deadline) {
  while (!lock.try_lock()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  return true;
}

}  // namespace

CUDA_MEMCPY3D packedRowsCopy(const WrittenReadback::Region& region, void* host) {
  CUDA_MEMCPY3D p{};
  p.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  p.srcDevice = region.address;
  p.srcPitch = region.pitch;
  p.srcHeight = region.sliceRows;
  p.dstMemoryType = CU_MEMORYTYPE_HOST;
  p.dstHost = host;
  p.dstPitch = region.width;
  p.dstHeight = region.rows;
  p.WidthInBytes = region.width;
  p.Height = region.rows;
  p.Depth = region.slices;
  return p;
}

struct WrittenReadback::Shared : std::enable_shared_from_this<WrittenReadback::Shared> {
  struct Entry {
    Owner owner;
    CUcontext context = nullptr;
    CUevent event = nullptr;
    uint8_t* buffer = nullptr;
    uint64_t capacity = 0;
    uint64_t size = 0;
  };

  uint64_t maxBytes = 0;
  Deliver deliver;
  bool driverReady = false;

  std::mutex mutex;
  std::condition_variable changed;         // a request queued, a read-back finished, finish() began
  std::deque<Entry> queue;                 // in request order; only the thread pops
  std::multimap<uint64_t, uint8_t*> free;  // page-locked buffers not in use, by capacity
  uint64_t held = 0;                       // page-locked bytes made: in flight and free
  bool threadStarted = false;
  bool stopping = false;  // the thread returns at its next look
  std::atomic<bool> finishing{false};

  std::mutex deliverMutex;  // held while delivering; finish() takes deliveries over
  bool closed = false;      // under deliverMutex: nothing more is delivered

  void run() noexcept;
  uint8_t* acquire(uint64_t capacity, uint64_t& got, std::unique_lock<std::mutex>& lock);
  void deliverMissing(const Owner& owner, const std::string& why) noexcept;
  bool startThread();
};

WrittenReadback::WrittenReadback(uint64_t maxBytesInFlight, Deliver deliver) : shared_(std::make_shared<Shared>()) {
  shared_->maxBytes = maxBytesInFlight;
  shared_->deliver = std::move(deliver);
  shared_->driverReady = driverHasWhatItNeeds();
}

WrittenReadback::~WrittenReadback() {
  // The deliverer may be gone after this: no delivery, from any thread.
  const std::lock_guard delivering(shared_->deliverMutex);
  shared_->closed = true;
  const std::lock_guard lock(shared_->mutex);
  shared_->stopping = true;
  shared_->finishing = true;
  shared_->changed.notify_all();
}

bool WrittenReadback::takes(uint64_t size) const {
  return shared_->driverReady && size != 0 && capacityFor(size) <= shared_->maxBytes &&
         !shared_->finishing.load(std::memory_order_relaxed);
}

void WrittenReadback::Shared::deliverMissing(const Owner& owner, const std::string& why) noexcept {
  const std::lock_guard delivering(deliverMutex);
  if (closed) return;
  try {
    deliver(owner, nullptr, 0, why);
  } catch (...) {
    // the writer failed; the trace's end says why
  }
}

bool WrittenReadback::Shared::startThread() {
  return startBackgroundThread("kcap-readback", [self = shared_from_this()] { self->run(); });
}

// A free buffer of at least `capacity` bytes, or a new one while the bound
// allows; else frees unused ones, or waits for a read-back to finish. Null
// when none can be had (finish() began, the driver refused).
uint8_t* WrittenReadback::Shared::acquire(uint64_t capacity, uint64_t& got, std::unique_lock<std::mutex>& lock) {
  const DriverApi& api = driverApi();
  for (;;) {
    if (finishing.load()) return nullptr;
    if (const auto it = free.lower_bound(capacity); it != free.end()) {
      got = it->first;
      uint8_t* buffer = it->second;
      free.erase(it);
      return buffer;
    }
    if (held + capacity <= maxBytes) {
      held += capacity;
      void* made = nullptr;
      if (api.memHostAlloc(&made, capacity, CU_MEMHOSTALLOC_PORTABLE) != CUDA_SUCCESS || made == nullptr) {
        held -= capacity;
        return nullptr;
      }
      got = capacity;
      return static_cast<uint8_t*>(made);
    }
    if (!free.empty()) {  // too small for this request: make room
      const auto largest = std::prev(free.end());
      api.memFreeHost(largest->second);
      held -= largest->first;
      free.erase(largest);
      continue;
    }
    changed.wait(lock);
  }
}

void WrittenReadback::request(const Owner& owner, CUstream stream, const Region& region) {
  Shared& s = *shared_;
  const uint64_t size = region.size;
  if (!takes(size)) {
    s.deliverMissing(owner, "the read-back was refused (the recording is ending, or it is too large)");
    return;
  }
  const DriverApi& api = driverApi();
  Shared::Entry entry;
  entry.owner = owner;
  entry.size = size;
  {
    std::unique_lock lock(s.mutex);
    if (!s.threadStarted) {
      if (!s.startThread()) {
        lock.unlock();
        s.deliverMissing(owner, "the read-back thread could not be started");
        return;
      }
      s.threadStarted = true;
    }
    entry.buffer = s.acquire(capacityFor(size), entry.capacity, lock);
  }
  if (entry.buffer == nullptr) {
    s.deliverMissing(owner, "no page-locked memory could be had for the read-back");
    return;
  }
  // The copy and its event go in the stream's context, which need not be
  // the current one (a group of NCCL calls on several devices is recorded
  // at its ncclGroupEnd): the driver checks a copy against the current
  // context, so that one is made current for them.
  CUcontext current = nullptr;
  CUresult result = api.ctxGetCurrent(&current);
  entry.context = current;
  if (result == CUDA_SUCCESS && api.streamGetCtx != nullptr) {
    CUcontext streamContext = nullptr;
    if (api.streamGetCtx(stream, &streamContext) == CUDA_SUCCESS && streamContext != nullptr) {
      entry.context = streamContext;
    }
  }
  bool copyQueued = false;
  if (result == CUDA_SUCCESS) {
    const ContextSwitch switched(entry.context, current);
    result = switched.result();
    if (result == CUDA_SUCCESS) result = queueCopy(entry.buffer, region, stream);
    copyQueued = result == CUDA_SUCCESS;
    if (result == CUDA_SUCCESS) result = api.eventCreate(&entry.event, CU_EVENT_DISABLE_TIMING);
    if (result == CUDA_SUCCESS) {
      result = api.eventRecord(entry.event, stream);
      if (result != CUDA_SUCCESS) api.eventDestroy(entry.event);
    }
  }
  std::unique_lock lock(s.mutex);
  if (result != CUDA_SUCCESS) {
    // A copy queued before a failed event may still land: that buffer is
    // not reused.
    if (!copyQueued) s.free.emplace(entry.capacity, entry.buffer);
    lock.unlock();
    s.deliverMissing(owner, "queuing the copy back failed (" + resultText(result) + ")");
    return;
  }
  s.queue.push_back(entry);
  s.changed.notify_all();
}

void WrittenReadback::Shared::run() noexcept {
  const DriverApi& api = driverApi();
  constexpr auto kFirstPoll = std::chrono::microseconds(20);
  constexpr auto kLongestPoll = std::chrono::milliseconds(1);
  std::chrono::microseconds poll = kFirstPoll;
  for (;;) {
    Entry front;
    {
      std::unique_lock lock(mutex);
      changed.wait(lock, [&] { return stopping || !queue.empty(); });
      if (stopping) return;
      front = queue.front();
    }
    api.ctxSetCurrent(front.context);
    const CUresult state = api.eventQuery(front.event);
    if (state == CUDA_ERROR_NOT_READY) {
      std::this_thread::sleep_for(poll);
      poll = std::min<std::chrono::microseconds>(poll * 2, kLongestPoll);
      continue;
    }
    poll = kFirstPoll;
    {
      const std::lock_guard delivering(deliverMutex);
      if (closed) return;
      {
        // Still the front: only this thread pops, and finish() takes the
        // queue only once it holds deliverMutex.
        const std::lock_guard lock(mutex);
        queue.pop_front();
      }
      try {
        if (state == CUDA_SUCCESS) {
          deliver(front.owner, front.buffer, front.size, std::string());
        } else {
          deliver(front.owner, nullptr, 0, "the copy back failed (" + resultText(state) + ")");
        }
      } catch (...) {
        // the writer failed; the trace's end says why
      }
    }
    api.eventDestroy(front.event);
    const std::lock_guard lock(mutex);
    if (state == CUDA_SUCCESS) free.emplace(front.capacity, front.buffer);  // else the copy may still land
    changed.notify_all();
  }
}

void WrittenReadback::finish(std::chrono::milliseconds wait, bool driverUsable) noexcept {
  Shared& s = *shared_;
  s.finishing = true;
  const auto deadline = std::chrono::steady_clock::now() + std::max(wait, std::chrono::milliseconds(100));
  {
    std::unique_lock lock(s.mutex, std::defer_lock);
    if (!lockBy(lock, deadline)) return;  // what is pending is not logged: replay names it missing
    s.changed.notify_all();
    if (driverUsable && s.threadStarted) {
      s.changed.wait_until(lock, deadline, [&] { return s.queue.empty(); });
    }
    s.stopping = true;
    s.changed.notify_all();
  }
  std::unique_lock delivering(s.deliverMutex, std::defer_lock);
  if (!lockBy(delivering, deadline + std::chrono::milliseconds(100)) || s.closed) return;
  std::deque<Shared::Entry> left;
  {
    std::unique_lock lock(s.mutex, std::defer_lock);
    if (!lockBy(lock, deadline + std::chrono::milliseconds(200))) return;
    left.swap(s.queue);
  }
  for (const Shared::Entry& entry : left) {
    try {
      s.deliver(entry.owner, nullptr, 0, "the recording ended before its copy back completed");
    } catch (...) {
      break;  // the writer failed
    }
  }
  s.closed = true;
}

}  // namespace kcap
