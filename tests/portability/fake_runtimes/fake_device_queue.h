// SPDX-License-Identifier: Apache-2.0
// The "device" behind the fake runtimes: an in-order queue of host closures
// run by one worker thread, so a stream or command list really is
// asynchronous (a wait on a flag blocks later work, not the caller) while
// copies are plain memmove over host memory.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace afmesh::fake {

class DeviceQueue {
public:
    DeviceQueue() : worker_([this] { run(); }) {}
    DeviceQueue(const DeviceQueue &) = delete;
    DeviceQueue &operator=(const DeviceQueue &) = delete;
    ~DeviceQueue() {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            stopping_ = true;
        }
        changed_.notify_all();
        worker_.join();
    }

    void push(std::function<void()> op) {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            ops_.push_back(std::move(op));
            ++pushed_;
        }
        changed_.notify_all();
    }

    /** Blocks until everything pushed before the call has run. */
    void drain() {
        std::unique_lock<std::mutex> lock(mutex_);
        const uint64_t target = pushed_;
        changed_.wait(lock, [&] { return done_ >= target; });
    }

private:
    void run() {
        std::unique_lock<std::mutex> lock(mutex_);
        for (;;) {
            changed_.wait(lock, [&] { return stopping_ || !ops_.empty(); });
            if (ops_.empty()) return;  // stopping and drained
            std::function<void()> op = std::move(ops_.front());
            ops_.pop_front();
            lock.unlock();
            op();
            lock.lock();
            ++done_;
            changed_.notify_all();
        }
    }

    std::mutex mutex_;
    std::condition_variable changed_;
    std::deque<std::function<void()>> ops_;
    uint64_t pushed_ = 0, done_ = 0;
    bool stopping_ = false;
    std::thread worker_;  // last: starts once the members above exist
};

/** Polls `ready` until it holds; the fake device's way of waiting on memory. */
template <class Ready>
void spin_until(Ready ready) {
    while (!ready()) std::this_thread::yield();
}

}  // namespace afmesh::fake
