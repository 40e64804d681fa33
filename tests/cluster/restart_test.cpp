// SPDX-License-Identifier: Apache-2.0
// `afmesh run --restart 1` brings back a node that died mid-run, and the
// cluster carries on (issue 26), over tcp and fabric/shm. Only the first
// incarnation dies (--die-once); the launcher starts the replacement under
// the same rank, the scheduler admits it, and af_test_node checks every byte
// pulled:
// - 1 worker x 2 servers, server 1 dying after 4 rounds: each micro-batch
//   goes to one server (--subset); push-pulls that failed with server 1 wait
//   for its PEER_UP and go again; servers answer until the worker stops.
// - 2 x 2, worker 1 dying after 4 rounds: servers batch over all workers,
//   wait for worker 1's PEER_UP when the batch fails, and the replacement
//   takes over at round 4, so every request is answered once.
// Several trials each, each bounded.
//
// Each trial prints how long recovery took, from the death to the first
// verified push-pull with the replacement; the test asserts none of it.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

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

constexpr int kTrials = 5;

struct Case {
    const char *name;
    std::vector<std::string> transport;  // AFMESH_* settings
    int workers;
    const char *dies;                   // --die-as
    std::vector<std::string> scenario;  // af_test_node's options beside the common ones
};

const std::vector<std::string> kServerDies = {"--subset", "--serve-until-closed"};
const std::vector<std::string> kWorkerDies = {};

std::vector<std::string> environment(const Case &c) {
    std::vector<std::string> env;
    for (char **e = environ; *e; ++e)
        if (std::string(*e).rfind("AFMESH_", 0) != 0) env.emplace_back(*e);
    for (const std::string &setting : c.transport) env.push_back(setting);
    for (const char *setting : {"AFMESH_HEARTBEAT_MS=100", "AFMESH_PEER_TIMEOUT_MS=1500"}) env.emplace_back(setting);
    return env;
}

long long number(const std::string &log, const std::string &pattern) {
    std::smatch m;
    return std::regex_search(log, m, std::regex(pattern)) ? std::stoll(m[1]) : -1;
}

// The killed nodes, which the launcher names with their pids.
void remove_shm_of_killed(const std::string &log) {
    const std::regex killed(R"(was killed by SIGKILL \(pid (\d+)\))");
    for (auto it = std::sregex_iterator(log.begin(), log.end(), killed); it != std::sregex_iterator(); ++it)
        remove_shm_regions_of(static_cast<pid_t>(std::stol((*it)[1].str())));
}

class Restart : public ::testing::TestWithParam<Case> {};

TEST_P(Restart, TheReplacementJoinsAndTheClusterCarriesOn) {
    const Case &c = GetParam();
    const std::string died_marker = ::testing::TempDir() + "afmesh-restart-" + std::to_string(getpid());
    for (int trial = 0; trial < kTrials; ++trial) {
        SCOPED_TRACE("trial " + std::to_string(trial));
        std::filesystem::remove(died_marker);
        std::vector<std::string> argv = {"afmesh", "run", "--restart", "1", "--workers", std::to_string(c.workers),
                                         "--servers", "2", "--", AF_TEST_NODE, "echo", "--iters", "30",
                                         "--die-after", "4", "--die-as", c.dies, "--die-once", died_marker,
                                         "--await-replacement"};
        argv.insert(argv.end(), c.scenario.begin(), c.scenario.end());
        ProcessGroup group(false);
        ASSERT_TRUE(group.spawn({"afmesh run", AFMESH_BIN, argv, environment(c)}).is_ok());
        const Status waited = group.wait_all(std::chrono::steady_clock::now() + std::chrono::minutes(2), true);
        const std::string log = group.children()[0].output;
        remove_shm_of_killed(log);
        std::filesystem::remove(died_marker);
        ASSERT_TRUE(waited.is_ok()) << waited.message() << "\n" << log;

        const std::string who = std::string(c.dies).replace(std::string(c.dies).find(':'), 1, " ");
        EXPECT_NE(log.find("afmesh run: " + who + " was killed by SIGKILL"), std::string::npos) << log;
        EXPECT_NE(log.find("starting it again under its rank (restart 1 of 1)"), std::string::npos) << log;
        for (int w = 0; w < c.workers; ++w)
            EXPECT_NE(log.find("worker " + std::to_string(w) + ": 30 iterations x 3 micro-batches verified"),
                      std::string::npos)
                << log;
        const long long died = number(log, R"(dying on purpose at (\d+) ns)");
        const long long back = who == "server 1"
                                   ? number(log, R"(first push-pull with server 1's replacement verified at (\d+) ns)")
                                   : number(log, R"(first push-pull of this replacement verified at (\d+) ns)");
        if (who == "server 1") {
            EXPECT_NE(log.find("[worker 0] PEER_UP server 1"), std::string::npos) << log;
        }
        ASSERT_GT(died, 0) << log;
        ASSERT_GT(back, died) << "no push-pull with the replacement was verified\n" << log;
        printf("%s trial %d: recovered in %.1f ms\n", c.name, trial, static_cast<double>(back - died) / 1e6);
    }
}

INSTANTIATE_TEST_SUITE_P(
    KilledNode, Restart,
    ::testing::Values(
        Case{"server_tcp", {"AFMESH_TRANSPORT=tcp"}, 1, "server:1", kServerDies},
        Case{"server_fabric_shm", {"AFMESH_TRANSPORT=fabric", "AFMESH_FABRIC_PROVIDER=shm"}, 1, "server:1", kServerDies},
        Case{"worker_tcp", {"AFMESH_TRANSPORT=tcp"}, 2, "worker:1", kWorkerDies},
        Case{"worker_fabric_shm", {"AFMESH_TRANSPORT=fabric", "AFMESH_FABRIC_PROVIDER=shm"}, 2, "worker:1", kWorkerDies}),
    [](const auto &info) { return std::string(info.param.name); });

}  // namespace
}  // namespace afmesh
