// SPDX-License-Identifier: Apache-2.0
// The scheduler's account of a cluster's start-up, so that a slow start can
// be put down to a phase and a node: when the first and the last node
// joined, when the roster went out, and when the last node had connected to
// all its peers (a node enters the start-up barrier only once its data plane
// is up). Pure bookkeeping: the caller passes the times.
#pragma once

#include <chrono>
#include <optional>
#include <string>

namespace afmesh::control {

class StartupTimeline {
public:
    using Clock = std::chrono::steady_clock;

    /** Times are reported from `start`: when the scheduler began to listen. */
    explicit StartupTimeline(Clock::time_point start) : start_(start) {}

    /** `who` was admitted. */
    void joined(const std::string &who, Clock::time_point at);
    /** The roster went out to every node. */
    void roster_sent(Clock::time_point at);
    /** `who` entered the start-up barrier: it is connected to all its peers. */
    void connected(const std::string &who, Clock::time_point at);

    /**
     * One line for the log once the start-up barrier released at `released`:
     * every phase's time from the start, with the node that came last.
     */
    std::string summary(int workers, int servers, Clock::time_point released) const;

private:
    struct Mark {
        Clock::time_point at;
        std::string who;
    };
    std::string since_start(Clock::time_point at) const;

    Clock::time_point start_;
    std::optional<Clock::time_point> first_joined_, roster_sent_;
    std::optional<Mark> last_joined_, last_connected_;
};

}  // namespace afmesh::control
