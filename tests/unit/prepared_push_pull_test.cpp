// SPDX-License-Identifier: Apache-2.0
// Prepared push-pulls (afmesh_prepare_push_pull) against a real cluster in
// this process, one worker and two servers: every start delivers what the
// buffers hold at that start, small (eager) and large (written) tensors
// alike; starts may overlap; a registration that goes between starts is
// found again; what afmesh_push_pull refuses, preparing refuses.
#include <gtest/gtest.h>

#include <afmesh/afmesh.h>
#include <afmesh/afmesh.hpp>

#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "thread_cluster.h"

namespace {

using afmesh::api::host_bytes;

std::string last_error() { return afmesh_last_error(); }

constexpr int kServers = 2;
constexpr uint64_t kKey = 5;

class PreparedPushPull : public ::testing::TestWithParam<uint64_t> {
protected:
    void SetUp() override {
        const std::string failed = cluster_.start(1, kServers, {});
        ASSERT_EQ(failed, "");
        worker_ = cluster_.workers[0]->get();
        push_.assign(GetParam(), 0);
        for (auto &pull : pulls_) pull.assign(GetParam() + 16, 0);
    }

    void TearDown() override {
        // Stopping is collective: every node at once, one leaving on its own too.
        cluster_.stop_nodes();
        if (leaver_.joinable()) leaver_.join();
    }

    // The push-pull the tests prepare: push_ to every server under kKey,
    // and from each server s its answer into pulls_[s].
    std::vector<afmesh_pull> pulls() {
        std::vector<afmesh_pull> q;
        for (int s = 0; s < kServers; ++s) q.push_back({kKey + 1, host_bytes(pulls_[s].data(), pulls_[s].size()), s});
        return q;
    }

    afmesh_prepared *prepare() {
        afmesh_push p{kKey, host_bytes(push_.data(), push_.size()), nullptr, 0};
        const std::vector<afmesh_pull> q = pulls();
        afmesh_prepared *prepared = nullptr;
        EXPECT_EQ(afmesh_prepare_push_pull(worker_, &p, 1, q.data(), q.size(), &prepared), AFMESH_OK) << last_error();
        return prepared;
    }

    afmesh_handle start(afmesh_prepared *prepared) {
        afmesh_handle h = 0;
        EXPECT_EQ(afmesh_push_pull_start(worker_, prepared, nullptr, &h), AFMESH_OK) << last_error();
        return h;
    }

    // Each server answers `requests` requests: the push it got, then its
    // rank. Joined when it goes: a failed assertion in the test body does
    // not leave a joinable thread behind (which would abort the process).
    std::jthread serve(int requests) {
        return std::jthread([this, requests] {
            std::vector<std::thread> servers;
            for (int s = 0; s < kServers; ++s)
                servers.emplace_back([this, s, requests] {
                    afmesh_node *server = cluster_.servers[s]->get();
                    for (int i = 0; i < requests; ++i) {
                        afmesh_request *r = nullptr;
                        size_t n = 0;
                        ASSERT_EQ(afmesh_get_batch(server, AFMESH_BATCH_ALL_WORKERS, 30000, &r, 1, &n), AFMESH_OK)
                            << last_error();
                        afmesh_tensor in{};
                        uint64_t key = 0;
                        ASSERT_EQ(afmesh_request_push(r, 0, &key, &in), AFMESH_OK);
                        EXPECT_EQ(key, kKey);
                        std::vector<uint8_t> answer(static_cast<const uint8_t *>(in.data),
                                                    static_cast<const uint8_t *>(in.data) + in.bytes);
                        answer.push_back(static_cast<uint8_t>(s + 1));
                        afmesh_tensor out = host_bytes(answer.data(), answer.size());
                        ASSERT_EQ(afmesh_respond(server, r, &out, 1), AFMESH_OK) << last_error();
                    }
                });
            for (auto &t : servers) t.join();
        });
    }

    // What every server must have answered to a push of `fill` bytes.
    void expect_answers(afmesh_handle h, uint8_t fill) {
        for (int s = 0; s < kServers; ++s) {
            uint64_t n = 0;
            ASSERT_EQ(afmesh_pull_bytes(worker_, h, s, &n), AFMESH_OK) << last_error();
            ASSERT_EQ(n, push_.size() + 1) << "server " << s;
            EXPECT_EQ(pulls_[s].front(), fill) << "server " << s;
            EXPECT_EQ(pulls_[s][n - 2], fill) << "server " << s;
            EXPECT_EQ(pulls_[s][n - 1], s + 1) << "server " << s;
        }
    }

    afmesh::test::ThreadCluster cluster_;
    afmesh_node *worker_ = nullptr;
    std::vector<uint8_t> push_;
    std::vector<uint8_t> pulls_[kServers];
    std::thread leaver_;  // a node stopping on its own, joined once the others have stopped too
};

// Through the C++ wrapper, which frees it.
TEST_P(PreparedPushPull, EveryStartCarriesWhatTheBuffersHoldThen) {
    afmesh::api::PreparedPushPull prepared(*cluster_.workers[0], {{kKey, host_bytes(push_.data(), push_.size()), nullptr, 0}},
                                           pulls());
    constexpr int kStarts = 4;
    std::jthread servers = serve(kStarts);
    for (int i = 0; i < kStarts; ++i) {
        const uint8_t fill = static_cast<uint8_t>(10 + i);
        std::fill(push_.begin(), push_.end(), fill);
        const afmesh_handle h = prepared.start();
        ASSERT_EQ(afmesh_wait(worker_, h, 30000), AFMESH_OK) << "start " << i << ": " << last_error();
        expect_answers(h, fill);
    }
    servers.join();
}

// Each start is a push-pull of its own: a second may go before the first
// has completed, and outlive the prepared push-pull that started it.
TEST_P(PreparedPushPull, StartsOverlapAndOutliveTheirPreparedPushPull) {
    afmesh_prepared *prepared = prepare();
    std::fill(push_.begin(), push_.end(), 3);
    std::jthread servers = serve(2);
    const afmesh_handle first = start(prepared), second = start(prepared);
    ASSERT_NE(first, second);
    EXPECT_EQ(afmesh_prepared_free(worker_, prepared), AFMESH_OK);
    ASSERT_EQ(afmesh_wait(worker_, first, 30000), AFMESH_OK) << last_error();
    ASSERT_EQ(afmesh_wait(worker_, second, 30000), AFMESH_OK) << last_error();
    expect_answers(second, 3);
    servers.join();
}

// The pull buffers' registration travels in the request (where the server
// writes the answer): one deregistered between starts must not be used
// again. The buffers here are inside a larger registration, replaced by one
// that starts elsewhere, so a stale one would name the wrong place.
TEST_P(PreparedPushPull, ARegistrationGoneBetweenStartsIsFoundAgain) {
    std::vector<uint8_t> arena(2 * pulls_[0].size() + 4096);
    afmesh_mr *mr = nullptr;
    ASSERT_EQ(afmesh_register_buffer(worker_, arena.data(), arena.size(), AFMESH_MEM_HOST, 0, &mr), AFMESH_OK);
    // Both pulls inside the arena, past its first page.
    std::vector<afmesh_pull> q = pulls();
    for (int s = 0; s < kServers; ++s) q[s].tensor.data = arena.data() + 4096 + s * pulls_[s].size();
    afmesh_push p{kKey, host_bytes(push_.data(), push_.size()), nullptr, 0};
    afmesh_prepared *prepared = nullptr;
    ASSERT_EQ(afmesh_prepare_push_pull(worker_, &p, 1, q.data(), q.size(), &prepared), AFMESH_OK) << last_error();
    std::jthread servers = serve(2);
    for (int round = 0; round < 2; ++round) {
        if (round == 1) {
            ASSERT_EQ(afmesh_deregister_buffer(worker_, mr), AFMESH_OK);
            ASSERT_EQ(afmesh_register_buffer(worker_, arena.data() + 4096, arena.size() - 4096, AFMESH_MEM_HOST, 0,
                                             &mr),
                      AFMESH_OK);
        }
        std::fill(push_.begin(), push_.end(), static_cast<uint8_t>(20 + round));
        const afmesh_handle h = start(prepared);
        ASSERT_EQ(afmesh_wait(worker_, h, 30000), AFMESH_OK) << "round " << round << ": " << last_error();
        for (int s = 0; s < kServers; ++s) {
            const uint8_t *answer = static_cast<const uint8_t *>(q[s].tensor.data);
            EXPECT_EQ(answer[0], 20 + round) << "round " << round << ", server " << s;
            EXPECT_EQ(answer[push_.size()], s + 1) << "round " << round << ", server " << s;
        }
    }
    servers.join();
    EXPECT_EQ(afmesh_deregister_buffer(worker_, mr), AFMESH_OK);
    // `prepared` is left to the node, which frees it when it stops (leak checkers see it does).
}

// A start with a stream, or of device tensors, is afmesh_push_pull_on_stream
// of the description: host tensors do not wait for the stream, and device
// memory that neither the transport nor the device module handles is
// refused at each start, as there.
TEST_P(PreparedPushPull, StreamsAndDeviceTensorsTakeThePushPullPath) {
    afmesh_prepared *prepared = prepare();
    std::fill(push_.begin(), push_.end(), 7);
    std::jthread servers = serve(1);
    int token = 0;
    afmesh_handle h = 0;
    ASSERT_EQ(afmesh_push_pull_start(worker_, prepared, &token, &h), AFMESH_OK) << last_error();
    ASSERT_EQ(afmesh_wait(worker_, h, 30000), AFMESH_OK) << last_error();
    expect_answers(h, 7);
    servers.join();

    afmesh_push device{kKey, host_bytes(push_.data(), push_.size()), nullptr, 0};
    device.tensor.kind = AFMESH_MEM_CUDA;
    afmesh_prepared *on_device = nullptr;
    ASSERT_EQ(afmesh_prepare_push_pull(worker_, &device, 1, nullptr, 0, &on_device), AFMESH_OK) << last_error();
    for (int i = 0; i < 2; ++i) {
        EXPECT_EQ(afmesh_push_pull_start(worker_, on_device, nullptr, &h), AFMESH_ERR_NOT_SUPPORTED);
        EXPECT_NE(last_error().find("cannot register CUDA memory"), std::string::npos) << last_error();
    }
}

// A server that stopped fails every later start that involves it, naming it.
TEST_P(PreparedPushPull, AStoppedServerFailsTheStartNamingIt) {
    afmesh_prepared *prepared = prepare();
    // Stopping is collective: the server's own stop returns once the rest
    // stop too (TearDown).
    leaver_ = std::thread([leaving = std::move(cluster_.servers[1])]() mutable { leaving.reset(); });
    afmesh_event event{};
    event.struct_size = sizeof event;
    do {
        ASSERT_EQ(afmesh_next_event(worker_, &event, 30000), AFMESH_OK) << last_error();
    } while (event.type != AFMESH_EVENT_PEER_DOWN || event.role != AFMESH_ROLE_SERVER || event.rank != 1);
    for (int i = 0; i < 2; ++i) {
        afmesh_handle h = 0;
        EXPECT_EQ(afmesh_push_pull_start(worker_, prepared, nullptr, &h), AFMESH_ERR_PEER_FAILED);
        EXPECT_NE(last_error().find("server 1"), std::string::npos) << last_error();
    }
}

// Eager (inside the messages) and written (into the servers' slices).
std::string size_name(const ::testing::TestParamInfo<uint64_t> &info) { return info.param < 1024 ? "Eager" : "Written"; }
INSTANTIATE_TEST_SUITE_P(Sizes, PreparedPushPull, ::testing::Values(uint64_t{64}, uint64_t{256} << 10), size_name);

class PreparedPushPullMisuse : public PreparedPushPull {};

TEST_P(PreparedPushPullMisuse, IsRefusedWithAReason) {
    afmesh_push p{kKey, host_bytes(push_.data(), push_.size()), nullptr, 0};
    const std::vector<afmesh_pull> q = pulls();
    afmesh_prepared *prepared = nullptr;
    auto refused = [&](afmesh_status status, const std::string &why) {
        EXPECT_EQ(status, AFMESH_ERR_INVALID_ARGUMENT);
        EXPECT_NE(last_error().find(why), std::string::npos) << last_error();
    };
    refused(afmesh_prepare_push_pull(worker_, &p, 1, q.data(), q.size(), nullptr), "null prepared");
    refused(afmesh_prepare_push_pull(worker_, nullptr, 1, q.data(), q.size(), &prepared), "null push or pull");
    afmesh_pull elsewhere = q[0];
    elsewhere.server = kServers;
    refused(afmesh_prepare_push_pull(worker_, &p, 1, &elsewhere, 1, &prepared), "does not exist");
    const afmesh_push twice[2] = {p, p};
    refused(afmesh_prepare_push_pull(worker_, twice, 2, q.data(), q.size(), &prepared), "pushed twice");
    EXPECT_EQ(prepared, nullptr);
    afmesh_node *server = cluster_.servers[0]->get();
    refused(afmesh_prepare_push_pull(server, &p, 1, q.data(), q.size(), &prepared), "not a worker");

    prepared = prepare();
    afmesh_handle h = 0;
    refused(afmesh_push_pull_start(worker_, nullptr, nullptr, &h), "null prepared");
    refused(afmesh_push_pull_start(worker_, prepared, nullptr, nullptr), "null handle");
    refused(afmesh_push_pull_start(server, prepared, nullptr, &h), "not a worker");
    refused(afmesh_prepared_free(server, prepared), "not a worker");
    EXPECT_EQ(afmesh_prepared_free(worker_, nullptr), AFMESH_OK);
    EXPECT_EQ(afmesh_prepared_free(worker_, prepared), AFMESH_OK);
    EXPECT_EQ(afmesh_prepared_free(worker_, prepared), AFMESH_ERR_NOT_FOUND);
    EXPECT_NE(last_error().find("freed already"), std::string::npos) << last_error();
}

INSTANTIATE_TEST_SUITE_P(Sizes, PreparedPushPullMisuse, ::testing::Values(uint64_t{64}), size_name);

}  // namespace
