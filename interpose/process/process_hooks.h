// How a recording survives the ways a process ends or splits.
//
//   exit      The shim's destructor ends the recording (traceEnd reason exit)
//             after the program's exit handlers and static destructors ran,
//             so CUDA calls made there are still recorded. Works for exit()
//             from any thread; threads still running see the recording end
//             and pass their calls through.
//   fork      In the child (pthread_atfork), the inherited recording is
//             abandoned as it is: its writer threads do not exist there, its
//             file belongs to the parent, and no lock it holds is touched.
//             The child starts its own trace (a new %p, or the parent's name
//             with ".<pid>" added when the template has no %p) at its first
//             CUDA call.
//   signals   Every signal whose default action ends the process (SIGSEGV,
//             SIGBUS, SIGABRT, SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGPIPE,
//             SIGALRM, ...: kFatalSignals in process_hooks.cpp) gets a handler
//             chained to whatever was installed before (not installed over
//             SIG_IGN). The handler itself only writes a byte to a pipe and
//             polls for the answer (async-signal-safe, little stack: fine on
//             an alternate stack); a dedicated thread, which has every signal
//             blocked, does the work. When the signal is about to kill the
//             process (the previous disposition was the default), that
//             thread writes traceEnd (reason signal) and closes the trace;
//             otherwise it only flushes. It gets 3 s: if the process state
//             does not allow it (the faulting thread holds the allocator's
//             lock, say), the handler gives up and the signal takes its
//             course; everything flushed before (every full-mode launch
//             record) stays readable. Then the previous handler runs, or the
//             default action (the signal is re-raised).
//   SIGKILL   Nothing runs. The reader recovers everything up to the last
//             flush; in full and pre modes each launch record is flushed
//             before the launch runs.
#pragma once

namespace kcap::process {

// Called by the recorder when a recording starts in this process: installs
// the fork and signal handlers (once per process image) and starts the
// signal-work thread (once per process).
void recordingStarted() noexcept;

// True on the thread that does the signal work (which must not wait for
// itself).
bool onSignalThread() noexcept;

}  // namespace kcap::process
