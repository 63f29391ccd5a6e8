// The flight recorder's triggers (docs/checkpoint.md, "The flight
// recorder"): the recording's writer is a ring (format/ring_trace_writer.h)
// that writes nothing until a trigger fires; firing writes a trigger event,
// ends the recording and so writes the ring out as a trace.
//
//   api     kcap_trigger(reason), exported by the shim (below)
//   error   a driver call returned a sticky error (Recorder::apiError)
//   signal  SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL, SIGTERM, SIGUSR2 (the
//           signal thread, process/signals.cpp)
//   exit    exit, _exit or _Exit with a non-zero status (process/exit_hooks.cpp)
//   hang    a launch unfinished for the limit (the watchdog, hang_watchdog.cpp)
#include "core/cuda_result_names.h"
#include "hooks/shim_log.h"
#include "record/hang_watchdog.h"
#include "record/recorder.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>

namespace kcap {
namespace {

constexpr std::chrono::milliseconds kTriggerEndWait{1000};  // for other threads' events in progress
constexpr size_t kMaxReasonBytes = 4096;                    // of the program's text

const char* kindName(schema::TriggerKind kind) {
  switch (kind) {
    case schema::TriggerKind::API:
      return "api";
    case schema::TriggerKind::ERROR:
      return "error";
    case schema::TriggerKind::SIGNAL:
      return "signal";
    case schema::TriggerKind::EXIT:
      return "exit";
    case schema::TriggerKind::HANG:
      return "hang";
  }
  return "unknown";
}

bool isSignalTrigger(int sig) {
  switch (sig) {
    case SIGSEGV:
    case SIGABRT:
    case SIGBUS:
    case SIGFPE:
    case SIGILL:
    case SIGTERM:
    case SIGUSR2:
      return true;
    default:
      return false;
  }
}

}  // namespace

bool Recorder::lastLaunch(uint64_t& launchIndex) const noexcept {
  // Launches numbered by the writer are numbered on its merger thread:
  // every launch appended so far is counted once it has caught up.
  if (numberedByWriter_) writer_->waitSequenced();
  const uint64_t eligible = eligibleLaunches_.load();
  const uint64_t recorded = std::min(eligible > options_.skip ? eligible - options_.skip : 0, options_.maxLaunches);
  if (recorded == 0) {
    return false;
  }
  launchIndex = recorded - 1;
  return true;
}

bool Recorder::trigger(const TriggerFacts& facts, schema::EndReason endReason, int endSignal) noexcept {
  if (ring_ == nullptr || ending_.load() || triggered_.exchange(true)) {
    return false;
  }
  try {
    const uint64_t dropped = ring_->fire();  // nothing is let go from here on
    EventMessage message(*this, facts.kind == schema::TriggerKind::API || facts.kind == schema::TriggerKind::ERROR);
    auto event = message.event().initTrigger();
    event.setKind(facts.kind);
    event.setReason(facts.reason);
    event.setResult(facts.result);
    event.setSignal(facts.signal);
    event.setExitStatus(facts.exitStatus);
    event.setHasLaunch(facts.hasLaunch);
    event.setLaunchIndex(facts.launchIndex);
    event.setDroppedEvents(dropped);
    append(message);
  } catch (...) {
    // the ring failed: end() says so
  }
  // After a sticky error or with work that does not finish, the device
  // would not give a last checkpoint: ending (and the exit handler) take none.
  if (facts.kind == schema::TriggerKind::ERROR || facts.kind == schema::TriggerKind::HANG) {
    lastCheckpointTaken_.store(true);
  }
  end(endReason, endSignal, std::string("the flight recorder's trigger ") + kindName(facts.kind) + " fired",
      kTriggerEndWait);
  if (!writer_->path().empty()) {
    logMessage("trigger %s fired (%s): wrote %s", kindName(facts.kind), facts.reason.c_str(), writer_->path().c_str());
  }
  return true;
}

bool Recorder::triggerSignalCurrent(int sig, bool terminal) noexcept {
  Recorder* recorder = current();
  if (recorder == nullptr || !recorder->options_.triggers.signal || !isSignalTrigger(sig)) {
    return false;
  }
  try {
    TriggerFacts facts;
    facts.kind = schema::TriggerKind::SIGNAL;
    const char* name = sigabbrev_np(sig);
    facts.reason = std::string("SIG") + (name != nullptr ? name : std::to_string(sig).c_str());
    facts.signal = sig;
    // A signal the process survives (SIGUSR2, one the program handles)
    // ends only the recording.
    return recorder->trigger(facts, terminal ? schema::EndReason::SIGNAL : schema::EndReason::EXPLICIT,
                             terminal ? sig : 0);
  } catch (...) {
    return false;
  }
}

void Recorder::triggerExitCurrent(int status, const char* how) noexcept {
  Recorder* recorder = current();
  if (status == 0 || recorder == nullptr || !recorder->options_.triggers.exit) {
    return;
  }
  // The child of a vfork (Python's subprocess, when exec fails: _exit(255))
  // shares the parent's memory and sees its recording, but is not its
  // process: it must not touch it.
  if (::getpid() != recorder->processId_) {
    return;
  }
  try {
    TriggerFacts facts;
    facts.kind = schema::TriggerKind::EXIT;
    facts.reason = std::string(how) + "(" + std::to_string(status) + ")";
    facts.exitStatus = status;
    recorder->trigger(facts, schema::EndReason::EXIT, 0);
  } catch (...) {
    // exiting all the same
  }
}

void Recorder::startWatchdog() noexcept {
  if (ring_ == nullptr || options_.triggers.hangSeconds == 0) {
    return;
  }
  try {
    auto* dog = new HangWatchdog(
        options_.triggers.hangSeconds, [this] { return activeCaptures_.load() > 0; },
        [this](const HangWatchdog::Hang& hang) {
          TriggerFacts facts;
          facts.kind = schema::TriggerKind::HANG;
          char stream[32];
          std::snprintf(stream, sizeof stream, "0x%llx", static_cast<unsigned long long>(hang.stream));
          facts.reason = std::string("stream ") + stream + ": launch " + std::to_string(hang.launchIndex) +
                         " (the last recorded on it), or one before it there, has not finished after " +
                         std::to_string(hang.seconds) + " s";
          facts.hasLaunch = true;
          facts.launchIndex = hang.launchIndex;
          trigger(facts, schema::EndReason::EXPLICIT, 0);
        });
    if (!dog->start()) {
      logMessage("cannot start the hang watchdog; the hang trigger will not fire");
      delete dog;
      return;
    }
    watchdog_->store(dog, std::memory_order_release);
  } catch (...) {
    logMessage("cannot start the hang watchdog; the hang trigger will not fire");
  }
}

void Recorder::stopWatchdog() noexcept {
  if (HangWatchdog* dog = watchdog_->exchange(nullptr)) {
    dog->stop();
    stoppedWatchdog_ = dog;  // not deleted (the ring may be telling it of a launch now), but kept
  }
}

void Recorder::apiErrorTrigger(HookId id, CUresult result) noexcept {
  if (!options_.triggers.error || !isStickyError(result)) {
    return;
  }
  try {
    TriggerFacts facts;
    facts.kind = schema::TriggerKind::ERROR;
    facts.result = result;
    const char* name = cudaResultName(result);
    facts.reason = std::string(spec(id).symbol) + " returned " + (name != nullptr ? name : std::to_string(result));
    // Sticky errors are reported by whatever call comes next, not by the
    // launch that faulted: the launch is the last recorded or one before.
    facts.hasLaunch = lastLaunch(facts.launchIndex);
    facts.reason += facts.hasLaunch
                        ? "; the faulting launch is launch " + std::to_string(facts.launchIndex) + " or one before it"
                        : "; no launch was recorded before it";
    trigger(facts, schema::EndReason::EXPLICIT, 0);
  } catch (...) {
    // the program's error stands; the ring is written at the next trigger
  }
}

}  // namespace kcap

// The api trigger: `ctypes.CDLL(None).kcap_trigger(b"loss is NaN")` from
// Python. 0 when it fired; 1 when no flight recording with the api trigger
// is in progress in this process; 2 when one already fired or is ending.
extern "C" [[gnu::visibility("default")]] int kcap_trigger(const char* reason) noexcept {
  kcap::Recorder* recorder = kcap::Recorder::current();
  if (recorder == nullptr || !recorder->hasRing() || !recorder->options().triggers.api) {
    return 1;
  }
  try {
    kcap::Recorder::TriggerFacts facts;
    facts.kind = kcap::schema::TriggerKind::API;
    if (reason != nullptr) {
      facts.reason.assign(reason, strnlen(reason, kcap::kMaxReasonBytes));
    }
    return recorder->trigger(facts, kcap::schema::EndReason::EXPLICIT, 0) ? 0 : 2;
  } catch (...) {
    return 2;
  }
}
