// Checkpoint mode: when checkpoints are due and how one is taken into the
// trace (what a checkpoint is: checkpoint.h; the gate: core/checkpoint_gate.h).
#include "record/recorder.h"

#include "core/checkpoint_gate.h"
#include "hooks/shim_log.h"
#include "record/driver_api.h"

#include <algorithm>
#include <cstdint>
#include <string>

namespace kcap {
namespace {

// How long a checkpoint waits for the program's queued work before it is
// postponed: long enough for a deep queue of ordinary kernels, short enough
// that a kernel spinning until the host releases it gets released.
constexpr uint64_t kDrainMs = 1000;

}  // namespace

void Recorder::lastCheckpointAtExit() noexcept {
  Recorder* recorder = current();
  if (recorder != nullptr && recorder->checkpoints_ != nullptr && !recorder->lastCheckpointTaken_.exchange(true)) {
    recorder->checkpointNow(schema::CheckpointReason::END, std::chrono::milliseconds(1000));
  }
}

void Recorder::scheduleCheckpoint(bool postponed) noexcept {
  // A postponed checkpoint is tried again after a quarter of the interval.
  if (options_.checkpointEveryLaunches != 0) {
    const uint64_t step = postponed ? options_.checkpointEveryLaunches / 4 + 1 : options_.checkpointEveryLaunches;
    nextCheckpointLaunch_.store(eligibleLaunches_.load(std::memory_order_relaxed) + step, std::memory_order_relaxed);
  } else {
    const uint64_t step = postponed ? options_.checkpointEveryNs / 4 + 1 : options_.checkpointEveryNs;
    const uint64_t now = clock_.stamp();
    const uint64_t span = clock_.stampsIn(step);
    nextCheckpointStamp_.store(span > UINT64_MAX - now ? UINT64_MAX : now + span, std::memory_order_relaxed);
  }
}

void Recorder::checkpointNow(schema::CheckpointReason reason, std::chrono::milliseconds gateWait) noexcept {
  if (checkpoints_ == nullptr || checkpointsFailed_.load(std::memory_order_relaxed)) {
    return;
  }
  // A stream capturing into a graph must not see the drain's event records
  // as work of its own: wait until no capture is in progress.
  if (activeCaptures_.load() > 0) {
    scheduleCheckpoint(true);
    return;
  }
  // --checkpoint-device: the first checkpoint waits for a launch on that
  // device (it stays due meanwhile).
  if (!checkpoints_->mayTakeHere(options_.checkpointDevice)) {
    if (reason == schema::CheckpointReason::END) {
      noteOnce(notedNoCheckpointDevice_, schema::Message::Level::WARNING,
               "no checkpoint was taken: no launch ran on device " + std::to_string(options_.checkpointDevice) +
                   " (KCAP_CHECKPOINT_DEVICE)");
    }
    return;
  }
  const uint64_t startNs = clock_.nowNs();
  const CheckpointGate::Closed closed(ThreadWork::mine(), gateWait);
  if (!closed) {
    if (reason != schema::CheckpointReason::END) scheduleCheckpoint(true);
    return;  // another thread is taking one, or calls did not leave in time
  }
  try {
    // The gate is closed: every other thread's launch so far has been
    // appended; once the writer has numbered them, eligibleLaunches_ is
    // exact (metadata mode numbers launches on the writer's merger thread).
    writer_->waitSequenced();
    if (reason == schema::CheckpointReason::INTERVAL) {
      reason = eligibleLaunches_.load() == 0 ? schema::CheckpointReason::FIRST : schema::CheckpointReason::INTERVAL;
    }
    const CheckpointTaker::Result taken = checkpoints_->take(
        allocations_.snapshot(),
        [] {
          std::vector<SnapshotRange> globals;
          for (const GlobalVariable& g : CodeRegistry::instance().allGlobals()) {
            globals.push_back({g.address, g.size, g.address, schema::MemoryKind::MODULE_GLOBAL});
          }
          return globals;
        }(),
        kDrainMs);
    if (taken.postponed) {
      // After a drain that took all its time, not again before a whole
      // interval: the launching thread must not spend its time waiting.
      if (reason != schema::CheckpointReason::END) scheduleCheckpoint(!taken.drainTimedOut);
      return;
    }
    if (reason == schema::CheckpointReason::END && taken.error != CUDA_SUCCESS) {
      // The program may have let its context go already: no last
      // checkpoint then, and replay verifies up to the one before.
      char name[32];
      note(schema::Message::Level::WARNING, std::string("no checkpoint at the end of the recording: ") +
                                                taken.errorWhere + " failed: " + resultName(taken.error, name));
      return;
    }
    EventMessage message(*this, false);
    auto checkpoint = message.event().initCheckpoint();
    checkpoint.setOrdinal(checkpointOrdinal_++);
    checkpointWritten_.store(true, std::memory_order_relaxed);
    freedSinceCheckpoint_.clear();  // the checkpoint holds none of it
    checkpoint.setLaunchCount(eligibleLaunches_.load());
    checkpoint.setReason(reason);
    CheckpointTaker::write(taken, writer_->pieceSize(), checkpoint);
    checkpoint.setHoldNs(clock_.nowNs() - startNs);
    append(message);
    if (taken.otherDeviceRanges != 0) {
      noteOnce(notedOtherDevices_, schema::Message::Level::WARNING,
               "checkpoints hold the memory of device " + std::to_string(taken.device) +
                   " (KCAP_CHECKPOINT_DEVICE, or current at the first checkpoint); " +
                   std::to_string(taken.otherDeviceRanges) +
                   " live allocations of other devices are not in them, and replay does not re-execute their "
                   "launches");
    }
    if (taken.error != CUDA_SUCCESS) {
      char name[32];
      const std::string why = std::string("a checkpoint could not be completed while ") + taken.errorWhere + ": " +
                              resultName(taken.error, name);
      note(schema::Message::Level::ERROR, why);
      checkpoints_->forgetPrevious();
      if (taken.error == CUDA_ERROR_NOT_SUPPORTED || taken.error == CUDA_ERROR_NOT_FOUND ||
          taken.error == CUDA_ERROR_NO_BINARY_FOR_GPU) {
        checkpointsFailed_.store(true);  // the hash kernel cannot run here: no checkpoint ever will
        KCAP_LOG_ONCE("%s; no more checkpoints are taken", why.c_str());
      }
    }
  } catch (...) {
    // The writer failed (it says why when it closes); the recording goes on
    // without this checkpoint.
    checkpoints_->forgetPrevious();
  }
  if (reason != schema::CheckpointReason::END) scheduleCheckpoint(false);
}

}  // namespace kcap
