// SPDX-License-Identifier: Apache-2.0
// Device, port and GID discovery: which RDMA port a context drives, and a
// line for everything seen on the way saying why it was or was not used.
#pragma once

#include <infiniband/verbs.h>

#include <string>
#include <vector>

#include "gid.h"
#include "verbs_api.h"

namespace afmesh::ibverbs {

/** The port a context uses and how peers address it. */
struct PortChoice {
    std::string device;
    uint8_t port = 0;
    bool roce = false;  ///< Ethernet link layer: addressed by GID; otherwise InfiniBand, by LID
    uint8_t gid_index = 0;
    ibv_gid gid{};
    GidKind gid_kind = GidKind::kEmpty;
    uint16_t lid = 0;
    ibv_mtu mtu = IBV_MTU_1024;
    uint32_t max_msg_size = 0;
};

struct Discovery {
    ibv_context *context = nullptr;  ///< the chosen device, open; the caller closes it
    ibv_device_attr device_attr{};
    PortChoice choice;
    std::vector<std::string> found;  ///< one line per device, port and candidate GID
};

/**
 * Finds the first usable port: active, and for RoCE with a usable GID, for
 * InfiniBand with a LID. `allow_list` is AFMESH_NET_DEVICES: comma-separated
 * "device[:port[:gid_index]]" entries, tried in order (empty: every device).
 * @return AFMESH_HAL_OK; NOT_PRESENT when the host has no RDMA device or no
 *         usable port (with the reason in `why`); ERROR for a malformed or
 *         unsatisfiable allow-list or a failing verbs call.
 */
int discover(const VerbsApi &api, const char *allow_list, Discovery *out, std::string *why);

const char *mtu_name(ibv_mtu mtu);

}  // namespace afmesh::ibverbs
