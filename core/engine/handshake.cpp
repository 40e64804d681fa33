// SPDX-License-Identifier: Apache-2.0
#include "handshake.h"

#include <algorithm>
#include <cstring>

#include "byte_codec.h"

namespace afmesh {
namespace {

// Distinct labels keep a server's proof from ever passing as a worker's.
constexpr char kServerLabel[] = "afmesh server";
constexpr char kWorkerLabel[] = "afmesh worker";

std::span<const uint8_t> bytes_of(const char *text) {
    return {reinterpret_cast<const uint8_t *>(text), strlen(text)};
}

Status refused(const std::string &why) { return {Code::kAccess, why}; }

std::vector<uint64_t> incarnations(const std::vector<RosterEntry> &entries) {
    std::vector<uint64_t> out;
    for (const RosterEntry &e : entries) out.push_back(e.incarnation);
    return out;
}

}  // namespace

Handshake::Handshake(const Roster &roster, int32_t rank)
    : key_(roster.cluster_key),
      worker_incarnations_(incarnations(roster.workers)),
      server_incarnations_(incarnations(roster.servers)),
      rank_(rank) {}

Handshake::Pending &Handshake::track(afmesh_net_conn *conn, Stage stage, Clock::time_point deadline) {
    Pending &p = pending_[conn];
    p = Pending{};
    p.stage = stage;
    p.deadline = deadline;
    p.order = next_order_++;
    return p;
}

Handshake::Pending *Handshake::find(afmesh_net_conn *conn, Stage stage) {
    auto it = pending_.find(conn);
    return it != pending_.end() && it->second.stage == stage ? &it->second : nullptr;
}

Status Handshake::mac(const char *label, const Pending &p, crypto::Mac *out) const {
    std::vector<uint8_t> incarnations;
    ByteWriter w(incarnations);
    w.u64(worker_incarnations_[static_cast<size_t>(p.worker)]);
    w.u64(server_incarnations_[static_cast<size_t>(p.server)]);
    return crypto::hmac(key_, {bytes_of(label), p.ident, p.server_nonce, incarnations}, out);
}

Status Handshake::open(afmesh_net_conn *conn, int32_t server, const wire::MailboxAddress &mailbox,
                       Clock::time_point deadline, std::vector<uint8_t> *ident) {
    wire::Ident m;
    m.worker_rank = rank_;
    m.server_rank = server;
    m.mailbox = mailbox;
    if (Status s = crypto::random_bytes(m.nonce); !s) return s;
    Pending &p = track(conn, Stage::kIdentSent, deadline);
    p.worker = rank_;
    p.server = server;
    wire::encode(m, p.ident);
    *ident = p.ident;
    return Status::ok();
}

Status Handshake::answer(afmesh_net_conn *conn, const void *data, size_t len, std::vector<uint8_t> *proof) {
    Pending *p = find(conn, Stage::kIdentSent);
    if (!p) return refused("a CHALLENGE on a connection that is not waiting for one");
    wire::Challenge challenge;
    if (Status s = wire::decode(data, len, &challenge); !s) return s;
    p->server_nonce = challenge.nonce;
    crypto::Mac expected;
    if (Status s = mac(kServerLabel, *p, &expected); !s) return s;
    if (!crypto::equal(expected, challenge.mac))
        return refused("server " + std::to_string(p->server) +
                       " failed the handshake: it does not hold this cluster's key for its incarnation (a process "
                       "of another cluster, or of an earlier one, at that address)");
    wire::Proof answer;
    if (Status s = mac(kWorkerLabel, *p, &answer.mac); !s) return s;
    forget(conn);
    proof->clear();
    wire::encode(answer, *proof);
    return Status::ok();
}

void Handshake::expect(afmesh_net_conn *conn, Clock::time_point deadline) {
    track(conn, Stage::kAccepted, deadline);
}

Status Handshake::challenge(afmesh_net_conn *conn, const void *data, size_t len, std::vector<uint8_t> *out) {
    Pending *p = find(conn, Stage::kAccepted);
    if (!p) return refused("an IDENT on a connection that has sent one already");
    wire::Ident ident;
    if (Status s = wire::decode(data, len, &ident); !s) return s;
    const auto workers = static_cast<int32_t>(worker_incarnations_.size());
    if (ident.worker_rank < 0 || ident.worker_rank >= workers)
        return refused("IDENT from worker " + std::to_string(ident.worker_rank) + ", which the cluster does not have (" +
                       std::to_string(workers) + " workers)");
    if (ident.server_rank != rank_)
        return refused("IDENT meant for server " + std::to_string(ident.server_rank) + " reached server " +
                       std::to_string(rank_));
    p->stage = Stage::kChallenged;
    p->worker = ident.worker_rank;
    p->server = rank_;
    p->ident.assign(static_cast<const uint8_t *>(data), static_cast<const uint8_t *>(data) + len);
    wire::Challenge m;
    if (Status s = crypto::random_bytes(p->server_nonce); !s) return s;
    m.nonce = p->server_nonce;
    if (Status s = mac(kServerLabel, *p, &m.mac); !s) return s;
    out->clear();
    wire::encode(m, *out);
    return Status::ok();
}

Status Handshake::verify(afmesh_net_conn *conn, const void *data, size_t len, wire::Ident *ident) {
    Pending *p = find(conn, Stage::kChallenged);
    if (!p) return refused("a PROOF before IDENT and CHALLENGE");
    wire::Proof proof;
    if (Status s = wire::decode(data, len, &proof); !s) return s;
    crypto::Mac expected;
    if (Status s = mac(kWorkerLabel, *p, &expected); !s) return s;
    if (!crypto::equal(expected, proof.mac))
        return refused("the connection claiming to be worker " + std::to_string(p->worker) +
                       " failed the handshake: it does not hold this cluster's key for that worker's incarnation");
    Status decoded = wire::decode(p->ident.data(), p->ident.size(), ident);  // checked when it arrived
    forget(conn);
    return decoded;
}

uint64_t Handshake::incarnation(Role role, int32_t rank) const {
    const auto &list = role == Role::kWorker ? worker_incarnations_ : server_incarnations_;
    return list.at(static_cast<size_t>(rank));
}

void Handshake::replace(Role role, int32_t rank, uint64_t incarnation) {
    auto &list = role == Role::kWorker ? worker_incarnations_ : server_incarnations_;
    list.at(static_cast<size_t>(rank)) = incarnation;
}

std::vector<afmesh_net_conn *> Handshake::take_expired(Clock::time_point now) {
    std::vector<afmesh_net_conn *> expired;
    for (const auto &[conn, p] : pending_)
        if (now >= p.deadline) expired.push_back(conn);
    for (afmesh_net_conn *conn : expired) pending_.erase(conn);
    return expired;
}

afmesh_net_conn *Handshake::oldest() const {
    auto it = std::min_element(pending_.begin(), pending_.end(),
                               [](const auto &a, const auto &b) { return a.second.order < b.second.order; });
    return it == pending_.end() ? nullptr : it->first;
}

}  // namespace afmesh
