// SPDX-License-Identifier: Apache-2.0
#include "nic_match.h"

namespace afmesh::fabric {

bool domain_on_listed_nic(std::string_view domain, std::string_view nic_list) {
    while (!nic_list.empty()) {
        const size_t comma = nic_list.find(',');
        std::string_view entry = nic_list.substr(0, comma);
        nic_list = comma == std::string_view::npos ? std::string_view() : nic_list.substr(comma + 1);
        const std::string_view device = entry.substr(0, entry.find(':'));
        if (device.empty() || domain.substr(0, device.size()) != device) continue;
        // The device itself, or it with a provider's suffix; not mlx5_1 for mlx5_10.
        if (domain.size() == device.size() || domain[device.size()] == '-') return true;
    }
    return false;
}

}  // namespace afmesh::fabric
