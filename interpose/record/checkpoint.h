// Checkpoints of all live device memory (checkpoint mode, docs/checkpoint.md).
//
// A checkpoint is taken on the thread of a launch that found one due, with
// the checkpoint gate closed (core/checkpoint_gate.h): no other call that
// changes device memory is in progress or can start. Then:
//   1. drain: an event is recorded on every stream the program used and on
//      the legacy default stream (which waits for all blocking streams), and
//      polled until all completed, for a bounded time. A kernel may wait for
//      the host (XLA times kernels behind one that spins on a page-locked
//      flag the host sets once it has queued them): while a launch that can
//      reach page-locked host memory has not completed, the checkpoint is
//      postponed at once rather than hold up the thread that would release
//      it (and the timing it takes); so it is when the work does not drain
//      in time. A postponed checkpoint writes nothing;
//   2. the change hash (format/change_hash.h) of every piece of every live
//      range, on the device, in one launch (kcap_change_hash);
//   3. pieces whose hash equals the previous checkpoint's keep its content
//      address; fresh pieces of zeros get the zero piece's; the others are
//      taken like a full-mode snapshot (hashed on the device, only pieces
//      the trace lacks copied);
//   4. the Checkpoint event names every piece of every range.
// One device is covered, the same in every checkpoint of a recording: the
// device of the context current at the first one (which --checkpoint-device
// can choose: see mayTakeHere). A later checkpoint due on a thread with
// another context current (a process driving several GPUs) makes that
// context current while it is taken. Allocations of other devices are left
// out (a note in the trace says so): what their work writes into this
// device's memory is logged as it happens (copies from another device,
// NCCL calls).
#pragma once

#include "change_hash.h"
#include "core/allocation_map.h"
#include "hash.h"
#include "kcap.capnp.h"
#include "record/change_hash.cuh"
#include "record/driver_api.h"
#include "record/memory_snapshot.h"
#include "trace_writer.h"

#include <cuda.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace kcap {

// One range a checkpoint holds.
struct CheckpointRangeState {
  SnapshotRange range;
  std::vector<format::ChangeHash> changeHashes;  // per piece
  std::vector<format::Hash128> content;          // per piece
};

class CheckpointTaker {
 public:
  CheckpointTaker(format::TraceWriter& writer, StagingPool& staging, bool hashOnDevice)
      : writer_(writer), staging_(staging), hashOnDevice_(hashOnDevice) {}
  CheckpointTaker(const CheckpointTaker&) = delete;
  CheckpointTaker& operator=(const CheckpointTaker&) = delete;

  // A stream the program queued work on (launch, copy, memset): a
  // checkpoint waits for it. On every launch: when the calling thread
  // named this stream last time (and no stream was destroyed since), no
  // lock is taken.
  void streamUsed(CUstream stream) {
    if (stream == t_lastStream && t_lastTaker == this &&
        t_lastGeneration == generation_.load(std::memory_order_relaxed)) {
      return;
    }
    addStream(stream);
  }
  void streamDestroyed(CUstream stream);
  // A launch that can reach page-locked host memory was submitted on
  // `stream`: it may wait for the host (a kernel spinning on a flag the
  // program sets once it has queued more work), so no checkpoint waits
  // for it: checkpoints are postponed until it has completed.
  void hostReadingLaunch(CUstream stream);

  struct Result {
    bool postponed = false;      // nothing to write: a host-reading launch is running, or the work did not drain
    bool drainTimedOut = false;  // postponed after waiting the whole drain time
    CUresult error = CUDA_SUCCESS;
    std::string errorWhere;  // which step failed
    std::vector<CheckpointRangeState> ranges;
    uint64_t changedPieces = 0;
    uint64_t changedBytes = 0;
    int device = -1;
    uint64_t otherDeviceRanges = 0;  // live ranges of other devices, left out
  };

  // Takes one (the gate held closed by the caller). `allocations` and
  // `globals` are the live ranges the recorder knows.
  Result take(const std::vector<Allocation>& allocations, const std::vector<SnapshotRange>& globals, uint64_t drainMs);

  // Writes `result` into `out` (ranges, hashes, counts); `pieceSize`: the trace's.
  static void write(const Result& result, uint32_t pieceSize, schema::Checkpoint::Builder out);

  // Whether this thread may take a checkpoint now: once one was taken,
  // always (its context is made current); before, only where the current
  // device is `device` (-1: any), so that the first one holds that device.
  bool mayTakeHere(int device) const {
    return context_.load(std::memory_order_relaxed) != nullptr || device < 0 || currentDevice() == device;
  }

  // After a checkpoint that could not be completed: the next one starts
  // from nothing (every piece fresh).
  void forgetPrevious() { previous_.clear(); }

 private:
  void addStream(CUstream stream);
  CUresult drain(uint64_t drainMs, bool& drained);
  bool hostReadersPending();
  CUresult hashAll(const std::vector<SnapshotRange>& ranges, std::vector<format::ChangeHash>& hashes);
  const format::ChangeHash& zeroHash(uint64_t length);
  const format::Hash128& zeroContent(uint64_t length);
  bool ensureBuffers(uint64_t pieces);

  format::TraceWriter& writer_;
  StagingPool& staging_;
  const bool hashOnDevice_;

  std::mutex streamsMutex_;
  std::set<CUstream> streams_;
  std::atomic<uint64_t> generation_{0};  // streams destroyed so far: invalidates the threads' last stream
  inline static thread_local CUstream t_lastStream = nullptr;
  inline static thread_local const CheckpointTaker* t_lastTaker = nullptr;
  inline static thread_local uint64_t t_lastGeneration = 0;
  std::vector<CUevent> hostReaders_;  // recorded behind launches that read host memory, not yet seen complete
  std::vector<CUevent> spareEvents_;

  // Only the thread holding the gate uses what follows.
  std::map<uint64_t, CheckpointRangeState> previous_;  // by address
  std::map<uint64_t, format::ChangeHash> zeroHashes_;  // length -> change hash of that many zeros
  std::map<uint64_t, format::Hash128> zeroPieces_;     // length -> content address of that many zeros
  std::vector<CUevent> events_;                        // one per drained stream, reused
  std::atomic<CUcontext> context_{nullptr};            // the first checkpoint's, current while one is taken
  CUstream hashStream_ = nullptr;
  ChangeHashPiece* pieces_ = nullptr;  // page-locked, mapped: the kernel reads it
  uint64_t* hashes_ = nullptr;         // page-locked, mapped: the kernel writes it
  uint64_t capacity_ = 0;              // pieces the two buffers hold
};

}  // namespace kcap
