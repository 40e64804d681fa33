// SPDX-License-Identifier: Apache-2.0
// Choosing the libfabric provider: AFMESH_FABRIC_PROVIDER when set, else
// libfabric's own order filtered to hardware providers this module can drive
// (RDM endpoints with FI_MSG, FI_RMA and at least 4 bytes of remote CQ data):
// software providers (tcp, udp, sockets, shm) only when named, so that
// AFMESH_TRANSPORT=auto falls through to the tcp module on hosts without a
// fabric NIC. Also produces the survey
// describe() prints: every RDM provider seen and why it is or is not used.
#pragma once

#include <rdma/fabric.h>

#include <string>

#include "errors.h"
#include "hmem.h"

namespace afmesh::fabric {

/** The libfabric API version this module is written against. */
inline constexpr uint32_t kFabricApiVersion = FI_VERSION(1, 17);

struct Selection {
    fi_info *info = nullptr;  // the chosen provider and domain (owned, fi_freeinfo)
    bool hmem = false;        // info was granted FI_HMEM
    std::string survey;       // one line per provider/domain seen
};

/**
 * NOT_PRESENT, with the reason in `why`, when the automatic choice
 * (AFMESH_FABRIC_PROVIDER unset) could only come up empty: it takes hardware
 * providers alone, and each drives a device the kernel lists in sysfs (under
 * AFMESH_SYSFS_ROOT). Answers without loading libfabric (libfabric_api.h);
 * OK when libfabric must be asked.
 */
int rule_out_without_libfabric(Reason *why);

/**
 * Picks the provider. OK with `out->info` set; NOT_PRESENT (reason in `why`)
 * when no usable provider exists; ERROR for a broken libfabric.
 */
int select_provider(const HmemProbe &hmem, Selection *out, Reason *why);

}  // namespace afmesh::fabric
