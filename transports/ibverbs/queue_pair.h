// SPDX-License-Identifier: Apache-2.0
// RC queue pair creation and its state transitions, RESET -> INIT -> RTR -> RTS.
#pragma once

#include <string>

#include "discovery.h"
#include "ibverbs/wire.h"
#include "verbs_api.h"

namespace afmesh::ibverbs {

/** Queue sizes of every QP a context creates. */
struct QpSizes {
    uint32_t send_depth;
    uint32_t recv_depth;
    uint32_t max_inline;
};

/** Creates an RC QP on `cq` (both queues) and moves it to INIT; nullptr with `why`. */
ibv_qp *create_rc_qp(const VerbsApi &api, ibv_pd *pd, ibv_cq *cq, const QpSizes &sizes, uint8_t port,
                     std::string *why);

/** INIT -> RTR towards `remote`, then RTR -> RTS with our first PSN `local_psn`. */
bool connect_rc_qp(const VerbsApi &api, ibv_qp *qp, const PortChoice &local, uint32_t local_psn, const QpInfo &remote,
                   std::string *why);

/** Moves the QP to ERROR, which flushes everything outstanding on it. */
void fail_qp(const VerbsApi &api, ibv_qp *qp);

/** This side's half of the handshake. */
QpInfo local_qp_info(const PortChoice &local, const ibv_qp *qp, uint32_t psn);

/** A random 24-bit first PSN, so stale packets of an earlier QP with the same number are not accepted. */
uint32_t random_psn();

}  // namespace afmesh::ibverbs
