// SPDX-License-Identifier: Apache-2.0
// Lets a repeated log message through at most once per period and counts
// the ones held back, so a peer that repeats a fault (a stranger connecting
// in a loop, a descriptor shortage) cannot flood the log. Not thread-safe:
// its owner's lock covers it.
#pragma once

#include <chrono>
#include <cstdint>

namespace afmesh {

class LogLimiter {
public:
    using Clock = std::chrono::steady_clock;

    explicit LogLimiter(std::chrono::milliseconds period) : period_(period) {}

    /** Whether to log now; if so, *held_back is how many were not logged since the last one. */
    bool allow(Clock::time_point now, uint64_t *held_back) {
        if (now < next_) {
            ++held_back_;
            return false;
        }
        next_ = now + period_;
        *held_back = held_back_;
        held_back_ = 0;
        return true;
    }

private:
    const std::chrono::milliseconds period_;
    Clock::time_point next_{};
    uint64_t held_back_ = 0;
};

}  // namespace afmesh
