// SPDX-License-Identifier: Apache-2.0
// Starts a set of child processes (a local cluster), relays their output
// line by line with a name prefix, waits for them with a deadline, and stops
// the rest when one fails. Children are always signalled and reaped by pid;
// a group never outlives its owner's children.
//
// Children never outlive their owner either: each one is killed (SIGKILL)
// by the kernel when the thread that started it ends, however the owner
// dies (PR_SET_PDEATHSIG). So spawn() must be called from a thread that
// lives as long as the group, e.g. the main thread. Each child runs in a
// process group of its own, so a terminal's Ctrl-C reaches the owner only,
// which decides how to stop them (see stop()); their stdin is /dev/null,
// since a background group reading the terminal would be stopped (SIGTTIN).
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <array>
#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "status.h"

namespace afmesh {

/**
 * The signals that ask a process to stop, which an owner forwards to its
 * children. Each child starts with their default action, even where its
 * owner ignores one (nohup, a script's background job): it receives them
 * only from its owner, since it runs in a process group of its own.
 */
constexpr std::array<int, 3> kStopSignals = {SIGINT, SIGTERM, SIGHUP};
/** How long children asked to stop get before they are killed. */
constexpr std::chrono::milliseconds kStopGrace(3000);

/** "SIGTERM", or "signal 77" for a number without a name. */
std::string signal_name(int sig);

struct ChildExit;
/** "worker 0 exited with status 3 (pid 123)", "server 1 was killed by SIGKILL (pid 124)". */
std::string describe(const ChildExit &exit);

struct ChildSpec {
    std::string name;               // output prefix, e.g. "worker 0"
    std::string path;               // program to run
    std::vector<std::string> argv;  // argv[0] included
    std::vector<std::string> env;   // complete environment, "NAME=value"
};

struct ChildExit {
    std::string name;
    pid_t pid = -1;
    bool running = true;
    int code = -1;    // exit code, or -1 when killed by a signal
    int signal = 0;   // the signal that ended it, or 0
    std::string output;  // stdout and stderr, as relayed
};

class ProcessGroup {
public:
    /**
     * Told of a child that failed (non-zero exit or a signal), without the
     * group's lock: true when the owner has dealt with it, e.g. started it
     * again with respawn(), so that it is not a failure of the group.
     */
    using FailureHandler = std::function<bool(size_t index, const ChildExit &exit)>;

    /** relay: also write children's lines (prefixed) to our stdout. */
    explicit ProcessGroup(bool relay) : relay_(relay) {}
    ~ProcessGroup();
    ProcessGroup(const ProcessGroup &) = delete;
    ProcessGroup &operator=(const ProcessGroup &) = delete;

    /**
     * Starts a child; its index in children() is returned in *index. Call it
     * from a thread that lives as long as the group (see above).
     */
    Status spawn(const ChildSpec &spec, size_t *index = nullptr);
    /**
     * Waits until every child has exited or the deadline passes. When
     * `stop_on_failure`, the first child to fail (non-zero exit or a signal)
     * gets the others terminated (SIGTERM, then SIGKILL after a grace period).
     * Returns TIMEOUT (children still running are killed) or the first
     * failure, naming the child. With `interrupt_fd` >= 0, returns CLOSED as
     * soon as that descriptor is readable, leaving the children running for
     * the caller to stop. With `on_failure`, each failed child is offered to
     * it first, once; one it deals with does not count as a failure.
     */
    Status wait_all(std::chrono::steady_clock::time_point deadline, bool stop_on_failure, int interrupt_fd = -1,
                    const FailureHandler &on_failure = {});
    /** Starts child `index`'s program again, as a new child under the same name and spec. */
    Status respawn(size_t index, size_t *new_index = nullptr);
    /** Waits for one child only. */
    Status wait_one(size_t index, std::chrono::steady_clock::time_point deadline);
    /** Sends `sig` to one child, by pid. */
    void signal(size_t index, int sig);
    /**
     * Sends `sig` to every running child, by pid, waits up to `grace` for
     * them to exit, then kills (SIGKILL) and reaps the rest.
     */
    void stop(int sig, std::chrono::milliseconds grace);
    /** Snapshot of the children's state and output so far. */
    std::vector<ChildExit> children();

private:
    struct Child {
        ChildSpec spec;
        ChildExit info;
        bool offered = false;   // its failure went to wait_all's handler
        bool forgiven = false;  // and the handler dealt with it
        int pidfd = -1;
        int out_fd = -1;
        std::string partial_line;
    };
    bool pump(int timeout_ms, int interrupt_fd = -1);
    void reap(Child &child);
    void drain(Child &child, bool final);
    bool any_running();
    /** Failed children not yet offered to a handler, now marked offered. */
    std::vector<size_t> take_unoffered_failures();
    Status first_failure();

    const bool relay_;
    std::mutex mu_;
    std::vector<Child> children_;
};

}  // namespace afmesh
