// SPDX-License-Identifier: Apache-2.0
#include "control/rendezvous.h"

#include <algorithm>

#include "crypto.h"

namespace afmesh::control {

Status draw_incarnation(uint64_t *incarnation) {
    do {
        if (Status s = crypto::random_bytes({reinterpret_cast<uint8_t *>(incarnation), sizeof *incarnation}); !s)
            return s;
    } while (*incarnation == 0);
    return Status::ok();
}
namespace {

// Runs in time that depends only on the expected token's length, so a guesser
// learns nothing from how long a refusal took.
bool tokens_equal(std::string_view expected, std::string_view given) {
    // volatile: the compiler may not turn the loop into an early-exit comparison.
    volatile uint8_t diff = expected.size() != given.size() ? 1 : 0;
    for (size_t i = 0; i < expected.size(); ++i) {
        uint8_t g = given.empty() ? 0 : static_cast<uint8_t>(given[i % given.size()]);
        diff = static_cast<uint8_t>(diff | (static_cast<uint8_t>(expected[i]) ^ g));
    }
    return diff == 0;
}

Status invalid(std::string message) { return {Code::kInvalidArgument, std::move(message)}; }

}  // namespace

Rendezvous::Rendezvous(const ControlOptions &options) : options_(options) {}

Status Rendezvous::admit(PeerId peer, const HelloMsg &m, const std::string &host) {
    if (Status s = check_node(m); !s) return s;
    if (Status s = check_rank(m.hello); !s) return s;
    admitted(m.hello.role).push_back({peer, m.hello, host});
    return Status::ok();
}

Status Rendezvous::check_node(const HelloMsg &m) const {
    if (!options_.auth_token.empty()) {
        if (m.auth_token.empty()) return {Code::kAccess, "this scheduler requires an auth token and none was sent"};
        if (!tokens_equal(options_.auth_token, m.auth_token)) return {Code::kAccess, "wrong auth token"};
    }
    if (m.num_workers != options_.num_workers || m.num_servers != options_.num_servers) {
        return invalid("topology mismatch: the node expects " + std::to_string(m.num_workers) + " workers and " +
                       std::to_string(m.num_servers) + " servers, the scheduler " +
                       std::to_string(options_.num_workers) + " and " + std::to_string(options_.num_servers));
    }
    // Either side's heartbeats must arrive well within the other's patience.
    auto scheduler_interval = static_cast<uint32_t>(options_.heartbeat_interval.count());
    auto scheduler_timeout = static_cast<uint32_t>(options_.heartbeat_timeout.count());
    if (m.heartbeat_interval_ms >= scheduler_timeout) {
        return invalid("the node's heartbeat interval (" + std::to_string(m.heartbeat_interval_ms) +
                       " ms) is not shorter than the scheduler's peer timeout (" + std::to_string(scheduler_timeout) +
                       " ms)");
    }
    if (scheduler_interval >= m.heartbeat_timeout_ms) {
        return invalid("the scheduler's heartbeat interval (" + std::to_string(scheduler_interval) +
                       " ms) is not shorter than the node's peer timeout (" +
                       std::to_string(m.heartbeat_timeout_ms) + " ms)");
    }
    return Status::ok();
}

Status Rendezvous::check_rank(const Hello &hello) const {
    const char *role = role_name(hello.role);
    int32_t n = expected(hello.role);
    const std::vector<Admitted> &same_role = admitted(hello.role);
    if (hello.requested_rank != -1) {
        if (hello.requested_rank < 0 || hello.requested_rank >= n) {
            return invalid(std::string("requested ") + role + " rank " + std::to_string(hello.requested_rank) +
                           " is out of range: the cluster has " + std::to_string(n) + " " + role + "(s)");
        }
        for (const Admitted &a : same_role) {
            if (a.hello.requested_rank == hello.requested_rank) {
                return invalid(std::string(role) + " rank " + std::to_string(hello.requested_rank) +
                               " is already taken by the node at " + a.host);
            }
        }
    }
    if (static_cast<int32_t>(same_role.size()) >= n) {
        return invalid(std::string("topology mismatch: the cluster has ") + std::to_string(n) + " " + role +
                       "(s) and all of them have already joined");
    }
    return Status::ok();
}

void Rendezvous::withdraw(PeerId peer) {
    for (std::vector<Admitted> *list : {&workers_, &servers_}) {
        std::erase_if(*list, [&](const Admitted &a) { return a.peer == peer; });
    }
}

uint32_t Rendezvous::workers_missing() const {
    return static_cast<uint32_t>(options_.num_workers - static_cast<int32_t>(workers_.size()));
}

uint32_t Rendezvous::servers_missing() const {
    return static_cast<uint32_t>(options_.num_servers - static_cast<int32_t>(servers_.size()));
}

Roster Rendezvous::assign(std::vector<std::pair<PeerId, NodeId>> *placement) const {
    Roster roster;
    for (Role role : {Role::kWorker, Role::kServer}) {
        const std::vector<Admitted> &nodes = admitted(role);
        std::vector<RosterEntry> &entries = roster.of(role);
        entries.resize(nodes.size());
        std::vector<bool> taken(nodes.size(), false);
        for (const Admitted &a : nodes) {
            if (a.hello.requested_rank >= 0) taken[static_cast<size_t>(a.hello.requested_rank)] = true;
        }
        size_t next_free = 0;
        for (const Admitted &a : nodes) {
            int32_t rank = a.hello.requested_rank;
            if (rank < 0) {
                while (taken[next_free]) ++next_free;
                taken[next_free] = true;
                rank = static_cast<int32_t>(next_free);
            }
            entries[static_cast<size_t>(rank)] = {role, rank, a.host, a.hello.transport, a.hello.address,
                                                  a.hello.device};
            placement->push_back({a.peer, {role, rank}});
        }
    }
    return roster;
}

}  // namespace afmesh::control
