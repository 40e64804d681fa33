// Starts a set of child processes (a local cluster), relays their output
// line by line with a name prefix, waits for them with a deadline, and stops
// the rest when one fails. Children are always signalled and reaped by pid;
// a group never outlives its owner's children.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "status.h"

namespace afmesh {

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
    /** relay: also write children's lines (prefixed) to our stdout. */
    explicit ProcessGroup(bool relay) : relay_(relay) {}
    ~ProcessGroup();
    ProcessGroup(const ProcessGroup &) = delete;
    ProcessGroup &operator=(const ProcessGroup &) = delete;

    /** Starts a child; its index in children() is returned in *index. */
    Status spawn(const ChildSpec &spec, size_t *index = nullptr);
    /**
     * Waits until every child has exited or the deadline passes. When
     * `stop_on_failure`, the first child to fail (non-zero exit or a signal)
     * gets the others terminated (SIGTERM, then SIGKILL after a grace period).
     * Returns TIMEOUT (children still running are killed) or the first
     * failure, naming the child.
     */
    Status wait_all(std::chrono::steady_clock::time_point deadline, bool stop_on_failure);
    /** Waits for one child only. */
    Status wait_one(size_t index, std::chrono::steady_clock::time_point deadline);
    /** Sends `sig` to one child, by pid. */
    void signal(size_t index, int sig);
    /** Snapshot of the children's state and output so far. */
    std::vector<ChildExit> children();

private:
    struct Child {
        ChildExit info;
        int pidfd = -1;
        int out_fd = -1;
        std::string partial_line;
    };
    void pump(int timeout_ms);
    void reap(Child &child);
    void drain(Child &child, bool final);
    void terminate_running(std::chrono::milliseconds grace);
    Status first_failure();

    const bool relay_;
    std::mutex mu_;
    std::vector<Child> children_;
};

}  // namespace afmesh
