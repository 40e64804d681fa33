// SPDX-License-Identifier: Apache-2.0
// The scheduler's record of what became of each rostered node: still alive,
// stopped cleanly, or failed (and why). It decides when the cluster-wide stop
// is complete and what that stop reports.
//
// A failed node counts as "stopped with failure": survivors are never held
// hostage by a node that died, and the stop's outcome names it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "control/messages.h"
#include "control/node_id.h"
#include "status.h"

namespace afmesh::control {

enum class MemberState { kAlive, kStopped, kFailed };

class MemberTable {
public:
    MemberTable(int32_t num_workers, int32_t num_servers);

    MemberState state(NodeId node) const { return at(node).state; }
    /** Alive -> stopped; false when the node was not alive. */
    bool mark_stopped(NodeId node);
    /**
     * Alive -> failed because of `reason`; false when the node was not alive
     * (a node that goes away after stopping has simply left).
     */
    bool mark_failed(NodeId node, const std::string &reason);

    /** No node is alive any more: the stop is complete. */
    bool settled() const { return alive_ == 0; }
    /** The nodes the stop still waits for, as a PROGRESS message. */
    ProgressMsg stop_progress() const;
    /**
     * Why a barrier over `group` can never complete (e.g. "server 1 failed
     * (connection closed)"), or "" while every member can still enter it.
     */
    std::string unavailable(BarrierGroup group) const;
    /** OK when every node stopped; PEER_FAILED naming each node that failed instead. */
    Status outcome() const;

private:
    struct Member {
        MemberState state = MemberState::kAlive;
        std::string reason;  // kFailed
    };

    Member &at(NodeId node);
    const Member &at(NodeId node) const;
    /** Records the first node of its role to become unavailable, for unavailable(). */
    void note_gone(NodeId node, std::string why);

    std::vector<Member> workers_, servers_;
    size_t alive_;
    std::string first_gone_worker_, first_gone_server_;
};

/** "worker 1, server 0" for at most `max_names` nodes, then "and N more". */
std::string list_nodes(const std::vector<NodeId> &nodes, size_t max_names = 32);

}  // namespace afmesh::control
