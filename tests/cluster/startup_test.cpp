// SPDX-License-Identifier: Apache-2.0
// A cluster of 64 nodes on this one host, started by `afmesh run --timing`
// with the default settings (no AFMESH_DEVICE, no AFMESH_TRANSPORT): every
// node chooses its modules itself, joins, connects to all its peers and
// passes the start-up barrier, and the launcher and the scheduler account for
// the phases. How long it takes is the benchmark's business
// (docs/architecture.md, "Start-up"); here only that it completes.
#include <gtest/gtest.h>

#include <chrono>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "process_group.h"

#ifndef AFMESH_BIN
#error "the build must define AFMESH_BIN (the afmesh executable)"
#endif
#ifndef AF_TEST_NODE
#error "the build must define AF_TEST_NODE"
#endif

extern char **environ;

namespace afmesh {
namespace {

// This environment without afmesh's variables, so the defaults decide.
std::vector<std::string> default_environment() {
    std::vector<std::string> env;
    for (char **e = environ; *e; ++e)
        if (std::string(*e).rfind("AFMESH_", 0) != 0) env.emplace_back(*e);
    env.emplace_back("AFMESH_LOG_LEVEL=info");  // each node says which modules it chose
    return env;
}

size_t count(const std::string &text, const std::regex &pattern) {
    return static_cast<size_t>(std::distance(std::sregex_iterator(text.begin(), text.end(), pattern), std::sregex_iterator()));
}

TEST(Startup, SixtyFourNodesWithDefaultSettingsAllConnect) {
    constexpr int kWorkers = 48, kServers = 16, kNodes = kWorkers + kServers;
    ProcessGroup group(false);
    ASSERT_TRUE(group
                    .spawn({"afmesh run", AFMESH_BIN,
                            {"afmesh", "run", "--timing", "--workers", std::to_string(kWorkers), "--servers",
                             std::to_string(kServers), "--", AF_TEST_NODE, "join", "--expect", "AFMESH_OK"},
                            default_environment()})
                    .is_ok());
    // Bounds a run that hangs; a passing one takes seconds.
    const Status waited = group.wait_all(std::chrono::steady_clock::now() + std::chrono::minutes(5), true);
    const std::string log = group.children()[0].output;
    ASSERT_TRUE(waited.is_ok()) << waited.message() << "\n" << log;

    // Every node passed the start-up barrier, which it enters only once connected to all its peers.
    EXPECT_EQ(count(log, std::regex(R"(join at \d+ ns: AFMESH_OK)")), size_t{kNodes}) << log;
    // Each chose its modules by itself, and all chose the same transport.
    std::set<std::string> transports;
    const std::regex chosen(R"(transport module '(\w+)' selected)");
    for (auto it = std::sregex_iterator(log.begin(), log.end(), chosen); it != std::sregex_iterator(); ++it)
        transports.insert((*it)[1]);
    EXPECT_EQ(count(log, chosen), size_t{kNodes}) << log;
    EXPECT_EQ(transports.size(), 1u) << log;
    EXPECT_EQ(count(log, std::regex(R"(device module '\w+' selected)")), size_t{kNodes}) << log;
    // The launcher's and the scheduler's account of the phases.
    EXPECT_EQ(count(log, std::regex("started " + std::to_string(kNodes + 1) + R"( processes in [0-9.]+ s)")), 1u) << log;
    EXPECT_EQ(count(log, std::regex(R"(start-up of 48 worker\(s\) and 16 server\(s\), from the scheduler's start: )"
                                    R"(first node joined [0-9.]+ s; every node joined [0-9.]+ s \(last: (worker|server) \d+\); )"
                                    R"(roster sent [0-9.]+ s; every node connected to its peers [0-9.]+ s )"
                                    R"(\(last: (worker|server) \d+\); start-up barrier released [0-9.]+ s)")),
              1u)
        << log;
}

}  // namespace
}  // namespace afmesh
