// SPDX-License-Identifier: Apache-2.0
#include "control/options_check.h"

#include <cstdint>
#include <limits>
#include <string>

namespace afmesh::control {

Status check_options(const ControlOptions &o) {
    auto invalid = [](const std::string &why) { return Status(Code::kInvalidArgument, why); };
    if (o.num_workers < 0 || o.num_servers < 0 || o.num_workers + int64_t{o.num_servers} == 0) {
        return invalid("the cluster needs at least one node (num_workers=" + std::to_string(o.num_workers) +
                       ", num_servers=" + std::to_string(o.num_servers) + ")");
    }
    // Times travel as u32 milliseconds.
    constexpr auto kMaxMs = std::numeric_limits<uint32_t>::max();
    for (auto [name, value] : {std::pair{"connect_timeout", o.connect_timeout},
                               std::pair{"heartbeat_interval", o.heartbeat_interval},
                               std::pair{"heartbeat_timeout", o.heartbeat_timeout}}) {
        if (value.count() <= 0 || value.count() > kMaxMs) {
            return invalid(std::string(name) + " must be 1.." + std::to_string(kMaxMs) + " ms, not " +
                           std::to_string(value.count()));
        }
    }
    if (o.scheduler_reconnect.count() < 0)
        return invalid("scheduler_reconnect must be 0 (never) or more ms, not " +
                       std::to_string(o.scheduler_reconnect.count()));
    if (o.heartbeat_interval >= o.heartbeat_timeout) {
        return invalid("heartbeat_interval (" + std::to_string(o.heartbeat_interval.count()) +
                       " ms) must be shorter than heartbeat_timeout (" +
                       std::to_string(o.heartbeat_timeout.count()) + " ms)");
    }
    return Status::ok();
}

}  // namespace afmesh::control
