// ThreadWork: the ending side sees another thread's work in progress until
// it leaves, never its own, and a fork child forgets the parent's threads.
#include "thread_work.h"

#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <thread>

namespace kcap {
namespace {

TEST(ThreadWork, EndingSideSeesOtherThreadsWorkUntilItLeaves) {
  ThreadWork::prepare();
  ThreadWork::Slot* own = ThreadWork::mine();
  ASSERT_NE(own, nullptr);
  std::atomic<int> step{0};
  std::thread worker([&] {
    ThreadWork::Slot* slot = ThreadWork::mine();
    ThreadWork::enter(*slot);
    ThreadWork::enter(*slot);  // nested work
    step = 1;
    while (step.load() != 2) {}
    ThreadWork::leave(*slot);
    step = 3;
    while (step.load() != 4) {}
    ThreadWork::leave(*slot);
    step = 5;
  });
  while (step.load() != 1) {}
  ThreadWork::endingFence();
  EXPECT_TRUE(ThreadWork::anyBusy(own));
  step = 2;
  while (step.load() != 3) {}
  EXPECT_TRUE(ThreadWork::anyBusy(own));  // one level still open
  step = 4;
  worker.join();
  EXPECT_FALSE(ThreadWork::anyBusy(own));

  // The caller's own work does not count against it.
  ThreadWork::enter(*own);
  EXPECT_FALSE(ThreadWork::anyBusy(own));
  EXPECT_TRUE(ThreadWork::anyBusy(nullptr));
  ThreadWork::leave(*own);
  EXPECT_FALSE(ThreadWork::anyBusy(nullptr));
}

TEST(ThreadWork, ExitedThreadsSlotIsReused) {
  ThreadWork::Slot* first = nullptr;
  std::thread([&] { first = ThreadWork::mine(); }).join();
  ThreadWork::Slot* second = nullptr;
  std::thread([&] { second = ThreadWork::mine(); }).join();
  EXPECT_NE(first, nullptr);
  EXPECT_EQ(first, second);
}

TEST(ThreadWork, ForkChildForgetsTheParentsThreads) {
  std::atomic<bool> entered{false};
  std::atomic<bool> release{false};
  std::thread worker([&] {
    ThreadWork::Slot* slot = ThreadWork::mine();
    ThreadWork::enter(*slot);
    entered = true;
    while (!release.load()) {}
    ThreadWork::leave(*slot);
  });
  while (!entered.load()) {}
  const pid_t child = fork();
  if (child == 0) {
    const bool busyBefore = ThreadWork::anyBusy(ThreadWork::mine());
    ThreadWork::forgetOtherThreads();
    ThreadWork::prepare();  // the child registers for itself
    const bool busyAfter = ThreadWork::anyBusy(ThreadWork::mine());
    _exit(busyBefore && !busyAfter ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  release = true;
  worker.join();
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace kcap
