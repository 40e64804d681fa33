// SPDX-License-Identifier: Apache-2.0
#include "queue_pair.h"

#include <cstring>
#include <random>

namespace afmesh::ibverbs {
namespace {

// RC timing. timeout 18 is 4.096 us * 2^18 ~ 1 s per retry (NCCL uses 18-20:
// shorter ones misfire on congested fabrics); 7 retries. The side channel
// reports a dead peer long before that. rnr_retry 7 means "retry forever":
// a receiver that has not reposted yet is slow, not dead. min_rnr_timer 12
// is 0.64 ms, NCCL's value.
constexpr uint8_t kTimeout = 18, kRetryCount = 7, kRnrRetry = 7, kMinRnrTimer = 12;

bool modify(const VerbsApi &api, ibv_qp *qp, ibv_qp_attr &attr, int mask, const char *what, std::string *why) {
    const int rc = api.modify_qp(qp, &attr, mask);
    if (rc == 0) return true;
    *why = std::string("ibv_modify_qp to ") + what + ": " + strerror(rc);
    return false;
}

}  // namespace

ibv_qp *create_rc_qp(const VerbsApi &api, ibv_pd *pd, ibv_cq *cq, const QpSizes &sizes, uint8_t port,
                     std::string *why) {
    ibv_qp_init_attr init{};
    init.send_cq = cq;
    init.recv_cq = cq;
    init.qp_type = IBV_QPT_RC;
    init.cap.max_send_wr = sizes.send_depth;
    init.cap.max_recv_wr = sizes.recv_depth;
    init.cap.max_send_sge = 1;
    init.cap.max_recv_sge = 1;
    init.cap.max_inline_data = sizes.max_inline;
    init.sq_sig_all = 0;  // selective signalling
    ibv_qp *qp = api.create_qp(pd, &init);
    if (!qp) {
        *why = std::string("ibv_create_qp: ") + strerror(errno);
        return nullptr;
    }
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_INIT;
    attr.pkey_index = 0;
    attr.port_num = port;
    attr.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
    if (!modify(api, qp, attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, "INIT", why)) {
        api.destroy_qp(qp);
        return nullptr;
    }
    return qp;
}

bool connect_rc_qp(const VerbsApi &api, ibv_qp *qp, const PortChoice &local, uint32_t local_psn, const QpInfo &remote,
                   std::string *why) {
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_RTR;
    attr.path_mtu = static_cast<ibv_mtu>(std::min<int>(local.mtu, remote.mtu));
    attr.dest_qp_num = remote.qpn;
    attr.rq_psn = remote.psn;
    attr.max_dest_rd_atomic = 1;
    attr.min_rnr_timer = kMinRnrTimer;
    attr.ah_attr.port_num = local.port;
    attr.ah_attr.sl = 0;
    if (local.roce) {
        // RoCE is always routed by GID (the GRH); the LID is meaningless.
        attr.ah_attr.is_global = 1;
        attr.ah_attr.grh.dgid = remote.gid;
        attr.ah_attr.grh.sgid_index = local.gid_index;
        attr.ah_attr.grh.hop_limit = 255;
    } else {
        attr.ah_attr.dlid = remote.lid;
    }
    if (!modify(api, qp, attr,
                IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                    IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER,
                "RTR", why))
        return false;
    attr = ibv_qp_attr{};
    attr.qp_state = IBV_QPS_RTS;
    attr.timeout = kTimeout;
    attr.retry_cnt = kRetryCount;
    attr.rnr_retry = kRnrRetry;
    attr.sq_psn = local_psn;
    attr.max_rd_atomic = 1;
    return modify(api, qp, attr,
                  IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                      IBV_QP_MAX_QP_RD_ATOMIC,
                  "RTS", why);
}

void fail_qp(const VerbsApi &api, ibv_qp *qp) {
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_ERR;
    api.modify_qp(qp, &attr, IBV_QP_STATE);
}

QpInfo local_qp_info(const PortChoice &local, const ibv_qp *qp, uint32_t psn) {
    QpInfo info;
    info.link = local.roce ? kLinkEthernet : kLinkInfiniBand;
    info.mtu = static_cast<uint8_t>(local.mtu);
    info.qpn = qp->qp_num;
    info.psn = psn;
    info.lid = local.lid;
    info.gid = local.gid;
    return info;
}

uint32_t random_psn() {
    thread_local std::mt19937 engine{std::random_device{}()};
    return engine() & 0xffffff;
}

}  // namespace afmesh::ibverbs
