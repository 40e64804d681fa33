// SPDX-License-Identifier: Apache-2.0
#include "errors.h"

#include <rdma/fi_errno.h>

#include "afmesh/hal/module.h"
#include "libfabric_api.h"

#include <cerrno>
#include <cstdio>

namespace afmesh::fabric {

int status_of(int fi_error) {
    switch (fi_error) {
    case FI_EACCES:
    case FI_EPERM:
    case FI_EKEYREJECTED:
    case FI_EFAULT:
        return AFMESH_HAL_ACCESS;
    case FI_ETIMEDOUT:
        return AFMESH_HAL_TIMEOUT;
    case FI_ENOMEM:
    case FI_ENOSPC:
        return AFMESH_HAL_NO_MEMORY;
    case FI_EINVAL:
        // A well-formed local request that the target refuses: with RMA the
        // target validates key, address and length, so this is the peer
        // rejecting our access.
        return AFMESH_HAL_ACCESS;
    default:
        // Refused, reset, unreachable, cancelled, truncated, I/O errors: the
        // peer (or the path to it) failed; only this connection is affected.
        return AFMESH_HAL_PEER_FAILED;
    }
}

bool read_cq_error(fid_cq *cq, fi_cq_err_entry *entry, const char *what, Failure *failure) {
    *entry = fi_cq_err_entry{};
    if (fi_cq_readerr(cq, entry, 0) != 1) return false;
    char provider_text[160] = "";
    const char *detail = fi_cq_strerror(cq, entry->prov_errno, entry->err_data, provider_text, sizeof provider_text);
    failure->status = status_of(entry->err);
    // tcp (xnet) reports a write its target refused for an unknown key as
    // FI_ECANCELED with the target's errno as provider error: that is ACCESS.
    if (entry->prov_errno == ENOENT || entry->prov_errno == EACCES || entry->prov_errno == EPERM)
        failure->status = AFMESH_HAL_ACCESS;
    failure->reason.format("%s: %s (provider error %d: %s)", what, fabric_strerror(entry->err), entry->prov_errno,
                           detail ? detail : "no detail");
    return true;
}

}  // namespace afmesh::fabric
