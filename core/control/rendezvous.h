// SPDX-License-Identifier: Apache-2.0
// The scheduler's admission desk. It validates each HELLO (auth token,
// topology, heartbeat timing, requested rank), holds the admitted nodes until
// every expected node has come, then assigns the ranks nobody asked for and
// produces the roster. Pure bookkeeping: no sockets, no clock.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "control/control_client.h"
#include "control/messages.h"
#include "control/node_id.h"
#include "status.h"

namespace afmesh::control {

/** The scheduler's handle for one control connection. */
using PeerId = uint64_t;

/**
 * A random incarnation for a node entering the roster, never 0 (which means
 * none), so that a later process under the same role and rank cannot pass
 * for it. ERROR when the system has no randomness to give.
 */
Status draw_incarnation(uint64_t *incarnation);

class Rendezvous {
public:
    explicit Rendezvous(const ControlOptions &options);

    /**
     * Admits the node behind `peer` (connected from `host`) or says why not:
     * ACCESS for a missing or wrong auth token (checked first, in constant
     * time, so strangers learn nothing else); INVALID_ARGUMENT for a topology
     * or heartbeat-timing mismatch, a requested rank out of range or already
     * taken, or one node more of a role than the cluster has.
     */
    Status admit(PeerId peer, const HelloMsg &hello, const std::string &host);
    /**
     * admit()'s checks that do not depend on the others who joined: the
     * token, the topology and the heartbeat timing. A replacement arriving
     * after the roster passes these too.
     */
    Status check_node(const HelloMsg &hello) const;
    /** Forgets a node that left before the roster: its slot and requested rank are free again. */
    void withdraw(PeerId peer);

    uint32_t workers_missing() const;
    uint32_t servers_missing() const;
    bool complete() const { return workers_missing() == 0 && servers_missing() == 0; }

    /**
     * Once complete(): gives each node that asked for no rank the lowest free
     * one, in arrival order, and returns the roster. `placement` receives every
     * peer's assigned identity.
     */
    Roster assign(std::vector<std::pair<PeerId, NodeId>> *placement) const;

private:
    struct Admitted {
        PeerId peer;
        Hello hello;
        std::string host;
    };

    Status check_rank(const Hello &hello) const;
    std::vector<Admitted> &admitted(Role role) { return role == Role::kWorker ? workers_ : servers_; }
    const std::vector<Admitted> &admitted(Role role) const { return role == Role::kWorker ? workers_ : servers_; }
    int32_t expected(Role role) const { return options_.nodes_of(role); }

    const ControlOptions options_;
    std::vector<Admitted> workers_, servers_;  // in arrival order
};

}  // namespace afmesh::control
