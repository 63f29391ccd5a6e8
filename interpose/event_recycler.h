// Recycler: a per-thread pool of the objects that carry launch events to the
// trace writer (format::DeferredEvent).
//
// An event is made on the launching thread and released on one of the
// writer's threads. With plain new and delete every launch paid twice for
// memory crossing threads (malloc's arena locks and refills), a large part of
// what recording adds to a launch. Here a released event goes back to the
// pool of the thread that made it: writer threads push onto the pool's
// returned list (lock-free), and the owning thread takes the whole list at
// once when its free list runs dry. Only the owner ever pops, so the usual
// ABA problem of lock-free stacks cannot arise. Vectors inside a recycled
// event keep their capacity.
//
// A pool is never freed: a thread may exit while the writer still holds its
// events. That is one small pool per thread that ever recorded a launch.
#pragma once

#include <atomic>

namespace kcap {

// T: a DeferredEvent with `T* nextFree`, `Recycler<T>* home` and `void clear()`.
template <class T>
class Recycler {
public:
    static Recycler& ofThisThread()
    {
        thread_local Recycler* mine = nullptr;  // trivially destructible: usable until the thread ends
        if (mine == nullptr) {
            mine = new Recycler;
        }
        return *mine;
    }

    T* take()
    {
        if (free_ == nullptr) {
            free_ = returned_.exchange(nullptr, std::memory_order_acquire);
        }
        if (free_ == nullptr) {
            T* made = new T;
            made->home = this;
            return made;
        }
        T* event = free_;
        free_ = event->nextFree;
        event->nextFree = nullptr;
        return event;
    }

    // Any thread.
    void giveBack(T* event) noexcept
    {
        event->clear();
        event->nextFree = returned_.load(std::memory_order_relaxed);
        while (!returned_.compare_exchange_weak(event->nextFree, event, std::memory_order_release,
                                                std::memory_order_relaxed)) {
        }
    }

private:
    Recycler() = default;
    std::atomic<T*> returned_{nullptr};  // released by writer threads, not yet taken back
    T* free_ = nullptr;                  // the owner's
};

}  // namespace kcap
