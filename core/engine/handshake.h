// SPDX-License-Identifier: Apache-2.0
// Mutual authentication of a data connection, before either side trusts a
// byte of it. Worker and server prove to each other that they hold the
// cluster key, which the scheduler hands only to the nodes it admitted (over
// their token-checked control connections). Each proof covers both ranks,
// both incarnations and a fresh nonce from each side, so it cannot be
// replayed on another connection, and a process of another cluster or an
// earlier incarnation under the same rank fails it:
//
//   worker -> server  IDENT      worker rank, server rank, Nw, mailbox
//   server -> worker  CHALLENGE  Ns, HMAC(K, "afmesh server" | IDENT | Ns | inc_w | inc_s)
//   worker -> server  PROOF      HMAC(K, "afmesh worker" | IDENT | Ns | inc_w | inc_s)
//
// The server describes no slice and writes nothing into the worker before
// the PROOF checks out; the worker sends nothing but the PROOF before the
// CHALLENGE does. Registration keys are random (every transport), so a
// stranger cannot write into memory it was never told about either.
//
// The core runs this one handshake over every transport's messages, instead
// of each transport carrying its own: a third-party transport cannot forget
// it. What it does not do is encrypt or sign the traffic that follows: it
// keeps strangers out, not an attacker on the path.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "afmesh/hal/transport.h"
#include "control/control_client.h"
#include "engine/wire.h"
#include "progress.h"
#include "status.h"

namespace afmesh {

class Handshake {
public:
    /** `roster` gives the key and every node's incarnation; `rank` is this node's, in its role. */
    Handshake(const Roster &roster, int32_t rank);

    // ---- worker ----
    // Each call below that produces a message replaces the contents of its output vector.

    /** The IDENT that opens `conn` to `server`, kept for checking the CHALLENGE by `deadline`. */
    Status open(afmesh_net_conn *conn, int32_t server, const wire::MailboxAddress &mailbox,
                Clock::time_point deadline, std::vector<uint8_t> *ident);
    /** Checks the server's CHALLENGE on `conn`: the PROOF to send back, or ACCESS naming what failed. */
    Status answer(afmesh_net_conn *conn, const void *data, size_t len, std::vector<uint8_t> *proof);

    // ---- server ----
    /** An accepted connection, which must complete the handshake by `deadline`. */
    void expect(afmesh_net_conn *conn, Clock::time_point deadline);
    /** The IDENT that opened `conn`: the CHALLENGE to send back. */
    Status challenge(afmesh_net_conn *conn, const void *data, size_t len, std::vector<uint8_t> *out);
    /** The worker's PROOF: on OK, `ident` is the IDENT it proved, and `conn` is forgotten. */
    Status verify(afmesh_net_conn *conn, const void *data, size_t len, wire::Ident *ident);

    // ---- both ----
    /** The incarnation a connection from or to `rank` of `role` must prove. */
    uint64_t incarnation(Role role, int32_t rank) const;
    /** A replacement under `role` and `rank` (PEER_UP): from now on only `incarnation` passes. */
    void replace(Role role, int32_t rank, uint64_t incarnation);
    /** Whether `conn` is still in its handshake. */
    bool pending(afmesh_net_conn *conn) const { return pending_.count(conn) != 0; }
    size_t pending_count() const { return pending_.size(); }
    /** Stops tracking `conn` (closed, failed or done). */
    void forget(afmesh_net_conn *conn) { pending_.erase(conn); }
    /** The connections past their deadline, forgotten. */
    std::vector<afmesh_net_conn *> take_expired(Clock::time_point now);
    /** The connection whose handshake began first (nullptr when none): the one to drop when too many wait. */
    afmesh_net_conn *oldest() const;

private:
    enum class Stage { kIdentSent, kAccepted, kChallenged };
    struct Pending {
        Stage stage;
        Clock::time_point deadline;
        uint64_t order;               // when the handshake began, for oldest()
        std::vector<uint8_t> ident;   // the IDENT as it travelled
        int32_t worker = -1, server = -1;
        crypto::Nonce server_nonce{};
    };

    /** The MAC `label` proves over `p`'s transcript. */
    Status mac(const char *label, const Pending &p, crypto::Mac *out) const;
    Pending *find(afmesh_net_conn *conn, Stage stage);
    Pending &track(afmesh_net_conn *conn, Stage stage, Clock::time_point deadline);

    const crypto::Key key_;
    std::vector<uint64_t> worker_incarnations_, server_incarnations_;
    const int32_t rank_;
    std::unordered_map<afmesh_net_conn *, Pending> pending_;
    uint64_t next_order_ = 0;
};

}  // namespace afmesh
