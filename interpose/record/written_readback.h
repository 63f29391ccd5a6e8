// Reads back what another agent wrote into this process's device memory (an
// NCCL call's result on this rank, a copy from another device) without
// holding the thread that made the call.
//
// Checkpoint mode must log those bytes: re-execution cannot recompute them.
// Waiting for the call's stream and then copying would hold the calling
// thread until the collective completed, serializing a training step's
// communication with the work it queues after it. Instead a request queues,
// on the call's own stream, a device-to-host copy into page-locked memory
// and an event after it, and returns. Stream order makes the copy read what
// the call wrote and nothing the program queues later on that stream. A
// thread of its own polls the events in request order (cuEventQuery, never
// a blocking wait, so that finish() is never held by the device) and hands
// each finished copy's bytes over (`Deliver`), which stores them and
// appends a WrittenData event naming the call's event.
//
// Every request is delivered exactly once: with its bytes, or with why
// there are none (the copy could not be queued or failed, the recording
// ended first). A 2D or 3D copy's rows are read back packed, one copy
// for all of them. The page-locked memory in flight is bounded: a request
// waits for earlier ones to finish while its bytes would pass the bound,
// and one larger than the bound is not taken (the caller reads it back
// itself, waiting for the stream, as before).
#pragma once

#include <cuda.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace kcap {

class WrittenReadback {
 public:
  // Whose bytes a read-back holds: the event numbered `of` (a Collective, a
  // Memcpy, a GraphLaunch) and, for a graph launch, the copy node of its
  // graph they were read from (WrittenData.node).
  struct Owner {
    uint64_t of = 0;
    uint64_t node = 0;
  };

  // On the read-back's thread (or, for a request that fails at once or is
  // left at finish(), on the caller's): `bytes` null when `missing` says why.
  using Deliver =
      std::function<void(const Owner& owner, const uint8_t* bytes, uint64_t size, const std::string& missing)>;

  WrittenReadback(uint64_t maxBytesInFlight, Deliver deliver);
  ~WrittenReadback();
  WrittenReadback(const WrittenReadback&) = delete;
  WrittenReadback& operator=(const WrittenReadback&) = delete;

  // What to read back: `size` bytes at `address`; or, when `width` is not
  // 0, a 2D/3D copy's destination rows, packed (`size` = width * rows *
  // slices): `rows` rows of `width` bytes `pitch` apart in each of
  // `slices` slices, which start `pitch * sliceRows` apart.
  struct Region {
    uint64_t address = 0;
    uint64_t size = 0;
    uint64_t width = 0;
    uint64_t pitch = 0;
    uint64_t sliceRows = 0;
    uint64_t rows = 1;
    uint64_t slices = 1;
  };

  // Whether a request of `size` bytes would be taken: the driver has what it
  // needs, size is within the bound, and finish() has not begun.
  bool takes(uint64_t size) const;

  // Queues the read-back of `region` on `stream` (of any context; it must
  // not be capturing into a graph), for `owner`. Returns once the copy is
  // queued (having waited for room, see above); the bytes are delivered
  // later. A request takes() refuses is delivered missing.
  void request(const Owner& owner, CUstream stream, const Region& region);

  // Waits up to `wait` for the requests made so far to be delivered (none:
  // the driver may not be called, after a fatal signal), then delivers the
  // rest missing on the calling thread. Nothing is delivered after it
  // returns; later requests are refused.
  void finish(std::chrono::milliseconds wait, bool driverUsable) noexcept;

  struct Shared;

 private:
  std::shared_ptr<Shared> shared_;  // with the thread, which is detached
};

// The copy of a region's rows (Region::width not 0) from the device into
// `host`, packed: for cuMemcpy3D or cuMemcpy3DAsync.
CUDA_MEMCPY3D packedRowsCopy(const WrittenReadback::Region& region, void* host);

}  // namespace kcap
