// SPDX-License-Identifier: Apache-2.0
// A restarted scheduler re-learning the running cluster it was restarted
// under. The nodes reconnect (REJOIN) and say who they are: role, rank,
// incarnation, the cluster key and how far their barriers got. Once every
// rank is back, or the grace period is over, the roster is rebuilt from what
// they said, and the ranks that never came back are down. Pure bookkeeping:
// no sockets, no clock.
//
// The first node to rejoin sets the cluster key that every later one must
// prove it holds; the auth token (checked before this) decides who may try.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "control/messages.h"
#include "control/node_id.h"
#include "control/rendezvous.h"
#include "status.h"

namespace afmesh::control {

class Adoption {
public:
    explicit Adoption(const ControlOptions &options) : options_(options) {}

    /**
     * Records the node behind `peer` (connected from `host`), whose token,
     * topology and timing the caller has checked, or says why not:
     * INVALID_ARGUMENT for a rank out of range or already rejoined, ACCESS
     * for a cluster key other than the one the rejoined nodes hold.
     */
    Status admit(PeerId peer, const RejoinMsg &rejoin, const std::string &host);
    /** Forgets a node that went away before the adoption was complete. */
    void withdraw(PeerId peer);
    /** Every rank of the cluster has rejoined. */
    bool complete() const { return claims_.size() == static_cast<size_t>(options_.num_workers + options_.num_servers); }

    struct Result {
        /**
         * What the rejoined nodes reported, with their key. A rank that did
         * not rejoin keeps a place holder: no address, and an incarnation
         * newly drawn, so nothing of the lost node can pass for it.
         */
        Roster roster;
        std::vector<std::pair<PeerId, NodeId>> placement;  // who rejoined as what
        std::vector<NodeId> missing;                       // ranks that did not rejoin
        /** Per group (BarrierGroup - 1), the most barriers any node entered: everyone numbers on from there. */
        std::array<uint64_t, 3> barriers_entered{};
    };
    /** The adopted cluster, once some node has rejoined. ERROR only when no incarnation can be drawn. */
    Status finish(Result *out) const;

private:
    struct Claim {
        PeerId peer;
        RosterEntry entry;
        crypto::Key key;
        std::array<uint64_t, 3> barriers_entered;
    };

    const ControlOptions options_;
    std::map<NodeId, Claim> claims_;
};

}  // namespace afmesh::control
