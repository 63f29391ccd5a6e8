// Fatal signals: how a recording ends when a signal ends the process.
//
// Every signal whose default action ends the process (SIGSEGV, SIGBUS,
// SIGABRT, SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGPIPE, SIGALRM, ...:
// kFatalSignals in signals.cpp) gets a handler chained to whatever was
// installed before (not installed over SIG_IGN). The handler itself only
// writes a byte to a pipe and polls for the answer (async-signal-safe,
// little stack: fine on an alternate stack); a dedicated thread, which has
// every signal blocked, does the work. When the signal is about to kill the
// process (the previous disposition was the default), that thread writes
// traceEnd (reason signal) and closes the trace; otherwise it only flushes.
// It gets 3 s: if the process state does not allow it (the faulting thread
// holds the allocator's lock, say), the handler gives up and the signal
// takes its course; everything flushed before (every full-mode launch
// record) stays readable. Then the previous handler runs, or the default
// action (the signal is re-raised).
//
// lifecycle.cpp decides when: it installs the handlers once per process
// image and starts the thread once per process, both under its start lock.
#pragma once

namespace kcap::process::signals {

// Chains the handlers to the program's (once per process image).
void install() noexcept;
// SIGUSR2 fires the flight recorder's signal trigger and the program goes
// on (set when a recording with that trigger starts); otherwise SIGUSR2 is
// one more fatal signal. The other trigger signals (SIGSEGV, SIGABRT,
// SIGBUS, SIGFPE, SIGILL, SIGTERM) fire it on the signal thread before the
// trace is ended or flushed for them.
void setUserSignalTrigger(bool on) noexcept;
// Starts the signal-work thread unless this process has one.
void startThread() noexcept;
// In the child of fork(): the parent's signal thread and pipes are not the
// child's; forgets them (the child's first recording starts its own).
void afterFork() noexcept;

}  // namespace kcap::process::signals

namespace kcap::process {

// True on the thread that does the signal work (which must not wait for
// itself).
bool onSignalThread() noexcept;

}  // namespace kcap::process
