// SPDX-License-Identifier: Apache-2.0
// Multi-process clusters on loopback over the transport the environment
// chooses (the tcp module by default; ctest runs some again over fabric).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "cluster_harness.h"
#include "hold_point.h"
#include "two_hosts.h"

namespace afmesh {
namespace {

std::vector<std::string> echo(std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"echo", "--iters", "12"};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
}

TEST(Cluster, OneWorkerOneServer) {
    Cluster c(1, 1);
    c.add_all(echo(), echo());
    c.expect_all_succeed();
    EXPECT_NE(c.output_of("worker 0").find("verified"), std::string::npos);
}

TEST(Cluster, TwoByTwoWithThreeMicroBatchesInFlight) {
    Cluster c(2, 2);
    c.add_all(echo({"--microbatches", "3"}), echo({"--microbatches", "3"}));
    c.expect_all_succeed();
}

TEST(Cluster, FourByTwo) {
    Cluster c(4, 2);
    c.add_all(echo(), echo());
    c.expect_all_succeed();
}

TEST(Cluster, SubsetPushesReachOnlyTheirServer) {
    Cluster c(2, 2);
    c.add_all(echo({"--subset"}), echo({"--subset"}));
    c.expect_all_succeed();
}

TEST(Cluster, ResponsesShorterThanThePullBuffer) {
    Cluster c(2, 2);
    c.add_all(echo({"--dynamic"}), echo({"--dynamic"}));
    c.expect_all_succeed();
}

TEST(Cluster, RespondVecSlicesOneBufferPerWorker) {
    Cluster c(3, 1);
    c.add_all(echo({"--dynamic", "--respond-vec"}), echo({"--dynamic", "--respond-vec"}));
    c.expect_all_succeed();
}

TEST(Cluster, UnregisteredKeysGoThroughRendezvous) {
    Cluster c(2, 2);
    c.add_all(echo({"--unregistered"}), echo({"--unregistered"}));
    c.expect_all_succeed();
}

TEST(Cluster, KilledServerFailsWorkersPendingOperations) {
    Cluster c(2, 2);
    c.add({"scheduler", -1, {"echo"}, {}});
    c.add({"server", 0, echo({"--iters", "1000", "--expect-peer-failure"}), {}});
    c.add({"server", 1, echo({"--iters", "1000", "--die-after", "3"}), {}, SIGKILL});
    for (int w = 0; w < 2; ++w) c.add({"worker", w, echo({"--iters", "1000", "--expect-peer-failure"}), {}});
    c.expect_all_succeed();
    EXPECT_NE(c.output_of("worker 0").find("server 1"), std::string::npos) << "the error names the dead server";
    // The first worker to notice cannot have heard of anything else yet;
    // the other may read server 0's goodbye first (it stops once a worker has).
    const std::string event = "PEER_DOWN server 1 AFMESH_ERR_PEER_FAILED";
    EXPECT_TRUE(c.output_of("worker 0").find(event) != std::string::npos ||
                c.output_of("worker 1").find(event) != std::string::npos)
        << "a worker hears of it as a membership event";
}

TEST(Cluster, KilledWorkerIsReportedByGetBatch) {
    Cluster c(2, 1);
    c.add({"scheduler", -1, {"echo"}, {}});
    c.add({"server", 0, echo({"--iters", "1000", "--expect-peer-failure"}), {}});
    c.add({"worker", 0, echo({"--iters", "1000", "--die-after", "3"}), {}, SIGKILL});
    c.add({"worker", 1, echo({"--iters", "1000", "--expect-peer-failure"}), {}});
    c.expect_all_succeed();
    EXPECT_NE(c.output_of("server 0").find("worker 0"), std::string::npos) << "the error names the dead worker";
    EXPECT_NE(c.output_of("server 0").find("PEER_DOWN worker 0 AFMESH_ERR_PEER_FAILED"), std::string::npos)
        << "the server hears of it as a membership event";
}

// Worker 0 is alive but holds back its requests; worker 1 dies before
// sending any: the server's all-workers get_batch blames worker 1, the one
// that failed, not worker 0, whose request is merely late.
TEST(Cluster, GetBatchBlamesTheDeadWorkerNotALateOne) {
    Cluster c(2, 1);
    HoldPoint late;
    ASSERT_TRUE(late.ok());
    const std::vector<std::string> held = late.held(echo({"--iters", "1000", "--expect-peer-failure"}));
    c.add({"scheduler", -1, {"echo"}, {}});
    // The server reports before worker 0 is let go, then waits for it to stop: not for the usual 30 s.
    c.add({"server", 0, echo({"--iters", "1000", "--expect-peer-failure"}), {"AFMESH_CONNECT_TIMEOUT_MS=5000"}});
    c.add({"worker", 0, held, {}});
    c.add({"worker", 1, echo({"--iters", "1000", "--die-after", "0"}), {}, SIGKILL});
    ASSERT_TRUE(late.wait_ready(std::chrono::seconds(60)));
    EXPECT_TRUE(c.wait_for("server 0"));
    late.release();
    c.expect_all_succeed();
    const std::string log = c.output_of("server 0");
    EXPECT_NE(log.find("worker 1 failed"), std::string::npos) << log;
    EXPECT_EQ(log.find("worker 0 failed"), std::string::npos) << log;
}

TEST(Cluster, MissingNodeTimesEveryoneOut) {
    Cluster c(2, 1);  // two workers expected, one comes
    const std::vector<std::string> fast = {"AFMESH_CONNECT_TIMEOUT_MS=1500"};
    c.add({"scheduler", -1, {"echo"}, fast});
    c.add({"server", 0, {"join", "--expect", "AFMESH_ERR_TIMEOUT"}, fast});
    c.add({"worker", 0, {"join", "--expect", "AFMESH_ERR_TIMEOUT"}, fast});
    c.expect_all_succeed();
    EXPECT_NE(c.output_of("worker 0").find("1 of 2 worker"), std::string::npos) << "the message says who is missing";
}

TEST(Cluster, WrongAuthTokenIsRefused) {
    Cluster c(1, 1);
    const std::string right = "AFMESH_AUTH_TOKEN=right-secret";
    c.add({"scheduler", -1, {"echo"}, {right, "AFMESH_CONNECT_TIMEOUT_MS=1500"}});
    c.add({"server", 0, {"join", "--expect", "AFMESH_ERR_TIMEOUT"}, {right, "AFMESH_CONNECT_TIMEOUT_MS=1500"}});
    c.add({"worker", 0, {"join", "--expect", "AFMESH_ERR_ACCESS"}, {"AFMESH_AUTH_TOKEN=wrong"}});
    c.expect_all_succeed();
}

TEST(Cluster, TwoByTwoAcrossTwoNetworkNamespaces) {
    if (access(Cluster::kIp, X_OK) != 0) GTEST_SKIP() << Cluster::kIp << " is not installed (iproute2)";
    TwoHosts hosts;
    if (!hosts.ok()) GTEST_SKIP() << "cannot create network namespaces here (needs root / CAP_SYS_ADMIN)";
    // A fresh namespace has every port free: any fixed one will do.
    Cluster c(2, 2, hosts.address_a() + ":29500");
    // Each transport is told the host's interface: the tcp module by
    // address, libfabric's tcp provider by name (when the fabric module runs it).
    const std::vector<std::string> on_a = {"AFMESH_TCP_BIND=" + hosts.address_a(), "FI_TCP_IFACE=" + hosts.veth_a()};
    const std::vector<std::string> on_b = {"FI_TCP_IFACE=" + hosts.veth_b()};
    c.add({"scheduler", -1, {"echo"}, on_a, 0, hosts.a()});
    for (int s = 0; s < 2; ++s) c.add({"server", s, echo({"--microbatches", "3"}), on_a, 0, hosts.a()});
    for (int w = 0; w < 2; ++w) c.add({"worker", w, echo({"--microbatches", "3"}), on_b, 0, hosts.b()});
    c.expect_all_succeed();
}

}  // namespace
}  // namespace afmesh
