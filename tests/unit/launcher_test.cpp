// SPDX-License-Identifier: Apache-2.0
// `afmesh run` owns its cluster: SIGTERM or SIGINT to the launcher stops
// every process it started and ends it with 128 + the signal; a launcher
// killed outright (SIGKILL) takes them with it; a failure is reported naming
// the process that failed. Real processes throughout: the launcher is a child
// of the test, its children (the scheduler and nodes that block forever) are
// found through /proc and watched through pidfds; whatever a broken launcher
// leaves behind is reparented to the test (a subreaper), which kills it.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "process_group.h"

#ifndef AFMESH_BIN
#error "the build must define AFMESH_BIN (the afmesh executable)"
#endif

extern char **environ;

namespace afmesh {
namespace {

using Clock = std::chrono::steady_clock;

// Bounds a test that fails; never a timing expectation of one that passes.
constexpr std::chrono::seconds kPatience(30);
// A node program that blocks until it is stopped.
const std::vector<std::string> kBlockingNode = {"/bin/sleep", "1000"};

// Every child of `pid`, from each of its threads' lists.
std::set<pid_t> children_of(pid_t pid) {
    std::set<pid_t> out;
    std::error_code ec;
    for (const auto &task : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
        std::ifstream list(task.path() / "children");
        for (pid_t child; list >> child;) out.insert(child);
    }
    return out;
}

// Re-checks `condition` until it holds or `deadline` passes; the pause
// between checks only spares the CPU, nothing waits on its length.
template <class Condition>
bool eventually(Condition condition, Clock::time_point deadline) {
    for (;;) {
        if (condition()) return true;
        if (Clock::now() >= deadline) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
}

// A process held by pidfd, which is readable once it has ended (zombie or
// reaped, whoever its parent) and names that process, never a reused pid.
class Watched {
public:
    explicit Watched(pid_t pid) : pid_(pid), fd_(static_cast<int>(syscall(SYS_pidfd_open, pid, 0))) {}
    ~Watched() {
        if (fd_ >= 0) close(fd_);
    }
    Watched(Watched &&other) noexcept : pid_(other.pid_), fd_(other.fd_) { other.fd_ = -1; }
    Watched(const Watched &) = delete;
    Watched &operator=(const Watched &) = delete;

    pid_t pid() const { return pid_; }
    bool valid() const { return fd_ >= 0; }
    bool ended_by(Clock::time_point deadline) const {
        pollfd p{fd_, POLLIN, 0};
        for (;;) {
            auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
            int n = poll(&p, 1, static_cast<int>(std::max<long long>(left, 0)));
            if (n > 0) return true;
            if (n == 0 || errno != EINTR) return false;
        }
    }

private:
    pid_t pid_;
    int fd_;
};

// The test's environment without afmesh settings, plus how long the
// scheduler waits for nodes to join (by default, longer than a test runs:
// blocking nodes never join).
std::vector<std::string> launcher_env(const std::string &connect_timeout_ms) {
    std::vector<std::string> env;
    for (char **e = environ; *e; ++e)
        if (std::string(*e).rfind("AFMESH_", 0) != 0) env.push_back(*e);
    env.push_back("AFMESH_CONNECT_TIMEOUT_MS=" + connect_timeout_ms);
    return env;
}

class Launcher : public ::testing::Test {
protected:
    // Orphans of the launcher (of a broken one: a working one leaves none)
    // become the test's children instead of init's, so TearDown can end them.
    void SetUp() override { ASSERT_EQ(prctl(PR_SET_CHILD_SUBREAPER, 1), 0) << strerror(errno); }

    // Kills the launcher if it still runs, then every process it left behind,
    // by pid: each is our child until reaped, so its pid cannot be reused.
    void TearDown() override {
        group_.stop(SIGKILL, std::chrono::milliseconds(0));
        std::set<pid_t> launchers;
        for (const ChildExit &c : group_.children()) launchers.insert(c.pid);
        for (pid_t pid : children_of(getpid())) {
            if (launchers.count(pid)) continue;
            kill(pid, SIGKILL);
            waitpid(pid, nullptr, 0);
        }
    }

    // Starts `afmesh run` with 1 worker and 1 server running `node`.
    void start(const std::vector<std::string> &node, const std::string &connect_timeout_ms = "86400000") {
        std::vector<std::string> argv = {"afmesh", "run", "--workers", "1", "--servers", "1", "--"};
        argv.insert(argv.end(), node.begin(), node.end());
        ASSERT_TRUE(group_.spawn({"launcher", AFMESH_BIN, argv, launcher_env(connect_timeout_ms)}));
    }

    // start(), then waits until the launcher's three children, the scheduler
    // included, exist, and watches each.
    void start_cluster(const std::vector<std::string> &node = kBlockingNode) {
        start(node);
        if (HasFatalFailure()) return;
        const pid_t launcher = group_.children()[0].pid;
        ASSERT_TRUE(eventually([&] { return children_of(launcher).size() == 3; }, Clock::now() + kPatience))
            << "the launcher did not start its cluster\n" << output();
        for (pid_t pid : children_of(launcher)) nodes_.emplace_back(pid);
        // Opened after the listing: a process still listed now is the one the pidfd names.
        const std::set<pid_t> still = children_of(launcher);
        for (const Watched &node : nodes_) ASSERT_TRUE(node.valid() && still.count(node.pid())) << node.pid();
    }

    // The launcher's end, once it has ended by itself.
    ChildExit wait_for_launcher() {
        Status waited = group_.wait_one(0, Clock::now() + kPatience);
        EXPECT_NE(waited.code(), Code::kTimeout) << "the launcher did not end\n" << output();
        return group_.children()[0];
    }

    ChildExit stop_launcher(int sig) {
        group_.signal(0, sig);
        Status waited = group_.wait_one(0, Clock::now() + kPatience);
        EXPECT_NE(waited.code(), Code::kTimeout) << "the launcher outlived " << signal_name(sig) << "\n" << output();
        return group_.children()[0];
    }

    void expect_cluster_gone() {
        const auto deadline = Clock::now() + kPatience;
        for (const Watched &node : nodes_)
            EXPECT_TRUE(node.ended_by(deadline)) << "process " << node.pid() << " outlived the launcher\n" << output();
    }

    // A signal forwarded to the cluster: the launcher reaps it and reports the signal.
    void expect_interrupted_by(int sig, const std::vector<std::string> &node = kBlockingNode) {
        start_cluster(node);
        if (HasFatalFailure()) return;
        ChildExit launcher = stop_launcher(sig);
        EXPECT_EQ(launcher.signal, 0) << "the launcher itself was killed\n" << launcher.output;
        EXPECT_EQ(launcher.code, 128 + sig) << launcher.output;
        EXPECT_NE(launcher.output.find("afmesh run: interrupted by " + signal_name(sig)), std::string::npos)
            << launcher.output;
        expect_cluster_gone();
    }

    std::string output() { return group_.children().empty() ? "" : group_.children()[0].output; }

    ProcessGroup group_{false};
    std::vector<Watched> nodes_;
};

TEST_F(Launcher, SigtermStopsTheWholeCluster) { expect_interrupted_by(SIGTERM); }

TEST_F(Launcher, SigintStopsTheWholeCluster) { expect_interrupted_by(SIGINT); }

// Nodes that ignore the signal are killed once the grace period is over.
TEST_F(Launcher, SigtermKillsNodesThatIgnoreIt) {
    expect_interrupted_by(SIGTERM, {"/bin/sh", "-c", "trap '' TERM; exec sleep 1000"});
}

// Nothing runs in a launcher killed outright: the kernel must end its children.
TEST_F(Launcher, KilledLauncherTakesItsClusterWithIt) {
    start_cluster();
    if (HasFatalFailure()) return;
    ChildExit launcher = stop_launcher(SIGKILL);
    EXPECT_EQ(launcher.signal, SIGKILL);
    expect_cluster_gone();
}

// The worker fails while the server blocks: the launcher stops the rest and
// names the process that failed, with its status.
TEST_F(Launcher, FailureNamesTheProcessThatFailed) {
    ASSERT_NO_FATAL_FAILURE(start({"/bin/sh", "-c", "test \"$AFMESH_ROLE\" = worker && exit 3; exec sleep 1000"}));
    ChildExit launcher = wait_for_launcher();
    EXPECT_EQ(launcher.code, 1) << launcher.output;
    EXPECT_NE(launcher.output.find("afmesh run: worker 0 exited with status 3"), std::string::npos) << launcher.output;
}

// Nodes that never join: the scheduler gives up on them first, and is named.
TEST_F(Launcher, FailureNamesASchedulerThatGaveUp) {
    ASSERT_NO_FATAL_FAILURE(start(kBlockingNode, "500"));
    ChildExit launcher = wait_for_launcher();
    EXPECT_EQ(launcher.code, 1) << launcher.output;
    EXPECT_NE(launcher.output.find("afmesh run: scheduler exited with status 1"), std::string::npos) << launcher.output;
}

}  // namespace
}  // namespace afmesh
