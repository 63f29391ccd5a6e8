// The process life cycle of a recording: the one owner of the state that
// decides whether this process records, the recording in progress, and what
// happens at fork and at exit (signals.h: fatal signals).
//
//   start     Lazily, at the first hooked call that matters once the driver
//             is initialized (never from dlsym, cuGetProcAddress or a
//             constructor), and only when KCAP_OUTPUT is set; otherwise the
//             shim stays a pure pass-through. Invalid KCAP_* values: one
//             "kcap: ..." line, no recording. The first start installs the
//             fork and signal handlers (once per process image) and starts
//             the signal-work thread (once per process).
//   exit      The shim's destructor ends the recording (traceEnd reason exit)
//             after the program's exit handlers and static destructors ran,
//             so CUDA calls made there are still recorded. Works for exit()
//             from any thread; threads still running see the recording end
//             and pass their calls through.
//   fork      In the child (pthread_atfork), the inherited recording is
//             abandoned as it is: its writer threads do not exist there, its
//             file belongs to the parent, and no lock it holds is touched.
//             Every part of the shim with process state is reset here, in
//             one place. The child starts its own trace (a new %p, or the
//             parent's name with ".<pid>" added when the template has no %p)
//             at its first CUDA call.
//   SIGKILL   Nothing runs. The reader recovers everything up to the last
//             flush; in full and pre modes each launch record is flushed
//             before the launch runs.
#pragma once

namespace kcap {
class Recorder;
}  // namespace kcap

namespace kcap::process {

// The recording in progress, started on first use; nullptr when the shim
// does not record (off, not yet possible, ended, or failed).
Recorder* activeRecording() noexcept;
// The same, but never starts one (and returns one that is ending).
Recorder* currentRecording() noexcept;

// True in the child of a fork that happened while this process image had
// recorded (or was waiting to): its trace never takes the parent's name.
bool isForkChild() noexcept;

}  // namespace kcap::process
