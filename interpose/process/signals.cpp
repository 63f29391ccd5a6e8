// Fatal signals: the handlers chained to the program's and the thread that
// ends or flushes the trace for them (signals.h).
#include "process/signals.h"

#include "hooks/shim_log.h"
#include "observe/observer.h"
#include "record/launch_outcome.h"
#include "record/recorder.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <thread>

namespace kcap::process {
namespace {

// Every signal whose default action ends the process, but SIGKILL and
// SIGSTOP (no handler runs) and SIGTRAP (a debugger's breakpoints): with the
// default action the handler ends the trace first. `flushFirst`: when the
// program has a handler of its own, which usually ends the program too, the
// trace is flushed before it runs; the others (timers, profilers, user
// signals, a broken pipe) can come often and go straight to the program's
// handler.
struct FatalSignal {
  int sig;
  bool flushFirst;
};
constexpr FatalSignal kFatalSignals[] = {
    {SIGSEGV, true},  {SIGBUS, true},     {SIGABRT, true},  {SIGTERM, true},  {SIGINT, true},   {SIGFPE, true},
    {SIGILL, true},   {SIGHUP, true},     {SIGQUIT, true},  {SIGPIPE, false}, {SIGALRM, false}, {SIGUSR1, false},
    {SIGUSR2, false}, {SIGVTALRM, false}, {SIGPROF, false}, {SIGXCPU, false}, {SIGXFSZ, false}, {SIGPOLL, false},
    {SIGPWR, false},  {SIGSTKFLT, false}, {SIGSYS, false},  // a seccomp sandbox's handler runs at every trapped system
                                                            // call
};
constexpr int kSignalWorkMs = 3000;  // what the handler waits for the signal thread
// What the trace's writer waits, then, for launches in progress to return:
// well within kSignalWorkMs.
constexpr std::chrono::milliseconds kOutcomeWaitOnSignal{1000};
constexpr std::chrono::milliseconds kEndWait{500};  // what ending waits for other threads' work

// Constant-initialized: a handler may run at any time.
struct sigaction g_previous[NSIG] = {};
bool g_flushFirst[NSIG] = {};
std::atomic<int> g_requestFd{-1};      // handler -> signal thread
std::atomic<int> g_replyFd{-1};        // signal thread -> handler (non-blocking)
std::atomic<pid_t> g_signalThread{0};  // tid of this process's signal thread
std::atomic<bool> g_handlerBusy{false};

pid_t currentTid() noexcept { return static_cast<pid_t>(::syscall(SYS_gettid)); }

// ---- the signal thread ------------------------------------------------------------

// Request byte: the signal number, with one of these (none: flush).
constexpr unsigned char kTerminal = 0x80;     // the signal ends the process: end the trace
constexpr unsigned char kUserTrigger = 0x40;  // SIGUSR2 with the signal trigger: fire, the program goes on
constexpr unsigned char kSignalBits = 0x3f;   // every signal of kFatalSignals is below 64

// The flight recorder's signal trigger is set: SIGUSR2 fires it and the
// program goes on (lifecycle.cpp sets it when a recording starts).
std::atomic<bool> g_userSignalTrigger{false};

void signalThreadMain(int requestFd, int replyFd) noexcept {
  g_signalThread.store(currentTid(), std::memory_order_release);
  for (;;) {
    unsigned char request = 0;
    const ssize_t n = ::read(requestFd, &request, 1);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n != 1) {
      return;  // the pipe is gone
    }
    const int sig = request & kSignalBits;
    if ((request & kTerminal) != 0) {
      // The flight recorder fires first (ending the trace); then nothing is left to end.
      Recorder::triggerSignalCurrent(sig, true);
      Recorder::endCurrent(schema::EndReason::SIGNAL, sig, kEndWait);
    } else if ((request & kUserTrigger) != 0) {
      Recorder::triggerSignalCurrent(sig, false);
    } else if (!Recorder::triggerSignalCurrent(sig, false)) {
      Recorder::flushCurrent();
    }
    const unsigned char done = 1;
    [[maybe_unused]] const ssize_t w = ::write(replyFd, &done, 1);
  }
}

void startSignalThread() noexcept {
  int request[2] = {-1, -1};
  int reply[2] = {-1, -1};
  if (::pipe2(request, O_CLOEXEC) != 0) {
    return;
  }
  if (::pipe2(reply, O_CLOEXEC) != 0) {
    ::close(request[0]);
    ::close(request[1]);
    return;
  }
  ::fcntl(reply[0], F_SETFL, O_NONBLOCK);
  // Every signal blocked in the thread (it inherits the creator's mask):
  // it must never run the handler that waits for it.
  sigset_t all;
  sigset_t old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  try {
    std::thread(signalThreadMain, request[0], reply[1]).detach();
    g_requestFd.store(request[1], std::memory_order_release);
    g_replyFd.store(reply[0], std::memory_order_release);
  } catch (...) {
    for (int fd : {request[0], request[1], reply[0], reply[1]}) {
      ::close(fd);
    }
    KCAP_LOG_ONCE("cannot start the signal thread; a fatal signal will not end the trace in order");
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

// ---- the handler (async-signal-safe from here on) ----------------------------------

long elapsedMs(const timespec& since) {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (now.tv_sec - since.tv_sec) * 1000 + (now.tv_nsec - since.tv_nsec) / 1000000;
}

void askSignalThread(int sig, unsigned char kind) {
  const int requestFd = g_requestFd.load(std::memory_order_acquire);
  const int replyFd = g_replyFd.load(std::memory_order_acquire);
  if (requestFd < 0 || replyFd < 0 || currentTid() == g_signalThread.load(std::memory_order_acquire)) {
    return;
  }
  if (g_handlerBusy.exchange(true, std::memory_order_acq_rel)) {
    return;  // another thread is already at it
  }
  unsigned char stale = 0;
  while (::read(replyFd, &stale, 1) == 1) {
    // an answer to an earlier request that timed out
  }
  const unsigned char request = static_cast<unsigned char>(kind | (sig & kSignalBits));
  if (::write(requestFd, &request, 1) == 1) {
    timespec start{};
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
      const long left = kSignalWorkMs - elapsedMs(start);
      if (left <= 0) {
        break;
      }
      pollfd wait{replyFd, POLLIN, 0};
      const int ready = ::poll(&wait, 1, static_cast<int>(left));
      if (ready > 0) {
        unsigned char done = 0;
        if (::read(replyFd, &done, 1) == 1) {
          break;
        }
      } else if (ready < 0 && errno != EINTR) {
        break;
      }
    }
  }
  g_handlerBusy.store(false, std::memory_order_release);
}

// Faults the CPU raises: returning from the handler runs the instruction
// again.
bool isSynchronous(int sig) { return sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE || sig == SIGILL; }

// Async-signal-safe: the handler itself only reads constant-initialized
// state, writes and polls pipes, and calls sigaction, pthread_sigmask and
// tgkill. Ending the trace (which allocates, takes the writer's locks and
// writes the file) happens on the signal thread, in ordinary context. After
// a fault, the faulting thread may hold a lock the signal thread needs (the
// allocator's, the writer's): the signal thread then blocks, the handler
// gives up after kSignalWorkMs and the fault takes its course; what was
// written stays readable (with --flush launch, every launch up to the
// faulting one).
void onFatalSignal(int sig, siginfo_t* info, void* context) {
  const int savedErrno = errno;
  const struct sigaction& previous = g_previous[sig];
  const bool withInfo = (previous.sa_flags & SA_SIGINFO) != 0;
  const bool byDefault = !withInfo && previous.sa_handler == SIG_DFL;
  const bool ignored = !withInfo && previous.sa_handler == SIG_IGN;

  if (sig == SIGUSR2 && g_userSignalTrigger.load(std::memory_order_relaxed)) {
    // The user's signal to fire the flight recorder: not the end of the
    // process, whatever its default action; a handler of the program's
    // still runs.
    askSignalThread(sig, kUserTrigger);
    if (withInfo) {
      if (previous.sa_sigaction != nullptr) {
        previous.sa_sigaction(sig, info, context);
      }
    } else if (!ignored && !byDefault) {
      previous.sa_handler(sig);
    }
    errno = savedErrno;
    return;
  }
  if (byDefault || (!ignored && g_flushFirst[sig])) {
    // Terminal: the signal is about to end the process, so end the trace.
    // Otherwise the previous handler decides; only flush.
    if (byDefault) {
      // A launch this thread is making never returns, and one another
      // thread is making may wait on a lock this one holds: the trace is
      // written without waiting for them (launch_outcome.h).
      abandonLaunchesInProgress();
      LaunchOutcome::hurry(kOutcomeWaitOnSignal);
    }
    askSignalThread(sig, byDefault ? kTerminal : 0);
  }
  if (withInfo) {
    if (previous.sa_sigaction != nullptr) {
      previous.sa_sigaction(sig, info, context);
    }
  } else if (!ignored && !byDefault) {
    previous.sa_handler(sig);
  } else if (byDefault) {
    struct sigaction fallback {};
    fallback.sa_handler = SIG_DFL;
    sigemptyset(&fallback.sa_mask);
    sigaction(sig, &fallback, nullptr);
    // A fault raised by the CPU happens again when the handler returns,
    // now with the default action (and the right fault address in the
    // core). A sent signal is sent again.
    if (!(isSynchronous(sig) && info != nullptr && info->si_code > 0)) {
      sigset_t unblock;
      sigemptyset(&unblock);
      sigaddset(&unblock, sig);
      pthread_sigmask(SIG_UNBLOCK, &unblock, nullptr);
      ::syscall(SYS_tgkill, ::getpid(), currentTid(), sig);
    }
  }
  errno = savedErrno;
}

void installSignalHandlers() noexcept {
  for (const auto [sig, flushFirst] : kFatalSignals) {
    struct sigaction current {};
    if (sigaction(sig, nullptr, &current) != 0) {
      continue;
    }
    if (!(current.sa_flags & SA_SIGINFO) && current.sa_handler == SIG_IGN) {
      continue;  // the program (or nohup) wants it ignored: leave it so
    }
    g_previous[sig] = current;
    g_flushFirst[sig] = flushFirst;
    struct sigaction ours {};
    ours.sa_sigaction = onFatalSignal;
    sigemptyset(&ours.sa_mask);
    // SA_RESTART as before: a program whose handler relies on EINTR
    // (Python's SIGINT) keeps getting it.
    ours.sa_flags = SA_SIGINFO | SA_ONSTACK | (current.sa_flags & SA_RESTART);
    sigaction(sig, &ours, nullptr);
  }
}

}  // namespace

bool onSignalThread() noexcept { return currentTid() == g_signalThread.load(std::memory_order_acquire); }

namespace signals {

void install() noexcept { installSignalHandlers(); }

void setUserSignalTrigger(bool on) noexcept { g_userSignalTrigger.store(on, std::memory_order_relaxed); }

void startThread() noexcept {
  if (g_requestFd.load() < 0) {
    startSignalThread();
  }
}

void afterFork() noexcept {
  // Only this thread exists now. The parent's signal thread and pipes are
  // not ours: close our copies and start afresh with the child's recording.
  for (auto* fd : {&g_requestFd, &g_replyFd}) {
    const int old = fd->exchange(-1);
    if (old >= 0) {
      ::close(old);
    }
  }
  g_signalThread.store(0);
  g_handlerBusy.store(false);
}

}  // namespace signals
}  // namespace kcap::process
