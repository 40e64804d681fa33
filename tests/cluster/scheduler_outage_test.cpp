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
        const std::vector<std::string> serve = {"af_test_node", "echo", "--iters", "30", "--subset",
                                                "--serve-until-closed", "--die-after", "10", "--die-as",
                                                "server:1", "--die-once", died_marker};
        ProcessGroup group(false);
        size_t first_scheduler = 0;
        ASSERT_TRUE(group.spawn({"scheduler", AFMESH_BIN, {"afmesh", "scheduler"},
                                 environment(c, scheduler, "scheduler", -1)},
                                &first_scheduler)
                        .is_ok());
        for (int s = 0; s < 2; ++s)
            ASSERT_TRUE(group.spawn({"server " + std::to_string(s), AF_TEST_NODE, serve,
                                     environment(c, scheduler, "server", s)})
                            .is_ok());
        std::vector<std::string> worker_args = {"af_test_node", "echo", "--iters", "30", "--subset",
                                                "--await-replacement", "--outage-at", "2"};
        for (const auto &[option, point] : {std::pair{"--hold-down", &down}, std::pair{"--hold-back", &back}}) {
            std::vector<std::string> with_hold = point->held({});  // {"--hold", path}
            worker_args.insert(worker_args.end(), {option, with_hold.back()});
        }
        ASSERT_TRUE(group.spawn({"worker 0", AF_TEST_NODE, worker_args, environment(c, scheduler, "worker", 0)})
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
        EXPECT_TRUE(has(log, "PEER_DOWN scheduler")) << log;
        EXPECT_TRUE(has(log, "worker 0: 3 rounds verified while the scheduler was down")) << log;
        EXPECT_TRUE(has(log, "worker 0: the restarted scheduler took this node back")) << log;
        EXPECT_TRUE(has(log, "adopted the running cluster: 3 of 3 node(s) rejoined")) << log;
        EXPECT_TRUE(replaced) << "server 1 never died\n" << log;
        EXPECT_TRUE(has(log, "PEER_UP server 1")) << log;
        EXPECT_TRUE(has(log, "worker 0: 30 iterations x 3 micro-batches verified")) << log;
    }
}

INSTANTIATE_TEST_SUITE_P(
    KilledScheduler, SchedulerOutage,
    ::testing::Values(Case{"tcp", {"AFMESH_TRANSPORT=tcp"}},
                      Case{"fabric_shm", {"AFMESH_TRANSPORT=fabric", "AFMESH_FABRIC_PROVIDER=shm"}}),
    [](const auto &info) { return std::string(info.param.name); });

}  // namespace
}  // namespace afmesh
