// SPDX-License-Identifier: Apache-2.0
// A cluster among strangers and faults: processes the scheduler never
// admitted connect to a server's data port (found the way an outsider
// would, from /proc) and try to pass for a worker, write into its memory,
// hold descriptors or exhaust them; and nodes lose the scheduler, then a
// peer freezes. The real nodes check every byte they exchange (af_test_node),
// so a stranger's write would fail them.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <random>

#include "cluster_harness.h"
#include "engine/wire.h"
#include "hold_point.h"
#include "stranger.h"
#include "transports/tcp/wire.h"

namespace afmesh {
namespace {

using namespace std::chrono_literals;

std::vector<std::string> echo(std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"echo"};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
}

// The attack that used to work: with the auth token set on every node, a
// stranger connects to the server's data port before the real worker,
// claims to be worker 0, and is given worker 0's receive slices; the real
// worker is then refused as a second worker 0. Now the stranger gets a
// CHALLENGE it cannot answer and nothing else, and guessed writes go nowhere.
TEST(Trust, AStrangerClaimingToBeWorkerZeroFirstIsRefusedAndTheWorkerServed) {
    Cluster c(1, 1);
    c.set("AFMESH_AUTH_TOKEN=s3cret");
    c.add({"scheduler", -1, {"echo"}, {}});
    c.add({"server", 0, echo(), {}});
    const uint16_t port = data_port(c, "server 0");
    Stranger impostor(port), writer(port);
    ASSERT_TRUE(impostor.connected() && writer.connected());
    ASSERT_TRUE(impostor.send_message(forged_ident(0, 0)));
    // Region ids a guesser would try first; each write is refused before any byte lands.
    for (uint64_t key = 0; key < 64 && writer.send_frame({tcp::FrameType::kWriteImm, 7, key, 0, 0}, {1, 2, 3, 4});)
        ++key;
    c.add({"worker", 0, echo(), {}});

    std::optional<std::vector<uint8_t>> first = impostor.next_message();
    ASSERT_TRUE(first) << "the server closed before challenging the IDENT";
    EXPECT_EQ(wire::peek_type(first->data(), first->size()), wire::Type::kChallenge);
    wire::Proof forged;  // all zeros: the stranger has no key to compute it with
    std::vector<uint8_t> proof;
    wire::encode(forged, proof);
    impostor.send_message(proof);
    for (auto next = impostor.next_message(); next; next = impostor.next_message())
        ADD_FAILURE() << "the stranger was sent message type " << int((*next)[0]) << " after a forged PROOF";
    EXPECT_TRUE(writer.closed_by_server());

    c.expect_all_succeed();
    EXPECT_GE(lines_with(c.output_of("server 0"), "dropping a data connection"), 1u) << c.output_of("server 0");
}

// Strangers that connect and leave, say nothing, send garbage or an
// IDENT without a PROOF cost the server nothing it keeps: every descriptor
// comes back (the handshake deadline is the peer timeout, 1.5 s here), and
// the refusals are logged a line a second, not a line each.
TEST(Trust, StrangersLeaveNoDescriptorsBehindAndDoNotFloodTheLog) {
    HeldCluster held;
    Cluster &c = held.c;
    ASSERT_TRUE(held.ready());
    const pid_t server = c.pid_of("server 0");
    const size_t before = open_descriptors(server);
    for (auto &s : visit_data_port(data_port(c, "server 0"))) {
        EXPECT_TRUE(s->connected());
        EXPECT_TRUE(s->closed_by_server()) << "a stranger's connection was left open";
    }
    EXPECT_TRUE(eventually([&] { return open_descriptors(server) <= before; }))
        << "the server holds " << open_descriptors(server) << " descriptors, " << before << " before the strangers";
    held.release();
    c.expect_all_succeed();
    const std::string log = c.output_of("server 0");
    const size_t reports = lines_with(log, "dropping a data connection");
    EXPECT_GE(reports, 1u);
    EXPECT_LT(reports, 40u) << "over 200 refusals, logged once a second at most\n" << log;
}

// Out of descriptors, the server takes each waiting connection off its
// listener and drops it (a spare descriptor makes room), instead of spinning
// on a listener that stays readable and logging each turn; once the
// strangers are gone it serves on, every byte checked.
TEST(Trust, RunningOutOfDescriptorsNeitherSpinsNorFloodsTheLog) {
    HeldCluster held;
    Cluster &c = held.c;
    ASSERT_TRUE(held.ready());
    const pid_t server = c.pid_of("server 0");
    const uint16_t port = data_port(c, "server 0");
    const size_t before = open_descriptors(server);
    rlimit old_limit{};
    ASSERT_EQ(prlimit(server, RLIMIT_NOFILE, nullptr, &old_limit), 0);
    rlimit tight = old_limit;
    tight.rlim_cur = before + 4;
    if (prlimit(server, RLIMIT_NOFILE, &tight, nullptr) != 0) GTEST_SKIP() << "cannot set another process's limits";

    std::vector<std::unique_ptr<Stranger>> strangers;
    for (int i = 0; i < 100; ++i) strangers.push_back(std::make_unique<Stranger>(port));
    size_t dropped = 0;
    for (auto &s : strangers) dropped += s->closed_by_server();
    EXPECT_EQ(dropped, strangers.size()) << "every stranger is dropped, at once or at its handshake deadline";
    strangers.clear();
    ASSERT_EQ(prlimit(server, RLIMIT_NOFILE, &old_limit, nullptr), 0);
    EXPECT_TRUE(eventually([&] { return open_descriptors(server) <= before; }));
    held.release();
    c.expect_all_succeed();
    const std::string log = c.output_of("server 0");
    const size_t reports = lines_with(log, "for want of descriptors");
    EXPECT_GE(reports, 1u) << log;
    EXPECT_LT(reports, 40u) << "logged once a second at most\n" << log;
}

// With the scheduler gone, only the data connections can tell a worker
// that its server froze: their heartbeats stop, and the worker's
// operations fail naming the server within the peer timeout.
TEST(Trust, AServerFrozenAfterTheSchedulerDiedIsReportedByTheWorker) {
    Cluster c(1, 1);
    HoldPoint server_joined, worker_joined;
    ASSERT_TRUE(server_joined.ok() && worker_joined.ok());
    c.add({"scheduler", -1, {"echo"}, {}, SIGKILL});
    c.add({"server", 0, server_joined.held(echo({"--iters", "1000000"})), {}, SIGKILL});
    c.add({"worker", 0,
           worker_joined.held(echo({"--iters", "1000000", "--expect-peer-failure"})),
           {}});
    ASSERT_TRUE(server_joined.wait_ready(60s) && worker_joined.wait_ready(60s));
    c.signal("scheduler", SIGKILL);
    server_joined.release();
    worker_joined.release();
    c.signal("server 0", SIGSTOP);
    EXPECT_TRUE(c.wait_for("worker 0")) << "the worker did not see its server freeze";
    c.signal("server 0", SIGKILL);
    c.expect_all_succeed();
    const std::string log = c.output_of("worker 0");
    EXPECT_NE(log.find("peer failure reported"), std::string::npos) << log;
    EXPECT_NE(log.find("from server 0"), std::string::npos) << "the error names the frozen server\n" << log;
}

// Nodes that finish their work after the scheduler died have said BYE to
// each other: they stop cleanly (exit 0) instead of failing on the stop
// agreement nobody can give them.
TEST(Trust, NodesThatLoseTheSchedulerStillStopCleanly) {
    Cluster c(1, 1);
    HoldPoint server_joined, worker_joined;
    ASSERT_TRUE(server_joined.ok() && worker_joined.ok());
    c.add({"scheduler", -1, {"echo"}, {}, SIGKILL});
    c.add({"server", 0, server_joined.held(echo()), {}});
    c.add({"worker", 0, worker_joined.held(echo()), {}});
    ASSERT_TRUE(server_joined.wait_ready(60s) && worker_joined.wait_ready(60s));
    c.signal("scheduler", SIGKILL);
    server_joined.release();
    worker_joined.release();
    c.expect_all_succeed();
    EXPECT_NE(c.output_of("worker 0").find("without the cluster-wide agreement"), std::string::npos)
        << c.output_of("worker 0");
}

}  // namespace
}  // namespace afmesh
