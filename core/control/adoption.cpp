// SPDX-License-Identifier: Apache-2.0
#include "control/adoption.h"

#include <algorithm>

#include "crypto.h"

namespace afmesh::control {

Status Adoption::admit(PeerId peer, const RejoinMsg &rejoin, const std::string &host) {
    const Hello &hello = rejoin.hello.hello;
    const NodeId node{hello.role, hello.requested_rank};
    const int32_t n = options_.nodes_of(node.role);
    if (node.rank < 0 || node.rank >= n)
        return {Code::kInvalidArgument, node_name(node) + " cannot rejoin: the cluster has " + std::to_string(n) + " " +
                                            role_name(node.role) + "(s)"};
    // While anyone has rejoined, the key they hold is the cluster's (claims
    // are only ever admitted with the first one's key).
    if (!claims_.empty() && !crypto::equal(claims_.begin()->second.key, rejoin.cluster_key))
        return {Code::kAccess, node_name(node) + " holds another cluster key than the nodes that rejoined before it"};
    if (auto it = claims_.find(node); it != claims_.end())
        return {Code::kInvalidArgument, node_name(node) + " has rejoined already, from " + it->second.entry.host};
    claims_[node] = {peer,
                     {node.role, node.rank, host, hello.transport, hello.address, hello.device, rejoin.incarnation},
                     rejoin.cluster_key,
                     rejoin.barriers_entered};
    return Status::ok();
}

void Adoption::withdraw(PeerId peer) {
    std::erase_if(claims_, [&](const auto &claim) { return claim.second.peer == peer; });
}

Status Adoption::finish(Result *out) const {
    *out = {};
    if (claims_.empty()) return {Code::kInvalidArgument, "cannot adopt the running cluster: every node that rejoined has gone again"};
    out->roster.cluster_key = claims_.begin()->second.key;
    for (Role role : {Role::kWorker, Role::kServer}) {
        auto &entries = out->roster.of(role);
        const int32_t n = options_.nodes_of(role);
        for (int32_t rank = 0; rank < n; ++rank) {
            const NodeId node{role, rank};
            if (auto it = claims_.find(node); it != claims_.end()) {
                entries.push_back(it->second.entry);
                out->placement.emplace_back(it->second.peer, node);
                for (size_t g = 0; g < out->barriers_entered.size(); ++g)
                    out->barriers_entered[g] = std::max(out->barriers_entered[g], it->second.barriers_entered[g]);
                continue;
            }
            RosterEntry placeholder{role, rank, "", "", {}, "", 0};
            if (Status s = draw_incarnation(&placeholder.incarnation); !s) return s;
            entries.push_back(std::move(placeholder));
            out->missing.push_back(node);
        }
    }
    return Status::ok();
}

}  // namespace afmesh::control
