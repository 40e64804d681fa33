// SPDX-License-Identifier: Apache-2.0
// libfabric error codes as afmesh statuses, and CQ error entries decoded into
// a status and a human-readable reason (common/failure_reason.h).
#pragma once

#include <rdma/fi_domain.h>
#include <rdma/fi_eq.h>

#include <cstdint>

#include "failure_reason.h"

namespace afmesh::fabric {

/** The tree's failure reason, which the decoders and the progress path fill in. */
using afmesh::Reason;

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
