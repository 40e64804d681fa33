// SPDX-License-Identifier: Apache-2.0
// Barrier bookkeeping for the scheduler. Each node numbers its barriers on a
// group 1, 2, 3...; barrier n on a group completes once every member of the
// group has entered its own barrier n there. A node that timed out waiting
// does not retract its arrival, so barrier numbers stay aligned across nodes
// and a late straggler still releases the barrier it was late for.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "control/control_client.h"
#include "control/node_id.h"
#include "status.h"

namespace afmesh::control {

/** Who to answer, and with what, when a barrier completes or fails. */
struct BarrierRelease {
    BarrierGroup group;
    uint64_t seq;
    std::vector<NodeId> nodes;
    Status status;
};

class BarrierTracker {
public:
    BarrierTracker(int32_t num_workers, int32_t num_servers);

    /**
     * Records `node` entering its barrier `seq` over `group`. When
     * `unavailable` is non-empty (a member stopped or failed), the barrier can
     * never complete and this node is released at once with PEER_FAILED.
     * `released` is set when the arrival completes the barrier.
     * INVALID_ARGUMENT when `seq` is not the node's previous number plus one.
     */
    Status arrive(NodeId node, BarrierGroup group, uint64_t seq, const std::string &unavailable,
                  std::optional<BarrierRelease> *released);
    /**
     * `node` will never enter another barrier (`why`): every pending barrier
     * over a group it belongs to fails.
     */
    std::vector<BarrierRelease> fail_member(NodeId node, const std::string &why);
    /**
     * `node` is a failed member's replacement, which enters its next barrier
     * on each group where the cluster is: its numbering starts after the
     * highest number any member of the group has entered. Those numbers, by
     * BarrierGroup - 1 (0 for a group it is not in), for the replacement's
     * roster. Members whose barriers failed fewer times while it was gone,
     * and so lag behind, get their barriers up to that number failed at once.
     */
    std::array<uint64_t, 3> adopt(NodeId node);
    /**
     * A restarted scheduler's start: `node` has entered `entered` barriers
     * (by BarrierGroup - 1) and enters the next number from here.
     */
    void resume(NodeId node, const std::array<uint64_t, 3> &entered);

private:
    size_t group_size(BarrierGroup group) const;

    int32_t num_workers_, num_servers_;
    std::map<std::pair<BarrierGroup, uint64_t>, std::set<NodeId>> pending_;
    std::map<std::pair<NodeId, BarrierGroup>, uint64_t> last_seq_;
    // Per group, the highest number a replacement took over (adopt): the
    // replacement never enters a barrier up to it, so a member that lagged
    // behind and enters one is released at once with PEER_FAILED.
    std::map<BarrierGroup, uint64_t> replaced_through_;
};

}  // namespace afmesh::control
