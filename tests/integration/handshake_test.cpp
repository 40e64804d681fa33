// SPDX-License-Identifier: Apache-2.0
// The data plane's mutual authentication (core/engine/handshake.h), without
// sockets: a worker and a server of one cluster complete it, and every way a
// stranger could try to pass fails with ACCESS: another cluster's key, an
// earlier incarnation of the same rank, a proof replayed from another
// connection, a proof for another worker, messages out of order, and a MAC
// off by one bit. Real connections run it in the cluster tests.
#include <gtest/gtest.h>

#include <algorithm>

#include "engine/handshake.h"

namespace afmesh {
namespace {

afmesh_net_conn *conn(uintptr_t id) { return reinterpret_cast<afmesh_net_conn *>(id); }

Roster roster(uint8_t key_byte, uint64_t incarnation_base) {
    Roster r;
    r.cluster_key.fill(key_byte);
    for (int32_t w = 0; w < 2; ++w)
        r.workers.push_back({Role::kWorker, w, "127.0.0.1", "tcp", {}, "cpu", incarnation_base + 1 + w});
    r.servers.push_back({Role::kServer, 0, "127.0.0.1", "tcp", {}, "cpu", incarnation_base + 100});
    return r;
}

const Clock::time_point kLater = Clock::now() + std::chrono::hours(1);

/** One connection's messages between a worker's and a server's Handshake. */
struct Exchange {
    std::vector<uint8_t> ident, challenge, proof;
    Status challenged, answered, verified;
    wire::Ident proven;
};

Exchange run(Handshake &worker, Handshake &server, int32_t server_rank = 0, afmesh_net_conn *c = conn(1)) {
    Exchange e;
    EXPECT_TRUE(worker.open(c, server_rank, wire::MailboxAddress{{5, 6}, 7, 8}, kLater, &e.ident));
    server.expect(c, kLater);
    e.challenged = server.challenge(c, e.ident.data(), e.ident.size(), &e.challenge);
    if (!e.challenged) return e;
    e.answered = worker.answer(c, e.challenge.data(), e.challenge.size(), &e.proof);
    if (!e.answered) return e;
    e.verified = server.verify(c, e.proof.data(), e.proof.size(), &e.proven);
    return e;
}

TEST(Handshake, WorkerAndServerOfOneClusterProveThemselvesToEachOther) {
    const Roster r = roster(0x11, 1000);
    Handshake worker(r, 1), server(r, 0);
    Exchange e = run(worker, server);
    ASSERT_TRUE(e.verified) << e.challenged.to_string() << e.answered.to_string() << e.verified.to_string();
    EXPECT_EQ(e.proven.worker_rank, 1);
    EXPECT_EQ(e.proven.mailbox.rkey.key, 5u);
    EXPECT_EQ(e.proven.mailbox.entries, 8u);
    EXPECT_EQ(worker.pending_count(), 0u);
    EXPECT_EQ(server.pending_count(), 0u);
}

TEST(Handshake, AServerWithoutTheKeyIsUnmaskedByTheWorker) {
    Handshake worker(roster(0x11, 1000), 0), impostor(roster(0x22, 1000), 0);
    Exchange e = run(worker, impostor);
    ASSERT_TRUE(e.challenged);  // the impostor cannot tell yet
    EXPECT_EQ(e.answered.code(), Code::kAccess);
    EXPECT_NE(e.answered.message().find("server 0 failed the handshake"), std::string::npos) << e.answered.message();
    EXPECT_TRUE(e.proof.empty()) << "no proof is given to a server that has not proven itself";
}

TEST(Handshake, AnEarlierIncarnationOfTheSameRankFails) {
    // Same cluster key, but the server knows worker 1 by a newer incarnation.
    Roster old_view = roster(0x11, 1000), new_view = old_view;
    new_view.workers[1].incarnation = 5555;
    Handshake stale_worker(old_view, 1), server(new_view, 0);
    Exchange e = run(stale_worker, server);
    // The server's proof covers the incarnation it knows: the stale worker rejects it first.
    EXPECT_EQ(e.answered.code(), Code::kAccess);
}

TEST(Handshake, AForgedProofIsRefusedAndAnIdentForAnotherServerNeverGetsAChallenge) {
    const Roster r = roster(0x11, 1000);
    Handshake worker(r, 0), server(r, 0);
    Exchange e = run(worker, server);
    ASSERT_TRUE(e.verified);

    // A stranger replays the worker's IDENT on a new connection, then the proof it saw.
    Handshake server_again(r, 0);
    std::vector<uint8_t> challenge;
    server_again.expect(conn(2), kLater);
    ASSERT_TRUE(server_again.challenge(conn(2), e.ident.data(), e.ident.size(), &challenge));
    wire::Ident ignored;
    Status replayed = server_again.verify(conn(2), e.proof.data(), e.proof.size(), &ignored);
    EXPECT_EQ(replayed.code(), Code::kAccess) << "a fresh server nonce makes an old proof worthless";
    EXPECT_NE(replayed.message().find("worker 0 failed the handshake"), std::string::npos) << replayed.message();

    // One flipped bit of an honest proof.
    Handshake worker2(r, 1), server2(r, 0);
    std::vector<uint8_t> ident, proof;
    ASSERT_TRUE(worker2.open(conn(3), 0, {}, kLater, &ident));
    server2.expect(conn(3), kLater);
    ASSERT_TRUE(server2.challenge(conn(3), ident.data(), ident.size(), &challenge));
    ASSERT_TRUE(worker2.answer(conn(3), challenge.data(), challenge.size(), &proof));
    proof.back() ^= 1;
    EXPECT_EQ(server2.verify(conn(3), proof.data(), proof.size(), &ignored).code(), Code::kAccess);

    // An IDENT naming another server, or a worker the cluster lacks.
    Handshake worker3(r, 0), server3(r, 0);
    ASSERT_TRUE(worker3.open(conn(4), 1, {}, kLater, &ident));
    server3.expect(conn(4), kLater);
    Status wrong_server = server3.challenge(conn(4), ident.data(), ident.size(), &challenge);
    EXPECT_EQ(wrong_server.code(), Code::kAccess);
    EXPECT_NE(wrong_server.message().find("meant for server 1"), std::string::npos) << wrong_server.message();
    Handshake ghost(r, 7);
    ASSERT_TRUE(ghost.open(conn(5), 0, {}, kLater, &ident));
    server3.expect(conn(5), kLater);
    EXPECT_EQ(server3.challenge(conn(5), ident.data(), ident.size(), &challenge).code(), Code::kAccess);
}

TEST(Handshake, MessagesOutOfOrderAreRefused) {
    const Roster r = roster(0x11, 1000);
    Handshake worker(r, 0), server(r, 0);
    std::vector<uint8_t> ident, challenge, proof;
    wire::Ident ignored;
    server.expect(conn(1), kLater);
    wire::Proof early;
    std::vector<uint8_t> early_bytes;
    wire::encode(early, early_bytes);
    EXPECT_EQ(server.verify(conn(1), early_bytes.data(), early_bytes.size(), &ignored).code(), Code::kAccess);
    EXPECT_EQ(worker.answer(conn(9), early_bytes.data(), early_bytes.size(), &proof).code(), Code::kAccess)
        << "a CHALLENGE on a connection that sent no IDENT";
    ASSERT_TRUE(worker.open(conn(1), 0, {}, kLater, &ident));
    ASSERT_TRUE(server.challenge(conn(1), ident.data(), ident.size(), &challenge));
    EXPECT_EQ(server.challenge(conn(1), ident.data(), ident.size(), &challenge).code(), Code::kAccess)
        << "a second IDENT";
}

TEST(Handshake, DeadlinesExpireAndTheOldestIsKnown) {
    const Roster r = roster(0x11, 1000);
    Handshake server(r, 0);
    const Clock::time_point now = Clock::now();
    server.expect(conn(1), now + std::chrono::seconds(1));
    server.expect(conn(2), now + std::chrono::seconds(5));
    server.expect(conn(3), now + std::chrono::seconds(2));
    EXPECT_EQ(server.oldest(), conn(1));
    EXPECT_TRUE(server.take_expired(now).empty());
    std::vector<afmesh_net_conn *> expired = server.take_expired(now + std::chrono::seconds(3));
    std::sort(expired.begin(), expired.end());
    EXPECT_EQ(expired, (std::vector<afmesh_net_conn *>{conn(1), conn(3)}));
    EXPECT_EQ(server.pending_count(), 1u);
    EXPECT_TRUE(server.pending(conn(2)));
    EXPECT_EQ(server.oldest(), conn(2));
    server.forget(conn(2));
    EXPECT_EQ(server.oldest(), nullptr);
}

}  // namespace
}  // namespace afmesh
