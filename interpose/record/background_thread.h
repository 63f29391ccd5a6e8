// A thread of the recorder's own (the hang watchdog, the read-back of what
// other agents wrote), detached: it may outlive any wait for it at exit,
// as the recorder does. Every signal is blocked in it, so that the
// program's handlers never run there.
#pragma once

#include <pthread.h>
#include <signal.h>

#include <functional>
#include <thread>
#include <utility>

namespace kcap {

// Starts `body` on a new thread named `name` (at most 15 characters).
// False if no thread could be made.
inline bool startBackgroundThread(const char* name, std::function<void()> body) noexcept {
  sigset_t all;
  sigset_t old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);  // inherited by the new thread
  bool started = false;
  try {
    std::thread thread(std::move(body));
    pthread_setname_np(thread.native_handle(), name);
    thread.detach();
    started = true;
  } catch (...) {
    // no thread to be had
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return started;
}

}  // namespace kcap
