// SPDX-License-Identifier: Apache-2.0
// CPU lists as sysfs and taskset write them: "0-31,64-95", "4,5".
#pragma once

#include <optional>
#include <string_view>
#include <vector>

namespace afmesh::topology {

/** The CPUs of `list`, ascending; nullopt when an item is not N or N-M with N <= M. */
std::optional<std::vector<int>> parse_cpu_list(std::string_view list);

}  // namespace afmesh::topology
