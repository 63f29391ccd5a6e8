// Re-execution's events on the replay stream (reexecute.h): launches go out
// back to back without a wait, copies and memsets behind them in recorded
// order, and the stream is waited for only where something must be read
// back. A launch's fault then shows at a later call or at the wait, not at
// the launch: the interval is reported with the launches it could be in
// (IntervalReport::faultAmong), and reexecuteIsolated runs it again with a
// wait after every launch to name the one.
#include <algorithm>
#include <chrono>
#include <optional>
#include <utility>

#include "driver.h"
#include "errors.h"
#include "reexecutor.h"
#include "schema_names.h"

namespace kcap::replay {
namespace {

// Launches between two markers: how often the watchdog hears of progress,
// and how finely a wait reports it. Fewer when the program's launches took
// long (setMarkSpacing), so that a group of them finishes well within
// --timeout.
constexpr uint64_t kMarkEvery = 256;
constexpr double kGroupShareOfTimeout = 0.1;
// Host-to-device copies' sources wait in page-locked memory until the next
// drain; a copy larger than this goes through the synchronous path.
constexpr uint64_t kArenaBytes = uint64_t{64} << 20;

}  // namespace

bool Reexecutor::runLaunch(const LaunchRecord& launch, IntervalReport& report, ReexecutionListener& listener) {
  const auto e = launch.event();
  if (e.getCapturing()) return false;                  // captured into a graph: it runs in a graph launch
  if (launch.result().value_or(0) != 0) return false;  // refused: never ran
  const size_t position = static_cast<size_t>(&launch - model_.launches().data());
  const LoadedKernel* kernel = position < kernelAt_.size() ? kernelAt_[position] : nullptr;
  if (kernel == nullptr) {
    if (passedOver_.count(launch.launchIndex) != 0) return false;
    const auto it = launchCodeError_.find(launch.launchIndex);
    throw IntervalStop{IntervalVerdict::kNotReexecutable,
                       "launch " + std::to_string(launch.launchIndex) +
                           (it != launchCodeError_.end() ? it->second : std::string(": its code was not loaded"))};
  }
  r_.buildParamsInto(launch, *kernel, params_);
  writeLoggedInputs(launch, listener);
  const bool around = around_ && aroundIndex_ == launch.launchIndex;
  // One at a time when something looks at the memory right after a launch.
  const bool wait = synchronized_ || around || afterLaunch_;
  if (around) {
    drain(listener);
    around_(true);
  }
  if (wait) {
    listener.launchStarting(launch.launchIndex);
  } else if (!inFlight_) {
    listener.launchesQueued(launch.launchIndex);  // the watchdog runs from the first launch not waited for
  }
  try {
    r_.launchOnce(launch, *kernel, params_.bytes, wait);
  } catch (const CudaError& error) {
    // A sticky error at a launch's submission while others run may be theirs.
    if (!inFlight_ || !error.sticky()) {
      report.faultLaunch = launch.launchIndex;
      report.faultKernel = e.getKernelName();
    } else {
      lastSubmitted_ = launch.launchIndex;
    }
    throw;
  }
  if (wait) {
    listener.launchDone(launch.launchIndex);
  } else {
    if (!inFlight_) inFlight_ = launch.launchIndex;
    lastSubmitted_ = launch.launchIndex;
    if (++sinceMark_ >= markEvery_) mark(listener);
  }
  if (around) around_(false);
  if (afterLaunch_) afterLaunch_(launch);
  return true;
}

// The page-locked host memory, managed memory and other processes' memory
// the launch reads, as the launch saw it when it was recorded: the host or another
// process may have rewritten it between launches without a CUDA call of
// this one, so it is logged with every launch that reaches it and written,
// stream-ordered, right before the launch.
void Reexecutor::writeLoggedInputs(const LaunchRecord& launch, ReexecutionListener& listener) {
  for (const auto range : launch.event().getPre()) {
    if (!isLoggedInput(range.getKind())) continue;
    const auto content = range.getContent();
    const uint64_t size = content.getSize();
    if (size == 0) continue;
    const auto stop = [&](const std::string& why) {
      throw IntervalStop{IntervalVerdict::kNotReexecutable, "launch " + std::to_string(launch.launchIndex) +
                                                                "'s logged input at " + hexText(range.getAddress()) +
                                                                ": " + why};
    };
    if (coverage(range.getAddress(), size) != Coverage::kInside) stop("not placed");
    const uint64_t dst = here(range.getAddress());
    try {
      uint8_t* bytes = synchronized_ || afterLaunch_ ? nullptr : hostBytes(size, listener);
      if (bytes != nullptr) {
        reader_.readContentInto(content, bytes, size);
        check(r_.driver_.cuMemcpyHtoDAsync(dst, bytes, size, r_.stream_), "writing a launch's logged input");
      } else {
        drain(listener);
        const std::vector<uint8_t> data = reader_.readContent(content);
        if (data.size() != size) stop("its content holds " + std::to_string(data.size()) + " bytes");
        r_.copyToDevice(dst, data.data(), size);
      }
    } catch (const format::FormatError& e) {
      stop(e.what());
    }
  }
}

void Reexecutor::setMarkSpacing(const IntervalReport& bounds) {
  markEvery_ = kMarkEvery;
  if (bounds.programNs == 0 || bounds.firstLaunch > bounds.lastLaunch) return;
  // The program's time a launch, an upper bound on the device's while the
  // program was launch-bound or waited for its launches.
  const double launches = static_cast<double>(bounds.lastLaunch - bounds.firstLaunch) + 1;
  const double perLaunchNs = static_cast<double>(bounds.programNs) / launches;
  const double group = kGroupShareOfTimeout * r_.options_.timeoutSeconds * 1e9 / perLaunchNs;
  markEvery_ =
      group >= static_cast<double>(kMarkEvery) ? kMarkEvery : std::max<uint64_t>(1, static_cast<uint64_t>(group));
}

void Reexecutor::mark(ReexecutionListener& listener) {
  const size_t used = markerLaunch_.size();
  if (used == markers_.size()) {
    CUevent event = nullptr;
    check(r_.driver_.cuEventCreate(&event, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
    markers_.push_back(event);
  }
  check(r_.driver_.cuEventRecord(markers_[used], r_.stream_), "cuEventRecord");
  markerLaunch_.push_back(lastSubmitted_);
  sinceMark_ = 0;
  listener.launchesQueued(lastSubmitted_);
}

void Reexecutor::drain(ReexecutionListener& listener) {
  if (inFlight_) {
    listener.launchesQueued(lastSubmitted_);
    for (size_t i = 0; i < markerLaunch_.size(); ++i) {
      check(r_.driver_.cuEventSynchronize(markers_[i]), "waiting for the launches");
      listener.launchesCompleted(markerLaunch_[i]);
    }
  }
  check(r_.driver_.cuStreamSynchronize(r_.stream_), "waiting for the launches");
  if (inFlight_) listener.launchesCompleted(lastSubmitted_);
  clearQueue();
}

void Reexecutor::clearQueue() {
  inFlight_.reset();
  markerLaunch_.clear();
  sinceMark_ = 0;
  arenaUsed_ = 0;
}

uint8_t* Reexecutor::hostBytes(uint64_t size, ReexecutionListener& listener) {
  if (size > kArenaBytes) return nullptr;
  if (arena_ == nullptr) {
    void* p = nullptr;
    check(r_.driver_.cuMemAllocHost(&p, kArenaBytes), "cuMemAllocHost for copies");
    arena_ = static_cast<uint8_t*>(p);
  }
  if (kArenaBytes - arenaUsed_ < size) drain(listener);
  uint8_t* at = arena_ + arenaUsed_;
  arenaUsed_ = std::min(kArenaBytes, arenaUsed_ + ((size + 63) & ~uint64_t{63}));
  return at;
}

// Stream-ordered with the launches: memsets and device-to-device copies go
// on the replay stream as they are; a host-to-device copy's bytes are read
// into the arena, which nothing rewrites before the stream is waited for. A
// 2D/3D copy from the host, or one over the arena, goes the Replayer's
// synchronous way (through its staging buffer) after a drain.
void Reexecutor::issueMemoryOp(const StoredEvent& op, ReexecutionListener& listener) {
  if (synchronized_ || afterLaunch_) {
    r_.applyMemoryOp(op);  // waited for, as the launches are
    return;
  }
  const auto event = op.get();
  // The bytes a 1D copy or an NCCL call wrote, as the trace holds them.
  std::optional<std::pair<uint64_t, schema::Content::Reader>> write;
  if (event.isMemcpy()) {
    const auto copy = event.getMemcpy();
    if (copy.getResult() == 0 && copy.getData().getSize() != 0) {
      if (copy.getWidth() != 0) {
        drain(listener);
        r_.applyMemoryOp(op);
        return;
      }
      write.emplace(copy.getDst(), copy.getData());
    }
  } else if (event.isCollective()) {
    const auto collective = event.getCollective();
    if (collective.getResult() == 0 && collective.getData().getSize() != 0) {
      write.emplace(collective.getRecvBuffer(), collective.getData());
    }
  }
  if (write) {
    const uint64_t size = write->second.getSize();
    uint8_t* bytes = hostBytes(size, listener);
    if (bytes == nullptr) {
      drain(listener);
      r_.applyMemoryOp(op);
      return;
    }
    const auto dst = r_.translate(write->first, r_.opGlobals_);
    if (!dst) return;  // into memory no re-executed launch reaches
    reader_.readContentInto(write->second, bytes, size);
    check(r_.driver_.cuMemcpyHtoDAsync(*dst, bytes, size, r_.stream_), "replaying a recorded write");
    if (inFlight_) listener.launchesQueued(lastSubmitted_);  // reading the bytes took the host a while
    return;
  }
  r_.applyMemoryOpOnStream(op);
}

void Reexecutor::runMemoryOp(const StoredEvent& op, ReexecutionListener& listener) {
  const auto event = op.get();
  // Built only for a message: this runs for every copy and memset.
  const auto where = [&] { return " at event #" + std::to_string(op.seq()); };
  const auto stop = [&](const std::string& what) { throw IntervalStop{IntervalVerdict::kNotReexecutable, what}; };
  // Whether [address, address + size) is memory re-execution holds: false
  // when it lies outside all of it (host memory: passed over), a stop when
  // it lies partly outside.
  const auto writes = [&](uint64_t address, uint64_t size, const char* what) {
    const Coverage c = coverage(address, size);
    if (c == Coverage::kPartial) {
      stop(std::string(what) + where() + " reaches " + hexText(address) + " + " + std::to_string(size) +
           " bytes, past the recorded device memory");
    }
    return c == Coverage::kInside;
  };
  if (event.isMemcpy()) {
    const auto copy = event.getMemcpy();
    if (copy.getResult() != 0) return;
    const auto direction = copy.getDirection();
    if (direction == schema::CopyDirection::DEVICE_TO_HOST || direction == schema::CopyDirection::HOST_TO_HOST) return;
    const uint64_t data = copy.getData().getSize();
    const bool deviceSource = direction == schema::CopyDirection::DEVICE_TO_DEVICE ||
                              (direction == schema::CopyDirection::UNKNOWN && copy.getSrc() != 0);
    if (!deviceSource && data == 0 && copy.getSize() != 0) {
      stop("the host-to-device copy" + where() + " was recorded without its data");
    }
    if (copy.getDataDeferred() && data == 0 && copy.getSize() != 0) {
      stop("the copy from another device" + where() +
           " was recorded without what it wrote (its read-back failed, or the trace ends before it)");
    }
    if (copy.getWidth() == 0) {
      const uint64_t size = copy.getSize();
      if (data != 0 && data != size) {
        stop("the copy" + where() + " holds " + std::to_string(data) + " bytes for its " + std::to_string(size));
      }
      if (!writes(copy.getDst(), size, "the copy")) return;
      if (deviceSource && data == 0 && !writes(copy.getSrc(), size, "the device-to-device copy")) {
        stop("the device-to-device copy" + where() + " reads " + hexText(copy.getSrc()) +
             ", outside the recorded device memory");
      }
    } else if (const auto rows = copyRows(copy); rows && rows->rows != 0) {
      // The whole span of the rows (copyRows checked it does not wrap).
      const auto span = [&](uint64_t slicePitch, uint64_t pitch) {
        return (rows->slices - 1) * slicePitch + (rows->rows - 1) * pitch + rows->width;
      };
      if (!writes(copy.getDst(), span(rows->dstSlicePitch, rows->dstPitch), "the 2D/3D copy")) return;
      if (deviceSource && data == 0 &&
          !writes(copy.getSrc(), span(rows->srcSlicePitch, rows->srcPitch), "the 2D/3D device-to-device copy")) {
        stop("the 2D/3D device-to-device copy" + where() + " reads outside the recorded device memory");
      }
    }
  } else if (event.isCollective()) {
    // What an NCCL call wrote, in place of its kernels (passed over).
    const auto collective = event.getCollective();
    if (collective.getResult() != 0 || collective.getWritten() == 0) return;
    const uint64_t size = collective.getWritten();
    const auto what = [&] { return "the NCCL " + format::enumName(collective.getOperation()); };
    if (const auto missing = collective.getDataMissing(); missing.size() != 0) {
      stop(what() + where() + " wrote " + std::to_string(size) +
           " bytes the trace does not hold: " + std::string(missing.cStr()));
    }
    if (collective.getData().getSize() != size) {
      stop(what() + where() + " holds " + std::to_string(collective.getData().getSize()) + " bytes of the " +
           std::to_string(size) + " it wrote");
    }
    if (!writes(collective.getRecvBuffer(), size, "the NCCL call")) {
      stop(what() + where() + " wrote " + hexText(collective.getRecvBuffer()) + ", outside the recorded device memory");
    }
  } else if (event.isMemset()) {
    const auto set = event.getMemset();
    if (set.getResult() != 0) return;
    // What applyMemoryOp writes: rows of count elements of 1, 2 or else 4 bytes.
    const uint64_t element = set.getElementSize() == 1 ? 1 : set.getElementSize() == 2 ? 2 : 4;
    const uint64_t rows = std::max<uint64_t>(set.getHeight(), 1);
    uint64_t width = 0, last = 0, span = 0;
    if (set.getPitch() == 0 && rows > 1)
      stop("the memset" + where() + " has " + std::to_string(rows) + " rows of pitch 0");
    if (__builtin_mul_overflow(set.getCount(), element, &width) ||
        __builtin_mul_overflow(rows - 1, set.getPitch(), &last) || __builtin_add_overflow(last, width, &span)) {
      stop("the memset" + where() + " reaches past the end of the address space");
    }
    if (set.getPitch() != 0 && set.getHeight() == 0) return;  // a 2D memset of no rows
    if (!writes(set.getDst(), span, "the memset")) return;
  } else {
    return;
  }
  issueMemoryOp(op, listener);
}

// Runs the events in (afterSeq, beforeSeq) and waits for them. Ends with
// IntervalStop when the interval cannot go on; a CudaError passes through,
// with report.faultLaunch, or report.faultAmong when launches were in flight.
void Reexecutor::reexecute(uint64_t afterSeq, uint64_t beforeSeq, IntervalReport& report, ReexecutionListener& listener,
                           std::optional<uint64_t> reportLaunch) {
  const auto start = std::chrono::steady_clock::now();
  uint64_t launches = 0;
  try {
    for (const TimelineEvent& event : plan_.eventsBetween(afterSeq, beforeSeq)) {
      switch (event.kind) {
        case TimelineEvent::Kind::kLaunch:
          if (runLaunch(*event.launch, report, listener)) ++launches;
          if (reportLaunch && event.launch->launchIndex == *reportLaunch && !quiet_) {
            LaunchOutcome o = outcomeOf(*event.launch);
            o.verdict = Verdict::kUnverified;
            o.memory = MemoryPath::kFixed;
            const size_t position = static_cast<size_t>(event.launch - model_.launches().data());
            if (position < kernelAt_.size() && kernelAt_[position] != nullptr) o.code = kernelAt_[position]->code;
            o.detail = "re-executed from checkpoint " + std::to_string(report.fromCheckpoint.value_or(0)) +
                       "; its results are verified with the interval";
            listener.launch(o);
          }
          break;
        case TimelineEvent::Kind::kMemoryOp:
          try {
            runMemoryOp(*event.event, listener);
          } catch (const CudaError& e) {
            throw CudaError(e.result(), "the copy or memset at event #" + std::to_string(event.seq) + ": " + e.what());
          } catch (const IntervalStop&) {
            throw;
          } catch (const std::exception& e) {
            throw IntervalStop{IntervalVerdict::kNotReexecutable, e.what()};
          }
          break;
        case TimelineEvent::Kind::kGraphLaunch:
          // (One the driver refused when recorded ran nothing.)
          if (event.event->get().getGraphLaunch().getResult() == 0) runGraphLaunch(*event.event, listener);
          break;
        case TimelineEvent::Kind::kAllocation:
          // Placed from the start; what a new allocation held when the
          // driver handed it over, logged with it, is written at its place.
          if (event.event->get().isAlloc() && event.event->get().getAlloc().getInitialDeferred()) {
            throw IntervalStop{IntervalVerdict::kNotReexecutable,
                               "the first content of the stream-ordered allocation at event #" +
                                   std::to_string(event.seq) + " was not read back"};
          }
          if (event.event->get().isAlloc() && event.event->get().getAlloc().getInitial().size() != 0) {
            drain(listener);
            try {
              r_.applyMemoryOp(*event.event);
            } catch (const CudaError&) {
              throw;
            } catch (const std::exception& e) {
              throw IntervalStop{IntervalVerdict::kNotReexecutable, e.what()};  // a damaged trace
            }
          }
          break;
      }
    }
    drain(listener);
  } catch (const CudaError& error) {
    if (inFlight_ && error.sticky() && !report.faultLaunch) report.faultAmong = {{*inFlight_, lastSubmitted_}};
    clearQueue();
    throw;
  } catch (...) {
    // Nothing may stay in flight past the interval: what ran is waited for,
    // and a fault found then ends the interval instead.
    try {
      drain(listener);
    } catch (const CudaError& error) {
      if (inFlight_ && error.sticky()) report.faultAmong = {{*inFlight_, lastSubmitted_}};
      clearQueue();
      throw;
    }
    throw;
  }
  if (report.reexecutionNs == 0) {
    report.launchesRun = launches;
    report.reexecutionNs = static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count());
  }
}

}  // namespace kcap::replay
