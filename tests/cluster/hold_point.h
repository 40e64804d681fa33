// SPDX-License-Identifier: Apache-2.0
// The test's end of `af_test_node --hold PATH`: two FIFOs through which a
// node says it has joined ("ready") and is told to go on ("go"). The test
// opens both read-write before the node starts, so the node's opens never
// block and a node that dies cannot hang the test: waits are bounded.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>

namespace afmesh {

class HoldPoint {
public:
    HoldPoint() {
        char dir[] = "/tmp/afmesh-hold-XXXXXX";
        if (!mkdtemp(dir)) return;
        dir_ = dir;
        path_ = dir_ + "/node";
        if (mkfifo((path_ + ".ready").c_str(), 0600) != 0 || mkfifo((path_ + ".go").c_str(), 0600) != 0) return;
        ready_ = open((path_ + ".ready").c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC);
        go_ = open((path_ + ".go").c_str(), O_RDWR | O_CLOEXEC);
    }
    ~HoldPoint() {
        release();  // a node still held must not outlive the test waiting for "go"
        if (ready_ >= 0) close(ready_);
        if (go_ >= 0) close(go_);
        unlink((path_ + ".ready").c_str());
        unlink((path_ + ".go").c_str());
        rmdir(dir_.c_str());
    }
    HoldPoint(const HoldPoint &) = delete;
    HoldPoint &operator=(const HoldPoint &) = delete;

    bool ok() const { return ready_ >= 0 && go_ >= 0; }
    /** A node's arguments `args`, with this hold point's appended. */
    std::vector<std::string> held(std::vector<std::string> args) const {
        args.insert(args.end(), {"--hold", path_});
        return args;
    }

    /** Waits until the node has said "ready"; false when `limit` passes first. */
    bool wait_ready(std::chrono::milliseconds limit) {
        const auto deadline = std::chrono::steady_clock::now() + limit;
        for (std::string got; got.find('\n') == std::string::npos;) {
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                deadline - std::chrono::steady_clock::now());
            pollfd p{ready_, POLLIN, 0};
            if (left.count() <= 0 || poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
            char buf[64];
            const ssize_t n = read(ready_, buf, sizeof buf);
            if (n > 0) got.append(buf, static_cast<size_t>(n));
        }
        return true;
    }
    /** Lets the node go on. Idempotent. */
    void release() {
        if (released_ || go_ < 0) return;
        released_ = true;
        [[maybe_unused]] ssize_t n = write(go_, "go\n", 3);
    }

private:
    std::string dir_, path_;
    int ready_ = -1, go_ = -1;
    bool released_ = false;
};

}  // namespace afmesh
