// SPDX-License-Identifier: Apache-2.0
// A thread that runs one callback at a fixed interval until destroyed: the
// node's housekeeping (data-plane heartbeats, silence and handshake
// deadlines), kept off the data path and independent of the polling mode.
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <thread>

#include "progress.h"
#include "thread_annotations.h"

namespace afmesh {

class Ticker {
public:
    using Tick = std::function<void(Clock::time_point now)>;

    Ticker(std::chrono::milliseconds interval, Tick tick) : interval_(interval), tick_(std::move(tick)) {
        thread_ = std::thread([this] { run(); });
    }
    /** Returns once the callback has run for the last time. */
    ~Ticker() {
        {
            MutexLock lock(&mu_);
            stopping_ = true;
        }
        cv_.notify_all();
        thread_.join();
    }
    Ticker(const Ticker &) = delete;
    Ticker &operator=(const Ticker &) = delete;

private:
    void run() {
        MutexLock lock(&mu_);
        for (auto next = Clock::now() + interval_;; next += interval_) {
            if (lock.wait_until(cv_, next, [this]() AFMESH_REQUIRES(mu_) { return stopping_; })) return;
            lock.unlock();
            tick_(Clock::now());
            lock.lock();
            // A tick that ran long (or a stopped process) does not make the next ones bunch up.
            next = std::max(next, Clock::now() - interval_);
        }
    }

    const std::chrono::milliseconds interval_;
    const Tick tick_;
    Mutex mu_;
    std::condition_variable cv_;
    bool stopping_ AFMESH_GUARDED_BY(mu_) = false;
    std::thread thread_;
};

}  // namespace afmesh
