// SPDX-License-Identifier: Apache-2.0
// afmesh_stats_get and friends against a real cluster in this process (a
// scheduler, two servers and two workers on threads), over tcp and over
// libfabric (tcp;ofi_rxm): after known exchanges every count and byte total
// is exact, the peers' shares add up to the node's, a failed push-pull is
// counted under its status, and reading while traffic flows is clean (tsan).
// The fabric module takes its provider from the environment
// (AFMESH_FABRIC_PROVIDER, which the ctest registration sets).
#include <gtest/gtest.h>

#include <afmesh/afmesh.h>
#include <afmesh/afmesh.hpp>

#include <array>
#include <atomic>
#include <memory>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "thread_cluster.h"

namespace {

using afmesh::api::host_bytes;
using afmesh::api::Node;

std::string last_error() { return afmesh_last_error(); }

afmesh_stats stats_of(afmesh_node *node, int32_t peer = -1) {
    afmesh_stats s{};
    s.struct_size = sizeof s;
    const afmesh_status st = peer < 0 ? afmesh_stats_get(node, &s) : afmesh_peer_stats_get(node, peer, &s);
    EXPECT_EQ(st, AFMESH_OK) << last_error();
    return s;
}

// Every [peer] field: the peers' shares must add up to the node's total.
constexpr uint64_t afmesh_stats::*kPeerFields[] = {
    &afmesh_stats::requests,        &afmesh_stats::responses,       &afmesh_stats::push_bytes,
    &afmesh_stats::pull_bytes,      &afmesh_stats::eager_requests,  &afmesh_stats::eager_responses,
    &afmesh_stats::eager_bytes,
    &afmesh_stats::mailbox_requests, &afmesh_stats::mailbox_responses, &afmesh_stats::credit_waits,
    &afmesh_stats::writes,          &afmesh_stats::gathered_writes, &afmesh_stats::messages,
    &afmesh_stats::queue_full,      &afmesh_stats::heartbeats_missed, &afmesh_stats::protocol_errors,
};

struct Exchange {
    uint64_t push, pull;  // bytes pushed to every server, pulled back from each
};
// One small enough to travel inside the REQUEST and RESPONSE (AFMESH_EAGER_BYTES),
// one large enough to be written, its REQUEST riding the write into the mailbox.
constexpr uint64_t kEagerBytes = 1024;
constexpr Exchange kSmall{8, 16}, kLarge{64 * 1024, 32 * 1024};
constexpr int kRounds = 5;

class StatsCluster : public ::testing::TestWithParam<std::vector<std::string>> {
protected:
    static constexpr int kWorkers = 2, kServers = 2;

    void SetUp() override {
        std::vector<std::string> settings = GetParam();
        settings.push_back("AFMESH_EAGER_BYTES=" + std::to_string(kEagerBytes));
        const std::string failed = cluster_.start(kWorkers, kServers, settings);
        ASSERT_EQ(failed, "");
    }

    void TearDown() override {
        // Stopping is collective: every node at once, the one leaving on its
        // own too, then the scheduler ends.
        cluster_.stop_nodes();
        if (leaver_.joinable()) leaver_.join();
    }

    // Server `s` answers `batches` batches (one request from every worker
    // each): every pull slot gets as many bytes as it holds.
    void serve(int s, int batches) {
        std::vector<uint8_t> answer(kLarge.pull, static_cast<uint8_t>(s + 1));
        afmesh_mr *mr = nullptr;
        ASSERT_EQ(afmesh_register_buffer(servers_[s]->get(), answer.data(), answer.size(), AFMESH_MEM_HOST, 0, &mr), AFMESH_OK);
        for (int b = 0; b < batches; ++b) {
            afmesh_request *requests[kWorkers];
            size_t n = 0;
            ASSERT_EQ(afmesh_get_batch(servers_[s]->get(), AFMESH_BATCH_ALL_WORKERS, 30000, requests, kWorkers, &n), AFMESH_OK)
                << last_error();
            for (size_t r = 0; r < n; ++r) {
                afmesh_tensor slot{};
                ASSERT_EQ(afmesh_request_pull(requests[r], 0, nullptr, &slot), AFMESH_OK);
                afmesh_tensor out = host_bytes(answer.data(), slot.bytes);
                ASSERT_EQ(afmesh_respond(servers_[s]->get(), requests[r], &out, 1), AFMESH_OK) << last_error();
            }
        }
        ASSERT_EQ(afmesh_deregister_buffer(servers_[s]->get(), mr), AFMESH_OK);
    }

    // Worker `w`: kRounds push-pulls of each exchange, to and from every server.
    void exchange(int w) {
        std::vector<uint8_t> push(kLarge.push, 7);
        std::vector<std::vector<uint8_t>> pulls(kServers, std::vector<uint8_t>(kLarge.pull));
        for (int round = 0; round < kRounds; ++round)
            for (const Exchange &e : {kSmall, kLarge}) {
                afmesh_push p{};
                p.key = e.push == kSmall.push ? 1 : 2;
                p.tensor = host_bytes(push.data(), e.push);
                std::vector<afmesh_pull> q;
                for (int s = 0; s < kServers; ++s) q.push_back({p.key + 10, host_bytes(pulls[s].data(), e.pull), s});
                afmesh_handle h = 0;
                ASSERT_EQ(afmesh_push_pull(workers_[w]->get(), &p, 1, q.data(), q.size(), &h), AFMESH_OK) << last_error();
                ASSERT_EQ(afmesh_wait(workers_[w]->get(), h, 30000), AFMESH_OK) << last_error();
            }
    }

    void run_exchanges() {
        std::vector<std::thread> threads;
        for (int s = 0; s < kServers; ++s) threads.emplace_back([this, s] { serve(s, 2 * kRounds); });
        for (int w = 0; w < kWorkers; ++w) threads.emplace_back([this, w] { exchange(w); });
        for (auto &t : threads) t.join();
    }

    bool is_tcp() const {
        for (const std::string &s : cluster_.settings)
            if (s == "AFMESH_TRANSPORT=tcp") return true;
        return false;
    }

    afmesh::test::ThreadCluster cluster_;
    std::vector<std::unique_ptr<Node>> &workers_ = cluster_.workers, &servers_ = cluster_.servers;
    std::thread leaver_;  // a node stopping on its own, joined once the others have stopped too
};

TEST_P(StatsCluster, CountsAndBytesAreExactAfterKnownExchanges) {
    run_exchanges();
    const uint64_t push_bytes = kRounds * (kSmall.push + kLarge.push), pull_bytes = kRounds * (kSmall.pull + kLarge.pull);
    for (int w = 0; w < kWorkers; ++w) {
        SCOPED_TRACE("worker " + std::to_string(w));
        const afmesh_stats node = stats_of(workers_[w]->get());
        EXPECT_EQ(node.push_pulls_started, 2u * kRounds);
        EXPECT_EQ(node.push_pulls_completed, 2u * kRounds);
        EXPECT_EQ(node.push_pulls_peer_failed + node.push_pulls_failed, 0u);
        uint64_t timed = 0;
        for (uint64_t bucket : node.latency_buckets) timed += bucket;
        EXPECT_EQ(timed, 2u * kRounds);
        EXPECT_GT(node.latency_ns_sum, 0u);
        EXPECT_GT(node.polls, 0u);
        EXPECT_GE(node.completions, node.polls);
        EXPECT_GT(node.syscalls, 0u);
        for (int s = 0; s < kServers; ++s) {
            SCOPED_TRACE("its server " + std::to_string(s));
            const afmesh_stats peer = stats_of(workers_[w]->get(), s);
            EXPECT_EQ(peer.push_pulls_started, 2u * kRounds);
            EXPECT_EQ(peer.push_pulls_completed, 2u * kRounds);
            EXPECT_EQ(peer.requests, 2u * kRounds);
            EXPECT_EQ(peer.responses, 2u * kRounds);
            EXPECT_EQ(peer.push_bytes, push_bytes);
            EXPECT_EQ(peer.pull_bytes, pull_bytes);
            if (is_tcp()) {  // its sends take a whole REQUEST with 8 B inline, and its writes gather
                EXPECT_EQ(peer.eager_requests, uint64_t{kRounds});
                EXPECT_EQ(peer.eager_responses, uint64_t{kRounds});
                EXPECT_EQ(peer.eager_bytes, kRounds * (kSmall.push + kSmall.pull)) << "the small exchange's, both ways";
                EXPECT_EQ(peer.mailbox_requests, uint64_t{kRounds});
                EXPECT_EQ(peer.mailbox_responses, uint64_t{kRounds});
            } else {  // the provider's limits decide; either way both directions of a push-pull travel alike
                EXPECT_EQ(peer.eager_requests, peer.eager_responses);
                EXPECT_EQ(peer.mailbox_requests, peer.mailbox_responses);
            }
            EXPECT_EQ(peer.protocol_errors, 0u);
            EXPECT_EQ(peer.syscalls, 0u) << "a [node] field";
            // The server saw the same traffic from this worker.
            const afmesh_stats seen = stats_of(servers_[s]->get(), w);
            for (auto field : {&afmesh_stats::requests, &afmesh_stats::responses, &afmesh_stats::push_bytes,
                               &afmesh_stats::pull_bytes, &afmesh_stats::eager_requests,
                               &afmesh_stats::eager_responses, &afmesh_stats::eager_bytes, &afmesh_stats::mailbox_requests,
                               &afmesh_stats::mailbox_responses})
                EXPECT_EQ(seen.*field, peer.*field);
        }
    }
}

TEST_P(StatsCluster, PeerSharesAddUpToTheNodeTotals) {
    run_exchanges();
    for (afmesh_node *node : {workers_[0]->get(), workers_[1]->get(), servers_[0]->get(), servers_[1]->get()}) {
        // Heartbeats may be counted between two reads: compare a node with itself once they are quiet.
        afmesh_stats total = stats_of(node), sum{};
        for (int peer = 0; peer < 2; ++peer) {
            const afmesh_stats share = stats_of(node, peer);
            for (auto field : kPeerFields) sum.*field += share.*field;
        }
        for (auto field : kPeerFields) {
            if (field == &afmesh_stats::messages || field == &afmesh_stats::heartbeats_missed) continue;
            EXPECT_EQ(sum.*field, total.*field);
        }
        EXPECT_GE(stats_of(node).messages, sum.messages);
    }
}

TEST_P(StatsCluster, TransportCountersNameTheirSystemCalls) {
    run_exchanges();
    size_t count = 0;
    ASSERT_EQ(afmesh_transport_counters(workers_[0]->get(), nullptr, 0, &count), AFMESH_OK) << last_error();
    ASSERT_GT(count, 1u);
    std::vector<afmesh_counter> counters(count);
    ASSERT_EQ(afmesh_transport_counters(workers_[0]->get(), counters.data(), counters.size(), &count), AFMESH_OK);
    ASSERT_EQ(count, counters.size());
    auto value = [&](const std::string &name) -> uint64_t {
        for (const afmesh_counter &c : counters)
            if (name == c.name) return c.value;
        ADD_FAILURE() << "no transport counter " << name;
        return 0;
    };
    for (const afmesh_counter &c : counters) EXPECT_GT(strlen(c.help), 0u) << c.name;
    const uint64_t syscalls = value("syscalls");
    if (is_tcp()) {  // tcp: every counter but the total is a kind of system call
        uint64_t sum = 0;
        for (const afmesh_counter &c : counters)
            if (std::string(c.name) != "syscalls") sum += c.value;
        EXPECT_EQ(syscalls, sum);
        EXPECT_GT(value("sendmsg_calls"), 0u);
        EXPECT_GT(value("recvmsg_calls"), 0u);
    } else {  // fabric: the large pushes were writes
        EXPECT_GE(value("fi_writemsg_posts"), uint64_t{kRounds} * kServers);
        EXPECT_GT(value("fi_cq_read_calls"), 0u);
    }
    // The node's system calls are the engine's own plus the transport's (read later, so at least as many).
    EXPECT_GE(stats_of(workers_[0]->get()).syscalls, syscalls);
}

TEST_P(StatsCluster, AFailedPushPullIsCountedUnderItsStatus) {
    // Worker 0 pushes to server 1 alone, which stops instead of answering.
    uint8_t byte = 1, answer = 0;
    const int32_t server = 1;
    afmesh_push p{3, host_bytes(&byte, 1), &server, 1};
    afmesh_pull q{4, host_bytes(&answer, 1), server};
    afmesh_handle h = 0;
    ASSERT_EQ(afmesh_push_pull(workers_[0]->get(), &p, 1, &q, 1, &h), AFMESH_OK) << last_error();
    // Stopping returns once every node has stopped: joined in TearDown.
    leaver_ = std::thread([leaving = std::move(servers_[1])]() mutable { leaving.reset(); });
    EXPECT_EQ(afmesh_wait(workers_[0]->get(), h, 30000), AFMESH_ERR_PEER_FAILED);
    const afmesh_stats node = stats_of(workers_[0]->get()), to_1 = stats_of(workers_[0]->get(), 1), to_0 = stats_of(workers_[0]->get(), 0);
    EXPECT_EQ(node.push_pulls_started, 1u);
    EXPECT_EQ(node.push_pulls_peer_failed, 1u);
    EXPECT_EQ(node.push_pulls_completed + node.push_pulls_failed, 0u);
    EXPECT_EQ(to_1.push_pulls_peer_failed, 1u);
    EXPECT_EQ(to_0.push_pulls_started, 0u);
    uint64_t timed = 0;
    for (uint64_t bucket : node.latency_buckets) timed += bucket;
    EXPECT_EQ(timed, 0u) << "only push-pulls that completed are timed";
}

// A caller built against afmesh 0.1's afmesh.h passes the struct it knows:
// it gets those fields, and nothing is written past them.
TEST_P(StatsCluster, AStructOfTheFirstVersionGetsTheFieldsItHas) {
    run_exchanges();
    afmesh_stats s{};
    constexpr uint64_t kUntouched = 0x5a5a5a5a5a5a5a5a;
    s.eager_bytes = kUntouched;
    s.struct_size = AFMESH_STATS_SIZE_0_1;
    ASSERT_EQ(afmesh_peer_stats_get(workers_[0]->get(), 0, &s), AFMESH_OK) << last_error();
    EXPECT_EQ(s.struct_size, AFMESH_STATS_SIZE_0_1);
    EXPECT_EQ(s.requests, 2u * kRounds);
    EXPECT_EQ(s.eager_bytes, kUntouched) << "a field beyond the caller's struct was written";
}

TEST_P(StatsCluster, MisuseIsRefusedWithAReason) {
    afmesh_stats s{};
    s.struct_size = AFMESH_STATS_SIZE_0_1 - 8;
    EXPECT_EQ(afmesh_stats_get(workers_[0]->get(), &s), AFMESH_ERR_INVALID_ARGUMENT);
    EXPECT_NE(last_error().find("struct_size"), std::string::npos) << last_error();
    s.struct_size = sizeof s;
    EXPECT_EQ(afmesh_peer_stats_get(workers_[0]->get(), kServers, &s), AFMESH_ERR_NOT_FOUND);
    EXPECT_NE(last_error().find("no server 2"), std::string::npos) << last_error();
    EXPECT_EQ(afmesh_stats_get(cluster_.scheduler->get(), &s), AFMESH_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(afmesh_stats_get(workers_[0]->get(), nullptr), AFMESH_ERR_INVALID_ARGUMENT);
    size_t count = 0;
    EXPECT_EQ(afmesh_transport_counters(workers_[0]->get(), nullptr, 4, &count), AFMESH_ERR_INVALID_ARGUMENT);
}

TEST_P(StatsCluster, ReadingWhileTrafficFlowsIsClean) {
    std::atomic<bool> done{false};
    std::thread reader([&] {
        uint64_t last = 0;
        while (!done.load()) {
            const afmesh_stats s = stats_of(workers_[0]->get());
            EXPECT_GE(s.push_pulls_completed, last);
            last = s.push_pulls_completed;
            (void)stats_of(servers_[1]->get(), 0);
        }
    });
    run_exchanges();
    done.store(true);
    reader.join();
    EXPECT_EQ(stats_of(workers_[0]->get()).push_pulls_completed, 2u * kRounds);
}

INSTANTIATE_TEST_SUITE_P(Transports, StatsCluster,
                         ::testing::Values(std::vector<std::string>{"AFMESH_TRANSPORT=tcp"},
                                           std::vector<std::string>{"AFMESH_TRANSPORT=fabric"}),
                         [](const auto &info) { return info.index == 0 ? std::string("tcp") : std::string("fabric"); });

}  // namespace
