// Start, fork and exit: the state machine of this process's recording.
#include "process/lifecycle.h"

#include "core/capture_options.h"
#include "core/thread_work.h"
#include "hooks/shim_log.h"
#include "process/signals.h"
#include "record/code_registry.h"
#include "record/driver_api.h"
#include "record/recorder.h"
#include "timing/cupti_timing.h"

#include <pthread.h>

#include <kj/exception.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <exception>

namespace kcap::process {
namespace {

// Constant-initialized: the shim may be entered before its constructors ran.
enum RecordingState : int {
  kUndecided,         // KCAP_* not read yet
  kWaitingForDriver,  // options read; the driver is not initialized yet
  kActive,            // g_recorder is recording (or has ended)
  kOff,               // not recording in this process
};

std::atomic<int> g_recordingState{kUndecided};
std::atomic<Recorder*> g_recorder{nullptr};
std::atomic<CaptureOptions*> g_options{nullptr};  // parsed once per process image
std::atomic<bool> g_forkChild{false};
// Taken by the thread that starts a recording (and installs the handlers).
pthread_mutex_t g_startMutex = PTHREAD_MUTEX_INITIALIZER;
std::atomic<bool> g_handlersInstalled{false};  // fork and signal handlers (per process image)
// Recorders abandoned in fork children stay reachable (leak checkers).
std::atomic<Recorder*> g_abandoned{nullptr};

// True on the thread starting a recording: the driver calls starting makes
// (and CUPTI's, on this thread) are not recorded as the program's.
thread_local bool t_starting = false;

bool driverReady() {
  const auto count = driverApi().deviceGetCount;
  int devices = 0;
  return count != nullptr && count(&devices) == CUDA_SUCCESS;
}

void onForkChild() noexcept;

// Once per process image: the fork hook and the fatal-signal handlers; once
// per process: the signal thread. Called with g_startMutex held.
void recordingStarted() noexcept {
  if (!g_handlersInstalled.exchange(true)) {
    pthread_atfork(nullptr, nullptr, onForkChild);
    signals::install();
  }
  signals::startThread();
}

Recorder* start() noexcept {
  pthread_mutex_lock(&g_startMutex);
  t_starting = true;
  Recorder* started = nullptr;
  try {
    if (g_recordingState.load() == kUndecided) {
      auto options = readCaptureOptions([](const char* name) { return std::getenv(name); });
      if (!options) {
        g_recordingState.store(kOff, std::memory_order_release);
      } else {
        g_options.store(new CaptureOptions(std::move(*options)));
        g_recordingState.store(kWaitingForDriver, std::memory_order_release);
      }
    }
    // Device queries need an initialized driver: until the program has
    // called cuInit, its calls fail and recording waits.
    if (g_recordingState.load() == kWaitingForDriver && driverReady()) {
      started = Recorder::create(*g_options.load());
      g_recorder.store(started, std::memory_order_release);
      g_recordingState.store(kActive, std::memory_order_release);
      signals::setUserSignalTrigger(started->hasRing() && started->options().triggers.signal);
      recordingStarted();
      // Still t_starting: calls CUPTI makes on this thread into hooked
      // driver functions are not recorded as the program's.
      if (started->options().timing) {
        timing::start(*started);
      }
    } else if (g_recordingState.load() == kActive) {
      started = g_recorder.load();
    }
  } catch (const OptionError& e) {
    logMessage("%s; not recording", e.what());
    g_recordingState.store(kOff, std::memory_order_release);
  } catch (const std::exception& e) {
    logMessage("cannot record: %s; calls pass through unchanged", e.what());
    g_recordingState.store(kOff, std::memory_order_release);
  } catch (const kj::Exception& e) {
    logMessage("cannot record: %s; calls pass through unchanged", e.getDescription().cStr());
    g_recordingState.store(kOff, std::memory_order_release);
  } catch (...) {
    logMessage("cannot record (unknown error); calls pass through unchanged");
    g_recordingState.store(kOff, std::memory_order_release);
  }
  t_starting = false;
  pthread_mutex_unlock(&g_startMutex);
  return started;
}

// ---- fork -----------------------------------------------------------------------------

// Only this thread exists now: every lock another thread held stays held,
// and every thread the shim had is gone. Each part of the shim forgets what
// belonged to the parent, in this order.
void onForkChild() noexcept {
  signals::afterFork();
  pthread_mutex_init(&g_startMutex, nullptr);
  t_starting = false;
  CodeRegistry::instance().resetLocksAfterFork();
  Recorder::afterFork();
  if (Recorder* parent = g_recorder.exchange(nullptr)) {
    g_abandoned.store(parent);  // untouched: its threads, file and locks are the parent's
  }
  g_forkChild.store(true);
  ThreadWork::forgetOtherThreads();
  timing::abandonAfterFork();
  if (g_recordingState.load() == kActive) {
    g_recordingState.store(g_options.load() != nullptr ? kWaitingForDriver : kOff);
  }
}

// ---- exit -------------------------------------------------------------------------------

// After the program's atexit handlers and static destructors (_dl_fini runs
// the preloaded shim's destructors late), so their CUDA calls are recorded.
[[gnu::destructor]] void endAtExit() noexcept {
  Recorder::endCurrent(schema::EndReason::EXIT, 0, std::chrono::milliseconds(2000));
}

}  // namespace

Recorder* currentRecording() noexcept {
  return g_recordingState.load(std::memory_order_acquire) == kActive ? g_recorder.load(std::memory_order_acquire)
                                                                     : nullptr;
}

Recorder* activeRecording() noexcept {
  const int state = g_recordingState.load(std::memory_order_acquire);
  if (state == kActive) {
    Recorder* recorder = g_recorder.load(std::memory_order_acquire);
    return recorder != nullptr && !recorder->ending() ? recorder : nullptr;
  }
  if (state == kOff || t_starting) {
    return nullptr;
  }
  return start();
}

bool isForkChild() noexcept { return g_forkChild.load(); }

}  // namespace kcap::process
