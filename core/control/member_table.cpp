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

void MemberTable::note_gone(NodeId node, std::string why) {
    std::string &first = node.role == Role::kWorker ? first_gone_worker_ : first_gone_server_;
    if (first.empty()) first = std::move(why);
}

bool MemberTable::mark_stopped(NodeId node) {
    Member &m = at(node);
    if (m.state != MemberState::kAlive) return false;
    m.state = MemberState::kStopped;
    --alive_;
    note_gone(node, node_name(node) + " has stopped");
    return true;
}

bool MemberTable::mark_failed(NodeId node, const std::string &reason) {
    Member &m = at(node);
    if (m.state != MemberState::kAlive) return false;
    m.state = MemberState::kFailed;
    m.reason = reason;
    --alive_;
    note_gone(node, node_name(node) + " failed (" + reason + ")");
    return true;
}

ProgressMsg MemberTable::stop_progress() const {
    ProgressMsg progress;
    progress.phase = ProgressPhase::kStop;
    std::vector<NodeId> missing;
    for (Role role : {Role::kWorker, Role::kServer}) {
        const std::vector<Member> &members = role == Role::kWorker ? workers_ : servers_;
        uint32_t &count = role == Role::kWorker ? progress.workers_missing : progress.servers_missing;
        for (size_t rank = 0; rank < members.size(); ++rank) {
            if (members[rank].state != MemberState::kAlive) continue;
            ++count;
            missing.push_back({role, static_cast<int32_t>(rank)});
        }
    }
    progress.detail = list_nodes(missing);
    return progress;
}

std::string MemberTable::unavailable(BarrierGroup group) const {
    if (group != BarrierGroup::kServers && !first_gone_worker_.empty()) return first_gone_worker_;
    if (group != BarrierGroup::kWorkers && !first_gone_server_.empty()) return first_gone_server_;
    return {};
}

Status MemberTable::outcome() const {
    std::string failed;
    size_t count = 0;
    for (Role role : {Role::kWorker, Role::kServer}) {
        const std::vector<Member> &members = role == Role::kWorker ? workers_ : servers_;
        for (size_t rank = 0; rank < members.size(); ++rank) {
            if (members[rank].state != MemberState::kFailed) continue;
            ++count;
            failed += (failed.empty() ? "" : "; ") + node_name({role, static_cast<int32_t>(rank)}) + " (" +
                      members[rank].reason + ")";
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
