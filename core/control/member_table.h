// SPDX-License-Identifier: Apache-2.0
// The scheduler's record of what became of each rostered node: still alive,
// stopped cleanly, or failed (and why). It decides when the cluster-wide stop
// is complete and what that stop reports.
//
// A failed node counts as "stopped with failure": survivors are never held
// hostage by a node that died, and the stop's outcome names it, unless a
// replacement took its place (failed -> alive again, a new incarnation).
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
    /** Failed -> alive: a replacement took its place; false when the node had not failed. */
    bool mark_replaced(NodeId node);
    /** The first failed node of `role` (its rank), or -1 when none is. */
    int32_t first_failed(Role role) const;
    /** Some node has stopped: the cluster is on its way out and takes no replacement. */
    bool stopping() const { return stopped_ > 0; }

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
        std::string reason;       // kFailed
        uint64_t gone_order = 0;  // not kAlive: when it stopped or failed, for unavailable()'s first
    };

    Member &at(NodeId node);
    const Member &at(NodeId node) const;
    const std::vector<Member> &members(Role role) const { return role == Role::kWorker ? workers_ : servers_; }
    /** Why `role`'s earliest node to stop or fail is gone, or "" while all are alive. */
    std::string first_gone(Role role) const;

    std::vector<Member> workers_, servers_;
    size_t alive_;
    size_t stopped_ = 0;
    uint64_t gone_count_ = 0;
};

/** "worker 1, server 0" for at most `max_names` nodes, then "and N more". */
std::string list_nodes(const std::vector<NodeId> &nodes, size_t max_names = 32);

}  // namespace afmesh::control
