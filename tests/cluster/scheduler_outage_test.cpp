// SPDX-License-Identifier: Apache-2.0
// The scheduler killed under a running cluster (issue 26), over tcp and
// fabric/shm: 1 worker x 2 servers running the AF pipeline, every byte
// checked by af_test_node. The worker holds (hold_point.h) while the test
// kills the scheduler, runs rounds without one, holds again while the test
// starts a scheduler at the same address, and waits to be taken back. Then
// server 1 dies, the test starts it again under its rank, the restarted
// scheduler admits it, and the worker finishes every round verified.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "free_port.h"
#include "hold_point.h"
#include "process_group.h"
#include "shm_regions.h"

#ifndef AFMESH_BIN
#error "the build must define AFMESH_BIN (the afmesh executable)"
#endif
#ifndef AF_TEST_NODE
#error "the build must define AF_TEST_NODE"
#endif

extern char **environ;

namespace afmesh {
namespace {

constexpr int kTrials = 2;
constexpr auto kHoldLimit = std::chrono::seconds(60);

struct Case {
    const char *name;
    std::vector<std::string> transport;  // AFMESH_* settings
};

std::vector<std::string> environment(const Case &c, const std::string &scheduler, const std::string &role,
                                     int rank) {
    std::vector<std::string> env;
    for (char **e = environ; *e; ++e)
        if (std::string(*e).rfind("AFMESH_", 0) != 0) env.emplace_back(*e);
    env.insert(env.end(), c.transport.begin(), c.transport.end());
    env.insert(env.end(), {"AFMESH_SCHEDULER=" + scheduler, "AFMESH_NUM_WORKERS=1", "AFMESH_NUM_SERVERS=2",
                           "AFMESH_HEARTBEAT_MS=100", "AFMESH_PEER_TIMEOUT_MS=1500",
                           "AFMESH_SCHEDULER_RECONNECT_MS=60000", "AFMESH_ROLE=" + role,
                           "AFMESH_RANK=" + std::to_string(rank)});
    if (role == "scheduler") env.emplace_back("AFMESH_LOG_LEVEL=info");  // it says what it adopted
    return env;
}

bool has(const std::string &log, const std::string &line) { return log.find(line) != std::string::npos; }

// af_test_node's arguments for each role (see the file comment).
std::vector<std::string> server_args(const std::string &died_marker) {
    return {"af_test_node", "echo", "--iters", "30", "--subset", "--serve-until-closed", "--die-after", "10",
            "--die-as", "server:1", "--die-once", died_marker};
}

std::vector<std::string> worker_args(const HoldPoint &down, const HoldPoint &back) {
    std::vector<std::string> args = {"af_test_node", "echo", "--iters", "30", "--subset", "--await-replacement",
                                     "--outage-at", "2"};
    for (const auto &[option, point] : {std::pair{"--hold-down", &down}, std::pair{"--hold-back", &back}})
        args.insert(args.end(), {option, point->held({}).back()});  // held() appends {"--hold", path}
    return args;
}

void expect_recovered(const std::string &log) {
    EXPECT_TRUE(has(log, "PEER_DOWN scheduler")) << log;
    EXPECT_TRUE(has(log, "worker 0: 3 rounds verified while the scheduler was down")) << log;
    EXPECT_TRUE(has(log, "worker 0: the restarted scheduler took this node back")) << log;
    EXPECT_TRUE(has(log, "adopted the running cluster: 3 of 3 node(s) rejoined")) << log;
    EXPECT_TRUE(has(log, "PEER_UP server 1")) << log;
    EXPECT_TRUE(has(log, "worker 0: 30 iterations x 3 micro-batches verified")) << log;
}

// The child of `parent` running `afmesh scheduler`, found through /proc, or -1.
pid_t scheduler_child_of(pid_t parent) {
    for (const auto &entry : std::filesystem::directory_iterator("/proc")) {
        const std::string name = entry.path().filename();
        if (name.find_first_not_of("0123456789") != std::string::npos) continue;
        std::ifstream stat(entry.path() / "stat");
        std::string line;
        std::getline(stat, line);
        const size_t paren = line.rfind(')');
        if (paren == std::string::npos) continue;
        std::istringstream fields(line.substr(paren + 2));
        char state;
        pid_t ppid = -1;
        fields >> state >> ppid;
        if (ppid != parent) continue;
        std::ifstream cmdline_file(entry.path() / "cmdline");
        std::string cmdline((std::istreambuf_iterator<char>(cmdline_file)), std::istreambuf_iterator<char>());
        if (cmdline.find(std::string("scheduler\0", 10)) != std::string::npos) return std::stoi(name);
    }
    return -1;
}

class SchedulerOutage : public ::testing::TestWithParam<Case> {};

TEST_P(SchedulerOutage, TrafficGoesOnAndTheRestartedSchedulerAdmitsAReplacement) {
    const Case &c = GetParam();
    const std::string died_marker = ::testing::TempDir() + "afmesh-outage-" + std::to_string(getpid());
    for (int trial = 0; trial < kTrials; ++trial) {
        SCOPED_TRACE("trial " + std::to_string(trial));
        std::filesystem::remove(died_marker);
        const std::string scheduler = with_free_port("127.0.0.1:0");
        HoldPoint down, back;
        ASSERT_TRUE(down.ok() && back.ok());
        ProcessGroup group(false);
        size_t first_scheduler = 0;
        ASSERT_TRUE(group.spawn({"scheduler", AFMESH_BIN, {"afmesh", "scheduler"},
                                 environment(c, scheduler, "scheduler", -1)},
                                &first_scheduler)
                        .is_ok());
        for (int s = 0; s < 2; ++s)
            ASSERT_TRUE(group.spawn({"server " + std::to_string(s), AF_TEST_NODE, server_args(died_marker),
                                     environment(c, scheduler, "server", s)})
                            .is_ok());
        ASSERT_TRUE(group.spawn({"worker 0", AF_TEST_NODE, worker_args(down, back),
                                 environment(c, scheduler, "worker", 0)})
                        .is_ok());

        const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(2);
        ASSERT_TRUE(down.wait_ready(kHoldLimit)) << "the worker never reached the outage";
        group.signal(first_scheduler, SIGKILL);
        (void)group.wait_one(first_scheduler, deadline);
        down.release();
        ASSERT_TRUE(back.wait_ready(kHoldLimit)) << "the worker did not carry on without the scheduler";
        size_t second_scheduler = 0;
        ASSERT_TRUE(group.respawn(first_scheduler, &second_scheduler).is_ok());
        back.release();

        bool replaced = false;
        const Status waited = group.wait_all(deadline, true, -1, [&](size_t index, const ChildExit &exit) {
            if (index == first_scheduler) return true;  // killed on purpose
            if (exit.name != "server 1" || replaced) return false;
            replaced = true;
            remove_shm_regions_of(exit.pid);
            return group.respawn(index).is_ok();
        });
        std::string log;
        for (const ChildExit &child : group.children()) log += "--- " + child.name + "\n" + child.output;
        std::filesystem::remove(died_marker);
        ASSERT_TRUE(waited.is_ok()) << waited.message() << "\n" << log;
        EXPECT_TRUE(replaced) << "server 1 never died\n" << log;
        expect_recovered(log);
    }
}

// The same with one command: `afmesh run --restart 1` starts the killed
// scheduler again at its address, and server 1 under its rank.
TEST(SchedulerOutageUnderRun, RunRestartsTheSchedulerAndTheServer) {
    const std::string died_marker = ::testing::TempDir() + "afmesh-outage-run-" + std::to_string(getpid());
    std::filesystem::remove(died_marker);
    HoldPoint down, back;
    ASSERT_TRUE(down.ok() && back.ok());
    std::vector<std::string> env;
    for (char **e = environ; *e; ++e)
        if (std::string(*e).rfind("AFMESH_", 0) != 0) env.emplace_back(*e);
    env.insert(env.end(), {"AFMESH_TRANSPORT=tcp", "AFMESH_HEARTBEAT_MS=100", "AFMESH_PEER_TIMEOUT_MS=1500",
                           "AFMESH_LOG_LEVEL=info"});
    // One program for every node: the server's options and the worker's, which each role ignores.
    std::vector<std::string> argv = {"afmesh", "run", "--restart", "1", "--workers", "1", "--servers", "2", "--"};
    std::vector<std::string> node = worker_args(down, back);
    const std::vector<std::string> serving = server_args(died_marker);
    node.insert(node.end(), serving.begin() + 5, serving.end());  // from "--serve-until-closed" on
    node.front() = AF_TEST_NODE;
    argv.insert(argv.end(), node.begin(), node.end());
    ProcessGroup group(false);
    size_t run = 0;
    ASSERT_TRUE(group.spawn({"afmesh run", AFMESH_BIN, argv, env}, &run).is_ok());
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(2);
    ASSERT_TRUE(down.wait_ready(kHoldLimit)) << group.children()[run].output;
    const pid_t scheduler = scheduler_child_of(group.children()[run].pid);
    ASSERT_GT(scheduler, 0) << "no scheduler among afmesh run's children";
    ASSERT_EQ(kill(scheduler, SIGKILL), 0);
    down.release();
    ASSERT_TRUE(back.wait_ready(kHoldLimit)) << group.children()[run].output;
    back.release();  // afmesh run has started the scheduler again by now, or will
    const Status waited = group.wait_all(deadline, true);
    const std::string log = group.children()[run].output;
    std::filesystem::remove(died_marker);
    ASSERT_TRUE(waited.is_ok()) << waited.message() << "\n" << log;
    EXPECT_TRUE(has(log, "scheduler was killed by SIGKILL")) << log;
    EXPECT_TRUE(has(log, "starting it again at its address (restart 1 of 1)")) << log;
    EXPECT_TRUE(has(log, "starting it again under its rank (restart 1 of 1)")) << log;
    expect_recovered(log);
}

INSTANTIATE_TEST_SUITE_P(
    KilledScheduler, SchedulerOutage,
    ::testing::Values(Case{"tcp", {"AFMESH_TRANSPORT=tcp"}},
                      Case{"fabric_shm", {"AFMESH_TRANSPORT=fabric", "AFMESH_FABRIC_PROVIDER=shm"}}),
    [](const auto &info) { return std::string(info.param.name); });

}  // namespace
}  // namespace afmesh
