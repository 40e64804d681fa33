// SPDX-License-Identifier: Apache-2.0
// A cluster node's identity once ranks are assigned: its role and its rank
// within that role.
#pragma once

#include <compare>
#include <cstdint>
#include <string>

#include "control/control_client.h"

namespace afmesh::control {

struct NodeId {
    Role role = Role::kWorker;
    int32_t rank = -1;

    auto operator<=>(const NodeId &) const = default;
};

/** "worker 3", "server 0": how logs and error messages name a node. */
inline std::string node_name(NodeId id) { return std::string(role_name(id.role)) + " " + std::to_string(id.rank); }

}  // namespace afmesh::control
