// SPDX-License-Identifier: Apache-2.0
// The settings the fabric module reads besides the core's, declared to the
// core (ABI 1.4) so that `afmesh info` lists them and checks their values.
#pragma once

#include "afmesh/hal/module.h"

namespace afmesh::fabric {

/**
 * The endpoint layout unless AFMESH_FABRIC_ENDPOINTS says otherwise; also
 * what the module falls back on where get_config gives nothing (a host
 * older than ABI 1.4 knows no module defaults).
 */
inline constexpr const char *kDefaultEndpoints = "auto";

inline constexpr afmesh_module_setting kSettings[] = {
    {"AFMESH_FABRIC_PROVIDER", AFMESH_SETTING_STRING, nullptr, nullptr, 0, 0,
     "libfabric provider, e.g. 'tcp;ofi_rxm', 'shm', 'efa' (unset: libfabric's first hardware provider)"},
    {"AFMESH_FABRIC_ENDPOINTS", AFMESH_SETTING_ENUM, kDefaultEndpoints, "auto|shared|per-connection", 0, 0,
     "fabric transport: one endpoint for every connection (shared; needs 8-byte remote CQ data), one per "
     "connection, or auto (shared where the provider allows, except over shm)"},
};

}  // namespace afmesh::fabric
