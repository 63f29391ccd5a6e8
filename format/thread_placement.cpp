#include "thread_placement.h"

#include <pthread.h>
#include <sched.h>

namespace kcap::format {

void prepareThread(std::thread& thread, const char* name, const ThreadPlacement& placement) noexcept {
  pthread_setname_np(thread.native_handle(), name);
  if (placement.idle) {
    const sched_param none{};
    pthread_setschedparam(thread.native_handle(), SCHED_IDLE, &none);  // lowering needs no privilege
  }
  if (!placement.cpus.empty()) {
    cpu_set_t set;
    CPU_ZERO(&set);
    for (const unsigned cpu : placement.cpus) {
      if (cpu < CPU_SETSIZE) CPU_SET(cpu, &set);
    }
    pthread_setaffinity_np(thread.native_handle(), sizeof set, &set);
  }
}

}  // namespace kcap::format
