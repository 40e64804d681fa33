// SPDX-License-Identifier: Apache-2.0
// Which libfabric domains sit on the NICs AFMESH_NET_DEVICES lists: the
// user's, or the one the core chose nearest this process's GPU (the core's
// placement offers it to the modules). Both name NICs as the kernel's RDMA
// devices do (/sys/class/infiniband), and the hardware providers name their
// domains after them: verbs (and psm3) by the device itself ("mlx5_0"), efa
// by the device with a suffix for the endpoint type ("rdmap16s27-rdm").
#pragma once

#include <string_view>

namespace afmesh::fabric {

/**
 * Whether `domain` is on one of the NICs of `nic_list`, AFMESH_NET_DEVICES'
 * format: comma-separated, each "device[:port[:gid_index]]". An empty list
 * matches nothing.
 */
bool domain_on_listed_nic(std::string_view domain, std::string_view nic_list);

}  // namespace afmesh::fabric
