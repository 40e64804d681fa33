// SPDX-License-Identifier: Apache-2.0
// Where a node's traffic goes on its host: unless AFMESH_NET_DEVICES says,
// the RDMA NIC nearest its GPU (topology/nic_choice.h), and unless
// AFMESH_CPU_CORES says, the CPUs local to that NIC for the progress thread.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "config.h"
#include "module_loader.h"

namespace afmesh {

struct Placement {
    std::string nic;        // for AFMESH_NET_DEVICES; "" when the user set it or no NIC was found
    std::string reason;     // one line, for the log
    std::vector<int> cpus;  // for the progress thread; empty: not pinned
    int numa_node = -1;     // the NIC's, for pinned staging memory (staging.h); -1: no preference
};

/**
 * The placement of a node using device `device_id` of `device`, read from
 * sysfs under AFMESH_SYSFS_ROOT. The local rank (the launcher's, else the
 * device id) shares out NICs equally near. INVALID_ARGUMENT for an
 * AFMESH_CPU_CORES that is not a CPU list.
 */
Status place_node(const Config &config, const Module &device, int device_id, Placement *out);

}  // namespace afmesh
