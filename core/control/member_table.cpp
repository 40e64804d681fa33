// SPDX-License-Identifier: Apache-2.0
#include "control/member_table.h"

namespace afmesh::control {

MemberTable::MemberTable(int32_t num_workers, int32_t num_servers)
    : workers_(static_cast<size_t>(num_workers)),
      servers_(static_cast<size_t>(num_servers)),
      alive_(workers_.size() + servers_.size()) {}

MemberTable::Member &MemberTable::at(NodeId node) {
    return (node.role == Role::kWorker ? workers_ : servers_).at(static_cast<size_t>(node.rank));
}

const MemberTable::Member &MemberTable::at(NodeId node) const {
    return (node.role == Role::kWorker ? workers_ : servers_).at(static_cast<size_t>(node.rank));
}

bool MemberTable::mark_stopped(NodeId node) {
    Member &m = at(node);
    if (m.state != MemberState::kAlive) return false;
    m.state = MemberState::kStopped;
    m.gone_order = ++gone_count_;
    --alive_;
    ++stopped_;
    return true;
}

bool MemberTable::mark_failed(NodeId node, const std::string &reason) {
    Member &m = at(node);
    if (m.state != MemberState::kAlive) return false;
    m.state = MemberState::kFailed;
    m.reason = reason;
    m.gone_order = ++gone_count_;
    --alive_;
    return true;
}

bool MemberTable::mark_replaced(NodeId node) {
    Member &m = at(node);
    if (m.state != MemberState::kFailed) return false;
    m = Member{};
    ++alive_;
    return true;
}

int32_t MemberTable::first_failed(Role role) const {
    const std::vector<Member> &list = members(role);
    for (size_t rank = 0; rank < list.size(); ++rank)
        if (list[rank].state == MemberState::kFailed) return static_cast<int32_t>(rank);
    return -1;
}

std::string MemberTable::first_gone(Role role) const {
    const std::vector<Member> &list = members(role);
    const Member *first = nullptr;
    size_t first_rank = 0;
    for (size_t rank = 0; rank < list.size(); ++rank) {
        const Member &m = list[rank];
        if (m.state != MemberState::kAlive && (!first || m.gone_order < first->gone_order)) {
            first = &m;
            first_rank = rank;
        }
    }
    if (!first) return {};
    const std::string name = node_name({role, static_cast<int32_t>(first_rank)});
    return first->state == MemberState::kStopped ? name + " has stopped" : name + " failed (" + first->reason + ")";
}

ProgressMsg MemberTable::stop_progress() const {
    ProgressMsg progress;
    progress.phase = ProgressPhase::kStop;
    std::vector<NodeId> missing;
    for (Role role : {Role::kWorker, Role::kServer}) {
        const std::vector<Member> &list = members(role);
        uint32_t &count = role == Role::kWorker ? progress.workers_missing : progress.servers_missing;
        for (size_t rank = 0; rank < list.size(); ++rank) {
            if (list[rank].state != MemberState::kAlive) continue;
            ++count;
            missing.push_back({role, static_cast<int32_t>(rank)});
        }
    }
    progress.detail = list_nodes(missing);
    return progress;
}

std::string MemberTable::unavailable(BarrierGroup group) const {
    if (group != BarrierGroup::kServers)
        if (std::string why = first_gone(Role::kWorker); !why.empty()) return why;
    if (group != BarrierGroup::kWorkers) return first_gone(Role::kServer);
    return {};
}

Status MemberTable::outcome() const {
    std::string failed;
    size_t count = 0;
    for (Role role : {Role::kWorker, Role::kServer}) {
        const std::vector<Member> &list = members(role);
        for (size_t rank = 0; rank < list.size(); ++rank) {
            if (list[rank].state != MemberState::kFailed) continue;
            ++count;
            failed += (failed.empty() ? "" : "; ") + node_name({role, static_cast<int32_t>(rank)}) + " (" +
                      list[rank].reason + ")";
        }
    }
    if (count == 0) return Status::ok();
    return {Code::kPeerFailed, "the cluster stopped, but " + std::to_string(count) +
                                   " node(s) had failed instead of stopping: " + failed};
}

std::string list_nodes(const std::vector<NodeId> &nodes, size_t max_names) {
    std::string text;
    for (size_t i = 0; i < nodes.size() && i < max_names; ++i) text += (i ? ", " : "") + node_name(nodes[i]);
    if (nodes.size() > max_names) text += " and " + std::to_string(nodes.size() - max_names) + " more";
    return text;
}

}  // namespace afmesh::control
