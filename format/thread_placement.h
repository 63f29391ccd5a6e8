// ThreadPlacement: where the threads kcap makes inside a program run
// (the trace writer's, its hashing and compression pools), so that an
// operator can keep them off the cores the job's own threads use.
#pragma once

#include <thread>
#include <vector>

namespace kcap::format {

// Where and how a thread kcap made runs, beside the program's threads.
struct ThreadPlacement {
  // Under SCHED_IDLE: only on CPU the program's threads leave, never
  // preempting one of them.
  bool idle = false;
  // The CPUs it may run on (sched_setaffinity); empty: the process's own.
  // Keeps kcap's threads off the cores a job's threads run on.
  std::vector<unsigned> cpus;
};

// Names a thread kcap made (at most 15 characters), so that top, gdb and
// py-spy tell it from the program's, and places it. A placement the system
// refuses leaves the thread where it would have run (the capture options
// check the CPUs against the process's own before any thread is made).
void prepareThread(std::thread& thread, const char* name, const ThreadPlacement& placement) noexcept;

}  // namespace kcap::format
