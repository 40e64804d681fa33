// SPDX-License-Identifier: Apache-2.0
// A scheduler restarted at the same address under a running cluster (issue
// 26): the nodes rejoin it, it rebuilds the roster from what they report,
// and barriers, failure notices and replacements work again. Scheduler and
// nodes are threads of this process over loopback TCP; every wait has a
// deadline.
#include <gtest/gtest.h>

#include <future>

#include "control_harness.h"

namespace afmesh::testing {
namespace {

using control::MessageType;

ControlOptions rejoining_options(int32_t num_workers, int32_t num_servers) {
    ControlOptions options = test_options(num_workers, num_servers);
    options.scheduler_reconnect = 30s;
    return options;
}

Hello hello_as(Role role, int32_t rank) { return {role, rank, "tcp", {}, "cpu"}; }

bool contains(const std::string &text, const std::string &part) { return text.find(part) != std::string::npos; }

size_t count_of(const MembershipLog &log, Role role, bool up) {
    size_t n = 0;
    for (const auto &notice : log.notices()) n += notice.role == role && notice.up == up;
    return n;
}

/** Waits until `count` notices about `role` going `up` (or down) have arrived. */
bool wait_for(MembershipLog &log, Role role, bool up, size_t count) {
    for (size_t seen = log.notices().size();; ++seen) {
        if (count_of(log, role, up) >= count) return true;
        if (!log.wait_for_count(seen + 1, 30s)) return false;
    }
}

/** A REJOIN as a hand-driven node would send it. */
std::vector<uint8_t> rejoin_payload(const ControlOptions &options, Role role, int32_t rank, uint64_t incarnation,
                                    const crypto::Key &key) {
    control::RejoinMsg m;
    m.hello = {hello_as(role, rank), options.num_workers, options.num_servers,
               static_cast<uint32_t>(options.heartbeat_interval.count()),
               static_cast<uint32_t>(options.heartbeat_timeout.count()), options.auth_token};
    m.incarnation = incarnation;
    m.cluster_key = key;
    return control::encode(m);
}

std::optional<Status> refusal_of(const std::string &scheduler, const std::vector<uint8_t> &rejoin) {
    RawPeer peer(scheduler);
    EXPECT_TRUE(peer.send_frame(MessageType::kRejoin, rejoin));
    std::optional<Status> error;
    EXPECT_TRUE(peer.wait_closed(30s, &error)) << "the scheduler kept a refused rejoin open";
    return error;
}

TEST(SchedulerRestart, TheClusterRejoinsAndBarriersAndReplacementsWorkAgain) {
    auto cluster = start_cluster(rejoining_options(2, 1));
    ASSERT_TRUE(cluster);
    auto &[options, first, log, clients] = *cluster;
    for (const Status &s : barrier_all(clients, 30s)) EXPECT_TRUE(s) << s.to_string();

    first.reset();
    ASSERT_TRUE(wait_for(log, Role::kScheduler, false, 3)) << "not every node heard the scheduler go";
    for (const auto &c : clients) EXPECT_TRUE(c->scheduler_gone());
    // Entered while no scheduler runs: they wait for the restarted one.
    // Through `cluster`: clang 14 captures no structured binding.
    auto waiting = std::async(std::launch::async, [&] { return barrier_all(cluster->clients, 30s); });

    auto second = start_scheduler(options, options.scheduler);
    ASSERT_TRUE(second);
    ASSERT_TRUE(wait_for(log, Role::kScheduler, true, 3)) << "not every node was taken back";
    for (const Status &s : waiting.get()) EXPECT_TRUE(s) << s.to_string();
    for (const auto &c : clients) EXPECT_FALSE(c->scheduler_gone());

    // Failure notices and a replacement, through the restarted scheduler.
    const int32_t dead_rank = clients[1]->rank();
    const uint64_t old_incarnation = clients[0]->roster().workers.at(static_cast<size_t>(dead_rank)).incarnation;
    clients[1].reset();
    ASSERT_TRUE(wait_for(log, Role::kWorker, false, 2)) << "PEER_DOWN did not reach both survivors";
    Status joined = ControlClient::connect(options, hello_as(Role::kWorker, dead_rank), {}, &clients[1]);
    ASSERT_TRUE(joined) << joined.to_string();
    EXPECT_TRUE(clients[1]->replacement());
    EXPECT_EQ(clients[1]->roster().cluster_key, clients[0]->roster().cluster_key)
        << "the restarted scheduler handed out another key than the cluster's";
    EXPECT_NE(clients[1]->roster().workers.at(static_cast<size_t>(dead_rank)).incarnation, old_incarnation);
    ASSERT_TRUE(wait_for(log, Role::kWorker, true, 2)) << "PEER_UP did not reach both survivors";

    for (const Status &s : barrier_all(clients, 30s)) EXPECT_TRUE(s) << s.to_string();
    for (const Status &s : stop_all(clients, 30s))
        EXPECT_TRUE(s) << s.to_string();
    Status done = second->wait(30s);
    EXPECT_TRUE(done) << done.to_string();
}

TEST(SchedulerRestart, BarrierNumberingStaysAlignedAcrossTheRestart) {
    auto cluster = start_cluster(rejoining_options(1, 1));
    ASSERT_TRUE(cluster);
    auto &[options, first, log, clients] = *cluster;
    // Only the worker enters: its barrier is still pending when the scheduler goes.
    Status alone = clients[0]->barrier(BarrierGroup::kAll, 100ms);
    EXPECT_EQ(alone.code(), Code::kTimeout) << alone.to_string();
    first.reset();
    ASSERT_TRUE(wait_for(log, Role::kScheduler, false, 2));

    auto second = start_scheduler(options, options.scheduler);
    ASSERT_TRUE(second);
    ASSERT_TRUE(wait_for(log, Role::kScheduler, true, 2));
    // The worker entered one barrier more than the server; both number on together.
    for (const Status &s : barrier_all(clients, 30s)) EXPECT_TRUE(s) << s.to_string();
    // stop() goes through the restarted scheduler too.
    for (const Status &s : stop_all(clients, 30s))
        EXPECT_TRUE(s) << s.to_string();
    EXPECT_TRUE(second->wait(30s));
}

TEST(SchedulerRestart, StopWhileTheSchedulerIsDownCompletesThroughTheRestartedOne) {
    auto cluster = start_cluster(rejoining_options(1, 1));
    ASSERT_TRUE(cluster);
    auto &[options, first, log, clients] = *cluster;
    first.reset();
    ASSERT_TRUE(wait_for(log, Role::kScheduler, false, 2));
    auto stopping = std::async(std::launch::async,
                               [&] { return stop_all(cluster->clients, 30s); });
    auto second = start_scheduler(options, options.scheduler);
    ASSERT_TRUE(second);
    for (const Status &s : stopping.get()) EXPECT_TRUE(s) << s.to_string();
    Status done = second->wait(30s);
    EXPECT_TRUE(done) << done.to_string();
}

TEST(SchedulerRestart, ANodeThatDoesNotRejoinIsDownAndCanBeReplaced) {
    ControlOptions patient = rejoining_options(2, 1);
    patient.heartbeat_timeout = 3s;  // the restarted scheduler waits this (and two retries) for the missing node
    auto cluster = start_cluster(patient);
    ASSERT_TRUE(cluster);
    auto &[options, first, log, clients] = *cluster;
    const int32_t lost_rank = clients[1]->rank();

    first.reset();
    ASSERT_TRUE(wait_for(log, Role::kScheduler, false, 3));
    clients[1].reset();  // dies while the scheduler is down: only the restarted one can tell the others
    auto second = start_scheduler(options, options.scheduler);
    ASSERT_TRUE(second);
    ASSERT_TRUE(wait_for(log, Role::kScheduler, true, 2));
    ASSERT_TRUE(wait_for(log, Role::kWorker, false, 2)) << "the survivors were not told of the missing worker";
    for (const auto &notice : log.notices()) {
        if (notice.role != Role::kWorker) continue;
        EXPECT_EQ(notice.rank, lost_rank);
        EXPECT_TRUE(contains(notice.reason, "did not rejoin")) << notice.reason;
    }
    for (ControlClient *survivor : {clients[0].get(), clients[2].get()}) {
        Status blocked = survivor->barrier(BarrierGroup::kAll, 30s);
        EXPECT_EQ(blocked.code(), Code::kPeerFailed) << blocked.to_string();
    }

    Status joined = ControlClient::connect(options, hello_as(Role::kWorker, lost_rank), {}, &clients[1]);
    ASSERT_TRUE(joined) << joined.to_string();
    ASSERT_TRUE(wait_for(log, Role::kWorker, true, 2));
    for (const Status &s : barrier_all(clients, 30s)) EXPECT_TRUE(s) << s.to_string();
    for (const Status &s : stop_all(clients, 30s))
        EXPECT_TRUE(s) << s.to_string();
}

TEST(SchedulerRestart, ARejoinWithoutTheClusterKeyOrForATakenRankIsRefused) {
    auto cluster = start_cluster(rejoining_options(1, 1));
    ASSERT_TRUE(cluster);
    auto &[options, first, log, clients] = *cluster;
    const Roster roster = clients[0]->roster();
    first.reset();
    ASSERT_TRUE(wait_for(log, Role::kScheduler, false, 2));
    clients.clear();  // hand-driven nodes rejoin in their place, in an order the test controls
    auto second = start_scheduler(options, options.scheduler);
    ASSERT_TRUE(second);

    RawPeer server(options.scheduler);
    ASSERT_TRUE(server.send_frame(MessageType::kRejoin, rejoin_payload(options, Role::kServer, 0,
                                                                      roster.servers[0].incarnation, roster.cluster_key)));
    control::Frame frame;
    ASSERT_EQ(server.read(&frame, 30s), RawPeer::Event::kFrame);
    ASSERT_NE(frame.type, MessageType::kError) << "the rightful server's rejoin was refused";

    crypto::Key wrong = roster.cluster_key;
    wrong[0] ^= 1;
    std::optional<Status> keyless =
        refusal_of(options.scheduler, rejoin_payload(options, Role::kWorker, 0, roster.workers[0].incarnation, wrong));
    ASSERT_TRUE(keyless);
    EXPECT_EQ(keyless->code(), Code::kAccess) << keyless->to_string();
    std::optional<Status> twice = refusal_of(
        options.scheduler, rejoin_payload(options, Role::kServer, 0, roster.servers[0].incarnation, roster.cluster_key));
    ASSERT_TRUE(twice);
    EXPECT_TRUE(contains(twice->message(), "has rejoined already")) << twice->to_string();

    // A scheduler forming a new cluster takes no rejoin.
    ControlOptions fresh_options = test_options(1, 1);
    auto fresh = start_scheduler(fresh_options);
    ASSERT_TRUE(fresh);
    RawPeer joined(fresh->address());
    ASSERT_TRUE(joined.send_frame(MessageType::kHello, hello_payload(fresh_options, Role::kWorker, 0)));
    ASSERT_EQ(joined.read(&frame, 30s), RawPeer::Event::kFrame);
    ASSERT_NE(frame.type, MessageType::kError);
    std::optional<Status> forming =
        refusal_of(fresh->address(), rejoin_payload(fresh_options, Role::kServer, 0, 7, roster.cluster_key));
    ASSERT_TRUE(forming);
    EXPECT_TRUE(contains(forming->message(), "forming a new cluster")) << forming->to_string();
}

}  // namespace
}  // namespace afmesh::testing
