// SPDX-License-Identifier: Apache-2.0
// libfabric error codes as afmesh statuses, and CQ error entries decoded into
// a status and a human-readable reason.
#pragma once

#include <rdma/fi_domain.h>
#include <rdma/fi_eq.h>

#include <cstdarg>
#include <cstdint>

namespace afmesh::fabric {

/** A short human-readable text, owned by its holder (no allocation on failure paths). */
struct Reason {
    char text[320] = {};
    void format(const char *fmt, ...) __attribute__((format(printf, 2, 3)));
};

/** Why a connection failed: an afmesh_hal_status and a reason. */
struct Failure {
    int status = 0;
    Reason reason;
};

/**
 * The afmesh status for a (positive) FI_E* / errno value from a data-path
 * operation: key or bounds refusals are ACCESS, a vanished or refusing peer
 * is PEER_FAILED, FI_ETIMEDOUT is TIMEOUT, FI_ENOMEM is NO_MEMORY.
 */
int status_of(int fi_error);

/**
 * Reads the error entry a CQ holds (after fi_cq_read returned -FI_EAVAIL):
 * fills `entry` and describes it in `failure` as "<what>: <fi_strerror>
 * (provider: <fi_cq_strerror>)". Returns false when no entry could be read.
 */
bool read_cq_error(fid_cq *cq, fi_cq_err_entry *entry, const char *what, Failure *failure);

}  // namespace afmesh::fabric
