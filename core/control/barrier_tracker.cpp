// SPDX-License-Identifier: Apache-2.0
#include "control/barrier_tracker.h"

#include <algorithm>

#include "control/messages.h"

namespace afmesh::control {

BarrierTracker::BarrierTracker(int32_t num_workers, int32_t num_servers)
    : num_workers_(num_workers), num_servers_(num_servers) {}

size_t BarrierTracker::group_size(BarrierGroup group) const {
    size_t n = 0;
    if (group_contains(group, Role::kWorker)) n += static_cast<size_t>(num_workers_);
    if (group_contains(group, Role::kServer)) n += static_cast<size_t>(num_servers_);
    return n;
}

Status BarrierTracker::arrive(NodeId node, BarrierGroup group, uint64_t seq, const std::string &unavailable,
                              std::optional<BarrierRelease> *released) {
    released->reset();
    uint64_t &last = last_seq_[{node, group}];
    if (seq != last + 1) {
        return {Code::kInvalidArgument, node_name(node) + " entered barrier " + std::to_string(seq) + " over " +
                                            group_name(group) + " after barrier " + std::to_string(last)};
    }
    last = seq;
    std::string why = unavailable;
    if (why.empty() && seq <= replaced_through_[group])
        why = "a member was replaced, and its replacement numbers its barriers from " +
              std::to_string(replaced_through_[group] + 1);
    if (!why.empty()) {
        *released = BarrierRelease{group, seq, {node},
                                   {Code::kPeerFailed, std::string("barrier over ") + group_name(group) +
                                                           " cannot complete: " + why}};
        return Status::ok();
    }
    auto key = std::make_pair(group, seq);
    std::set<NodeId> &arrived = pending_[key];
    arrived.insert(node);
    if (arrived.size() == group_size(group)) {
        *released = BarrierRelease{group, seq, {arrived.begin(), arrived.end()}, Status::ok()};
        pending_.erase(key);
    }
    return Status::ok();
}

std::vector<BarrierRelease> BarrierTracker::fail_member(NodeId node, const std::string &why) {
    std::vector<BarrierRelease> failed;
    for (auto it = pending_.begin(); it != pending_.end();) {
        auto [group, seq] = it->first;
        if (!group_contains(group, node.role)) {
            ++it;
            continue;
        }
        failed.push_back({group, seq, {it->second.begin(), it->second.end()},
                          {Code::kPeerFailed, std::string("barrier over ") + group_name(group) +
                                                  " cannot complete: " + why}});
        it = pending_.erase(it);
    }
    return failed;
}

std::array<uint64_t, 3> BarrierTracker::adopt(NodeId node) {
    std::array<uint64_t, 3> numbers{};
    for (BarrierGroup group : {BarrierGroup::kWorkers, BarrierGroup::kServers, BarrierGroup::kAll}) {
        if (!group_contains(group, node.role)) continue;
        uint64_t highest = 0;
        for (const auto &[key, seq] : last_seq_)
            if (key.second == group && key.first != node) highest = std::max(highest, seq);
        last_seq_[{node, group}] = highest;
        replaced_through_[group] = std::max(replaced_through_[group], highest);
        numbers[static_cast<size_t>(group) - 1] = highest;
    }
    return numbers;
}

void BarrierTracker::resume(NodeId node, const std::array<uint64_t, 3> &entered) {
    for (BarrierGroup group : {BarrierGroup::kWorkers, BarrierGroup::kServers, BarrierGroup::kAll})
        if (group_contains(group, node.role)) last_seq_[{node, group}] = entered[static_cast<size_t>(group) - 1];
}

}  // namespace afmesh::control
