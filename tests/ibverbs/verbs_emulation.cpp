// SPDX-License-Identifier: Apache-2.0
// An RC fabric emulated in process, behind the libibverbs entry points the
// ibverbs module resolves. Every QP of every context in the process is on
// one fabric; a work request is executed when posted (or, when the target
// has no receive posted, when it posts one: RNR with infinite retry).
// What real hardware checks, this checks: QP state transitions and their
// required attributes, addressing (GID or LID, QP number, PSN), memory keys,
// bounds and access flags, send-queue, receive-queue and CQ capacities,
// inline sizes. Failures complete as hardware completes them: the error
// status on the requester, the QP in ERROR, everything outstanding flushed,
// opcodes of error completions left undefined. Requests are SEND,
// RDMA_WRITE (placed without a receive) and RDMA_WRITE_WITH_IMM; a chain
// is taken request by request, so one refused leaves those before it
// posted. Tests can read back the latest chain and have one refused.
#include "verbs_emulation.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#undef ibv_get_device_list
#undef ibv_query_port
#undef ibv_reg_mr

namespace {

constexpr uint32_t kMaxInlineData = 512;
constexpr int kMaxQpWr = 16384, kMaxCqe = 4194303;
constexpr uint8_t kInfiniteRnrRetry = 7;
constexpr int kUndefinedOpcode = 0xff;  // what an error completion's opcode holds, as far as callers may rely on

struct Port {
    ibv_port_attr attr{};
    std::vector<std::pair<ibv_gid, uint32_t>> gids;
};

struct Device {
    ibv_device device{};  // first: handed out as ibv_device*
    std::vector<Port> ports;
};

struct Context {
    ibv_context context{};  // first
    Device *device = nullptr;
    std::deque<ibv_async_event> async;
};

struct Channel {
    ibv_comp_channel channel{};
    std::deque<ibv_cq *> events;
};

struct CqEntry {
    ibv_wc wc;
    uint32_t retire;  // send-queue slots this completion frees when polled
};

struct Cq {
    ibv_cq cq{};
    Channel *channel = nullptr;
    std::deque<CqEntry> entries;
    bool armed = false;
    unsigned unacked = 0;
};

struct Mr {
    ibv_mr mr{};
    int access = 0;
};

struct SendRequest {
    ibv_send_wr wr{};
    ibv_sge sge{};
    std::vector<uint8_t> inline_data;
};

struct Qp {
    ibv_qp qp{};
    ibv_qp_cap cap{};
    uint8_t port = 0;
    int access = 0;
    ibv_qp_attr remote{};  // RTR/RTS attributes
    uint32_t send_psn = 0, expect_psn = 0;
    std::deque<SendRequest> pending;  // posted, not yet executed (RNR-blocked)
    std::deque<ibv_recv_wr> receives;
    std::deque<ibv_sge> receive_sges;
    uint32_t sq_used = 0, unretired = 0;
    bool broken = false;
};

struct Fabric {
    std::mutex mu;
    std::vector<std::unique_ptr<Device>> owned;  // never freed: contexts may still point at them
    std::vector<Device *> devices;
    int fail_errno = 0;
    std::map<uint32_t, Qp *> qps;
    std::map<uint32_t, Mr *> keys;
    uint32_t next_qpn = 0x100, next_key = 0x1000;
    uint64_t overflows = 0;
    uint64_t post_send_calls = 0;
    std::vector<afmesh_verbs_emu_posted> last_chain;  // of the latest ibv_post_send
    int refuse_at = -1, refuse_errno = 0;            // afmesh_verbs_emu_refuse_post_send, for the next call
};

Fabric &fabric() {
    static Fabric f;
    return f;
}

ibv_gid parse_gid(const char *text) {
    ibv_gid gid{};
    inet_pton(AF_INET6, text, gid.raw);
    return gid;
}

void signal_fd(int fd) {
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t n = write(fd, &one, sizeof one);
}

bool take_fd(int fd) {
    uint64_t value;
    return read(fd, &value, sizeof value) == sizeof value;
}

void post_async(ibv_context *context, ibv_event_type type, ibv_qp *qp, ibv_cq *cq) {
    auto *c = reinterpret_cast<Context *>(context);
    ibv_async_event event{};
    event.event_type = type;
    if (qp) event.element.qp = qp;
    if (cq) event.element.cq = cq;
    c->async.push_back(event);
    signal_fd(context->async_fd);
}

void push_cqe(ibv_cq *cq, const ibv_wc &wc, uint32_t retire) {
    Cq *q = reinterpret_cast<Cq *>(cq);
    if (q->entries.size() >= static_cast<size_t>(cq->cqe)) {
        ++fabric().overflows;
        post_async(cq->context, IBV_EVENT_CQ_ERR, nullptr, cq);
        return;
    }
    q->entries.push_back({wc, retire});
    if (q->armed && q->channel) {
        q->armed = false;
        q->channel->events.push_back(cq);
        signal_fd(q->channel->channel.fd);
    }
}

void complete_send(Qp *qp, const SendRequest &r, ibv_wc_status status) {
    if (status == IBV_WC_SUCCESS && !(r.wr.send_flags & IBV_SEND_SIGNALED)) {
        ++qp->unretired;
        return;
    }
    ibv_wc wc{};
    wc.wr_id = r.wr.wr_id;
    wc.status = status;
    wc.qp_num = qp->qp.qp_num;
    wc.opcode = status != IBV_WC_SUCCESS                       ? static_cast<ibv_wc_opcode>(kUndefinedOpcode)
                : r.wr.opcode == IBV_WR_SEND                    ? IBV_WC_SEND
                                                                : IBV_WC_RDMA_WRITE;
    push_cqe(qp->qp.send_cq, wc, qp->unretired + 1);
    qp->unretired = 0;
}

void flush_receives(Qp *qp) {
    for (const ibv_recv_wr &r : qp->receives) {
        ibv_wc wc{};
        wc.wr_id = r.wr_id;
        wc.status = IBV_WC_WR_FLUSH_ERR;
        wc.opcode = static_cast<ibv_wc_opcode>(kUndefinedOpcode);
        wc.qp_num = qp->qp.qp_num;
        push_cqe(qp->qp.recv_cq, wc, 0);
    }
    qp->receives.clear();
    qp->receive_sges.clear();
}

// ERROR: everything outstanding completes with a flush error.
void to_error(Qp *qp) {
    qp->qp.state = IBV_QPS_ERR;
    while (!qp->pending.empty()) {
        complete_send(qp, qp->pending.front(), IBV_WC_WR_FLUSH_ERR);
        qp->pending.pop_front();
    }
    flush_receives(qp);
}

void fail_request(Qp *qp, ibv_wc_status status) {
    complete_send(qp, qp->pending.front(), status);
    qp->pending.pop_front();
    to_error(qp);
}

Mr *find_key(uint32_t key) {
    const auto it = fabric().keys.find(key);
    return it == fabric().keys.end() ? nullptr : it->second;
}

bool covers(const Mr *mr, uint64_t addr, uint64_t length) {
    const auto start = reinterpret_cast<uintptr_t>(mr->mr.addr);
    return addr >= start && addr - start <= mr->mr.length && length <= mr->mr.length - (addr - start);
}

const Port &port_of(const Qp *qp) {
    return reinterpret_cast<Context *>(qp->qp.context)->device->ports[qp->port - 1];
}

// The QP `qp`'s address vector and destination QP number lead to, or null.
Qp *route(const Qp *qp) {
    const auto it = fabric().qps.find(qp->remote.dest_qp_num);
    if (it == fabric().qps.end() || it->second->broken) return nullptr;
    Qp *target = it->second;
    if (target->qp.state != IBV_QPS_RTR && target->qp.state != IBV_QPS_RTS) return nullptr;
    if (target->remote.dest_qp_num != qp->qp.qp_num) return nullptr;  // RC: only its own peer
    const Port &port = port_of(target);
    if (qp->remote.ah_attr.is_global) {
        const ibv_gid &dgid = qp->remote.ah_attr.grh.dgid;
        if (std::none_of(port.gids.begin(), port.gids.end(),
                         [&](const auto &g) { return memcmp(g.first.raw, dgid.raw, 16) == 0; }))
            return nullptr;
    } else if (port.attr.lid != qp->remote.ah_attr.dlid) {
        return nullptr;
    }
    return target;
}

enum class Outcome { kDone, kRnr };

// The oldest pending request of `qp` has been carried out at `target`.
void retire_request(Qp *qp, Qp *target) {
    target->expect_psn = (target->expect_psn + 1) & 0xffffff;
    qp->send_psn = (qp->send_psn + 1) & 0xffffff;
    complete_send(qp, qp->pending.front(), IBV_WC_SUCCESS);
    qp->pending.pop_front();
}

// Executes the oldest pending request of `qp`.
Outcome execute(Qp *qp) {
    SendRequest &r = qp->pending.front();
    Qp *target = route(qp);
    if (!target || target->expect_psn != qp->send_psn) {  // nobody answers: the requester retries, then gives up
        fail_request(qp, IBV_WC_RETRY_EXC_ERR);
        return Outcome::kDone;
    }
    const uint32_t length = r.wr.num_sge ? r.sge.length : 0;
    const uint8_t *source = nullptr;
    if (length > 0 && (r.wr.send_flags & IBV_SEND_INLINE)) {
        source = r.inline_data.data();
    } else if (length > 0) {
        const Mr *local = find_key(r.sge.lkey);
        if (!local || local->mr.pd != qp->qp.pd || !covers(local, r.sge.addr, length)) {
            fail_request(qp, IBV_WC_LOC_PROT_ERR);
            return Outcome::kDone;
        }
        source = reinterpret_cast<const uint8_t *>(r.sge.addr);
    }
    uint8_t *destination = nullptr;
    if (r.wr.opcode != IBV_WR_SEND) {  // an RDMA write, with or without an immediate
        const Mr *remote = find_key(r.wr.wr.rdma.rkey);
        if (!remote || remote->mr.pd != target->qp.pd || !(remote->access & IBV_ACCESS_REMOTE_WRITE) ||
            !(target->access & IBV_ACCESS_REMOTE_WRITE) || !covers(remote, r.wr.wr.rdma.remote_addr, length)) {
            fail_request(qp, IBV_WC_REM_ACCESS_ERR);
            to_error(target);
            post_async(target->qp.context, IBV_EVENT_QP_ACCESS_ERR, &target->qp, nullptr);
            return Outcome::kDone;
        }
        destination = reinterpret_cast<uint8_t *>(r.wr.wr.rdma.remote_addr);
    }
    if (r.wr.opcode == IBV_WR_RDMA_WRITE) {  // placed without a receive; only the requester sees a completion
        if (length > 0) memcpy(destination, source, length);
        retire_request(qp, target);
        return Outcome::kDone;
    }
    if (target->receives.empty()) {
        if (qp->remote.rnr_retry == kInfiniteRnrRetry) return Outcome::kRnr;
        fail_request(qp, IBV_WC_RNR_RETRY_EXC_ERR);
        return Outcome::kDone;
    }
    const ibv_recv_wr receive = target->receives.front();
    const ibv_sge receive_sge = target->receive_sges.front();
    ibv_wc wc{};
    wc.wr_id = receive.wr_id;
    wc.qp_num = target->qp.qp_num;
    wc.byte_len = length;
    if (r.wr.opcode == IBV_WR_SEND) {
        const Mr *ring = receive.num_sge ? find_key(receive_sge.lkey) : nullptr;
        if (length > (receive.num_sge ? receive_sge.length : 0) || (length > 0 && (!ring || !covers(ring, receive_sge.addr, length) ||
                                                                                 !(ring->access & IBV_ACCESS_LOCAL_WRITE)))) {
            fail_request(qp, IBV_WC_REM_INV_REQ_ERR);
            to_error(target);
            return Outcome::kDone;
        }
        destination = reinterpret_cast<uint8_t *>(receive_sge.addr);
        wc.opcode = IBV_WC_RECV;
    } else {
        wc.opcode = IBV_WC_RECV_RDMA_WITH_IMM;
        wc.wc_flags = IBV_WC_WITH_IMM;
        wc.imm_data = r.wr.imm_data;
    }
    if (length > 0) memcpy(destination, source, length);
    target->receives.pop_front();
    target->receive_sges.pop_front();
    push_cqe(target->qp.recv_cq, wc, 0);
    retire_request(qp, target);
    return Outcome::kDone;
}

void progress(Qp *qp) {
    while (!qp->pending.empty() && qp->qp.state == IBV_QPS_RTS)
        if (execute(qp) == Outcome::kRnr) return;
}

void record_chain(uint32_t qpn, const ibv_send_wr *wr) {
    Fabric &f = fabric();
    ++f.post_send_calls;
    f.last_chain.clear();
    for (; wr; wr = wr->next) {
        afmesh_verbs_emu_posted posted{};
        posted.qpn = qpn;
        posted.opcode = wr->opcode;
        posted.send_flags = wr->send_flags;
        posted.num_sge = wr->num_sge;
        if (wr->num_sge > 0) {
            posted.sge_addr = wr->sg_list[0].addr;
            posted.sge_length = wr->sg_list[0].length;
            posted.sge_lkey = wr->sg_list[0].lkey;
        }
        posted.remote_addr = wr->wr.rdma.remote_addr;
        posted.rkey = wr->wr.rdma.rkey;
        posted.imm_data = wr->imm_data;
        f.last_chain.push_back(posted);
    }
}

// Takes the chain from `wr` request by request, as hardware does: a refused
// request stops it there (`*bad`), and the ones before it stay posted.
int queue_requests(Qp *qp, ibv_send_wr *wr, ibv_send_wr **bad) {
    Fabric &f = fabric();
    const int refuse_at = std::exchange(f.refuse_at, -1);
    ibv_qp *ibqp = &qp->qp;
    for (int index = 0; wr; wr = wr->next, ++index) {
        *bad = wr;
        if (index == refuse_at) return f.refuse_errno;
        if (ibqp->state != IBV_QPS_RTS && ibqp->state != IBV_QPS_ERR) return EINVAL;
        if (qp->sq_used >= qp->cap.max_send_wr) return ENOMEM;  // slots retire when a later signal is polled
        if (wr->num_sge > 1 || (wr->opcode != IBV_WR_SEND && wr->opcode != IBV_WR_RDMA_WRITE &&
                                wr->opcode != IBV_WR_RDMA_WRITE_WITH_IMM))
            return EINVAL;
        SendRequest r;
        r.wr = *wr;
        r.wr.next = nullptr;
        if (wr->num_sge) r.sge = wr->sg_list[0];
        r.wr.sg_list = nullptr;
        if ((wr->send_flags & IBV_SEND_INLINE) && wr->num_sge) {
            if (r.sge.length > qp->cap.max_inline_data) return EINVAL;
            const auto *bytes = reinterpret_cast<const uint8_t *>(r.sge.addr);
            r.inline_data.assign(bytes, bytes + r.sge.length);  // the caller may reuse its buffer on return
        }
        ++qp->sq_used;
        qp->pending.push_back(std::move(r));
        if (ibqp->state == IBV_QPS_ERR) to_error(qp);
    }
    *bad = nullptr;
    return 0;
}

int emu_post_send(ibv_qp *ibqp, ibv_send_wr *wr, ibv_send_wr **bad) {
    std::lock_guard lock(fabric().mu);
    Qp *qp = reinterpret_cast<Qp *>(ibqp);
    record_chain(ibqp->qp_num, wr);
    const int rc = queue_requests(qp, wr, bad);
    progress(qp);  // what was posted runs, whether or not a later request was refused
    return rc;
}

int emu_post_recv(ibv_qp *ibqp, ibv_recv_wr *wr, ibv_recv_wr **bad) {
    std::lock_guard lock(fabric().mu);
    Qp *qp = reinterpret_cast<Qp *>(ibqp);
    for (; wr; wr = wr->next) {
        *bad = wr;
        if (ibqp->state == IBV_QPS_RESET) return EINVAL;
        if (qp->receives.size() >= qp->cap.max_recv_wr || wr->num_sge > 1) return ENOMEM;
        ibv_recv_wr copy = *wr;
        copy.next = nullptr;
        qp->receives.push_back(copy);
        qp->receive_sges.push_back(wr->num_sge ? wr->sg_list[0] : ibv_sge{});
        if (ibqp->state == IBV_QPS_ERR) flush_receives(qp);
    }
    *bad = nullptr;
    for (auto &[qpn, sender] : fabric().qps)  // senders held back by RNR may go on
        if (!sender->pending.empty() && sender->remote.dest_qp_num == ibqp->qp_num) progress(sender);
    return 0;
}

int emu_poll_cq(ibv_cq *cq, int n, ibv_wc *wc) {
    std::lock_guard lock(fabric().mu);
    Cq *q = reinterpret_cast<Cq *>(cq);
    int count = 0;
    for (; count < n && !q->entries.empty(); ++count) {
        const CqEntry entry = q->entries.front();
        q->entries.pop_front();
        wc[count] = entry.wc;
        if (entry.retire) fabric().qps.at(entry.wc.qp_num)->sq_used -= entry.retire;
    }
    return count;
}

int emu_req_notify_cq(ibv_cq *cq, int) {
    std::lock_guard lock(fabric().mu);
    reinterpret_cast<Cq *>(cq)->armed = true;
    return 0;
}

void add_default_topology() {
    Fabric &f = fabric();
    f.devices.clear();
    afmesh_verbs_emu_add_device("emu_roce0");
    afmesh_verbs_emu_add_port(0, IBV_LINK_LAYER_ETHERNET, IBV_PORT_ACTIVE, 0, IBV_MTU_4096);
    afmesh_verbs_emu_add_gid(0, 1, "fe80::1", IBV_GID_TYPE_ROCE_V1);
    afmesh_verbs_emu_add_gid(0, 1, "fe80::1", IBV_GID_TYPE_ROCE_V2);
    afmesh_verbs_emu_add_gid(0, 1, "::ffff:127.0.0.1", IBV_GID_TYPE_ROCE_V1);
    afmesh_verbs_emu_add_gid(0, 1, "::ffff:127.0.0.1", IBV_GID_TYPE_ROCE_V2);
}

struct DefaultTopology {
    DefaultTopology() { add_default_topology(); }
} g_default_topology;

bool has(int mask, int required) { return (mask & required) == required; }

}  // namespace

extern "C" {

// --- control -----------------------------------------------------------------

void afmesh_verbs_emu_reset(void) {
    std::lock_guard lock(fabric().mu);
    fabric().fail_errno = 0;
    fabric().refuse_at = -1;
    add_default_topology();
}

void afmesh_verbs_emu_clear(void) {
    std::lock_guard lock(fabric().mu);
    fabric().devices.clear();
}

int afmesh_verbs_emu_add_device(const char *name) {
    Fabric &f = fabric();
    auto device = std::make_unique<Device>();
    snprintf(device->device.name, sizeof device->device.name, "%s", name);
    snprintf(device->device.dev_name, sizeof device->device.dev_name, "uverbs%zu", f.owned.size());
    device->device.node_type = IBV_NODE_CA;
    device->device.transport_type = IBV_TRANSPORT_IB;
    f.devices.push_back(device.get());
    f.owned.push_back(std::move(device));
    return static_cast<int>(f.devices.size()) - 1;
}

int afmesh_verbs_emu_add_port(int device, int link_layer, int state, uint16_t lid, int mtu) {
    Port port;
    port.attr.state = static_cast<ibv_port_state>(state);
    port.attr.link_layer = static_cast<uint8_t>(link_layer);
    port.attr.lid = lid;
    port.attr.max_mtu = IBV_MTU_4096;
    port.attr.active_mtu = static_cast<ibv_mtu>(mtu);
    port.attr.max_msg_sz = 1u << 30;
    std::vector<Port> &ports = fabric().devices.at(static_cast<size_t>(device))->ports;
    ports.push_back(port);
    return static_cast<int>(ports.size());
}

void afmesh_verbs_emu_add_gid(int device, int port, const char *gid, int type) {
    Port &p = fabric().devices.at(static_cast<size_t>(device))->ports.at(static_cast<size_t>(port - 1));
    p.gids.emplace_back(parse_gid(gid), static_cast<uint32_t>(type));
    p.attr.gid_tbl_len = static_cast<int>(p.gids.size());
}

void afmesh_verbs_emu_fail_device_list(int error) {
    std::lock_guard lock(fabric().mu);
    fabric().fail_errno = error;
}

void afmesh_verbs_emu_break_qp(uint32_t qpn) {
    std::lock_guard lock(fabric().mu);
    const auto it = fabric().qps.find(qpn);
    if (it != fabric().qps.end()) it->second->broken = true;
}

uint32_t afmesh_verbs_emu_last_qpn(void) {
    std::lock_guard lock(fabric().mu);
    return (fabric().next_qpn - 1) & 0xffffff;
}

uint64_t afmesh_verbs_emu_cq_overflows(void) {
    std::lock_guard lock(fabric().mu);
    return fabric().overflows;
}

uint64_t afmesh_verbs_emu_post_send_calls(void) {
    std::lock_guard lock(fabric().mu);
    return fabric().post_send_calls;
}

size_t afmesh_verbs_emu_last_chain(afmesh_verbs_emu_posted *out, size_t max) {
    std::lock_guard lock(fabric().mu);
    const std::vector<afmesh_verbs_emu_posted> &chain = fabric().last_chain;
    std::copy_n(chain.begin(), std::min(max, chain.size()), out);
    return chain.size();
}

void afmesh_verbs_emu_refuse_post_send(uint32_t index, int error) {
    std::lock_guard lock(fabric().mu);
    fabric().refuse_at = static_cast<int>(index);
    fabric().refuse_errno = error;
}

// --- devices -----------------------------------------------------------------

ibv_device **ibv_get_device_list(int *num) {
    std::lock_guard lock(fabric().mu);
    if (fabric().fail_errno) {
        errno = fabric().fail_errno;
        return nullptr;
    }
    const auto &devices = fabric().devices;
    auto **list = new ibv_device *[devices.size() + 1];
    for (size_t i = 0; i < devices.size(); ++i) list[i] = &devices[i]->device;
    list[devices.size()] = nullptr;
    if (num) *num = static_cast<int>(devices.size());
    return list;
}

void ibv_free_device_list(ibv_device **list) { delete[] list; }

const char *ibv_get_device_name(ibv_device *device) { return device->name; }

ibv_context *ibv_open_device(ibv_device *device) {
    auto *c = new Context();
    c->device = reinterpret_cast<Device *>(device);
    c->context.device = device;
    c->context.async_fd = eventfd(0, EFD_SEMAPHORE | EFD_CLOEXEC);
    c->context.ops.post_send = emu_post_send;
    c->context.ops.post_recv = emu_post_recv;
    c->context.ops.poll_cq = emu_poll_cq;
    c->context.ops.req_notify_cq = emu_req_notify_cq;
    return &c->context;
}

int ibv_close_device(ibv_context *context) {
    ::close(context->async_fd);
    delete reinterpret_cast<Context *>(context);
    return 0;
}

int ibv_query_device(ibv_context *context, ibv_device_attr *attr) {
    *attr = ibv_device_attr{};
    attr->phys_port_cnt = static_cast<uint8_t>(reinterpret_cast<Context *>(context)->device->ports.size());
    attr->max_qp_wr = kMaxQpWr;
    attr->max_cqe = kMaxCqe;
    attr->max_qp = 1 << 16;
    attr->max_sge = 30;
    return 0;
}

int ibv_query_port(ibv_context *context, uint8_t port, struct _compat_ibv_port_attr *attr) {
    const auto &ports = reinterpret_cast<Context *>(context)->device->ports;
    if (port < 1 || port > ports.size()) return EINVAL;
    *reinterpret_cast<ibv_port_attr *>(attr) = ports[port - 1].attr;
    return 0;
}

int ibv_query_gid(ibv_context *context, uint8_t port, int index, ibv_gid *gid) {
    const auto &ports = reinterpret_cast<Context *>(context)->device->ports;
    if (port < 1 || port > ports.size() || index < 0 || static_cast<size_t>(index) >= ports[port - 1].gids.size())
        return -1;
    *gid = ports[port - 1].gids[static_cast<size_t>(index)].first;
    return 0;
}

int _ibv_query_gid_ex(ibv_context *context, uint32_t port, uint32_t index, ibv_gid_entry *entry, uint32_t,
                      size_t entry_size) {
    ibv_gid gid{};
    if (entry_size < sizeof *entry || ibv_query_gid(context, static_cast<uint8_t>(port), static_cast<int>(index), &gid))
        return EINVAL;
    static constexpr uint8_t kZero[16] = {};
    if (memcmp(gid.raw, kZero, 16) == 0) return ENODATA;
    *entry = ibv_gid_entry{};
    entry->gid = gid;
    entry->gid_index = index;
    entry->port_num = port;
    entry->gid_type = reinterpret_cast<Context *>(context)->device->ports[port - 1].gids[index].second;
    return 0;
}

int ibv_get_async_event(ibv_context *context, ibv_async_event *event) {
    if (!take_fd(context->async_fd)) return -1;  // errno from read(): EAGAIN on a non-blocking fd
    std::lock_guard lock(fabric().mu);
    auto *c = reinterpret_cast<Context *>(context);
    if (c->async.empty()) {  // its QP was destroyed since
        errno = EAGAIN;
        return -1;
    }
    *event = c->async.front();
    c->async.pop_front();
    return 0;
}

void ibv_ack_async_event(ibv_async_event *) {}

// --- memory ------------------------------------------------------------------

ibv_pd *ibv_alloc_pd(ibv_context *context) {
    auto *pd = new ibv_pd{};
    pd->context = context;
    return pd;
}

int ibv_dealloc_pd(ibv_pd *pd) {
    std::lock_guard lock(fabric().mu);
    for (const auto &[key, mr] : fabric().keys)
        if (mr->mr.pd == pd) return EBUSY;
    for (const auto &[qpn, qp] : fabric().qps)
        if (qp->qp.pd == pd) return EBUSY;
    delete pd;
    return 0;
}

static ibv_mr *register_memory(ibv_pd *pd, void *addr, size_t length, int access) {
    if ((access & IBV_ACCESS_REMOTE_WRITE) && !(access & IBV_ACCESS_LOCAL_WRITE)) {
        errno = EINVAL;  // a verbs rule: remote write needs local write
        return nullptr;
    }
    std::lock_guard lock(fabric().mu);
    auto *mr = new Mr();
    mr->mr.context = pd->context;
    mr->mr.pd = pd;
    mr->mr.addr = addr;
    mr->mr.length = length;
    mr->mr.lkey = mr->mr.rkey = fabric().next_key++;
    mr->access = access;
    fabric().keys[mr->mr.lkey] = mr;
    return &mr->mr;
}

ibv_mr *ibv_reg_mr(ibv_pd *pd, void *addr, size_t length, int access) { return register_memory(pd, addr, length, access); }

ibv_mr *ibv_reg_dmabuf_mr(ibv_pd *pd, uint64_t, size_t length, uint64_t iova, int fd, int access) {
    if (fcntl(fd, F_GETFD) < 0) return nullptr;  // EBADF
    return register_memory(pd, reinterpret_cast<void *>(iova), length, access);
}

int ibv_dereg_mr(ibv_mr *mr) {
    std::lock_guard lock(fabric().mu);
    fabric().keys.erase(mr->lkey);
    delete reinterpret_cast<Mr *>(mr);
    return 0;
}

// --- completion queues ---------------------------------------------------------

ibv_comp_channel *ibv_create_comp_channel(ibv_context *context) {
    auto *channel = new Channel();
    channel->channel.context = context;
    channel->channel.fd = eventfd(0, EFD_SEMAPHORE | EFD_CLOEXEC);
    return &channel->channel;
}

int ibv_destroy_comp_channel(ibv_comp_channel *channel) {
    ::close(channel->fd);
    delete reinterpret_cast<Channel *>(channel);
    return 0;
}

ibv_cq *ibv_create_cq(ibv_context *context, int cqe, void *cq_context, ibv_comp_channel *channel, int) {
    if (cqe < 1 || cqe > kMaxCqe) {
        errno = EINVAL;
        return nullptr;
    }
    auto *cq = new Cq();
    cq->cq.context = context;
    cq->cq.cqe = cqe;
    cq->cq.cq_context = cq_context;
    cq->cq.channel = channel;
    cq->channel = reinterpret_cast<Channel *>(channel);
    return &cq->cq;
}

int ibv_resize_cq(ibv_cq *cq, int cqe) {
    std::lock_guard lock(fabric().mu);
    if (cqe < static_cast<int>(reinterpret_cast<Cq *>(cq)->entries.size()) || cqe > kMaxCqe) return EINVAL;
    cq->cqe = cqe;
    return 0;
}

int ibv_destroy_cq(ibv_cq *cq) {
    std::lock_guard lock(fabric().mu);
    if (reinterpret_cast<Cq *>(cq)->unacked) return EBUSY;  // libibverbs would wait forever
    for (const auto &[qpn, qp] : fabric().qps)
        if (qp->qp.send_cq == cq || qp->qp.recv_cq == cq) return EBUSY;
    delete reinterpret_cast<Cq *>(cq);
    return 0;
}

int ibv_get_cq_event(ibv_comp_channel *channel, ibv_cq **cq, void **cq_context) {
    if (!take_fd(channel->fd)) return -1;
    std::lock_guard lock(fabric().mu);
    Channel *c = reinterpret_cast<Channel *>(channel);
    *cq = c->events.front();
    c->events.pop_front();
    *cq_context = (*cq)->cq_context;
    ++reinterpret_cast<Cq *>(*cq)->unacked;
    return 0;
}

void ibv_ack_cq_events(ibv_cq *cq, unsigned int count) {
    std::lock_guard lock(fabric().mu);
    reinterpret_cast<Cq *>(cq)->unacked -= count;
}

// --- queue pairs -----------------------------------------------------------------

ibv_qp *ibv_create_qp(ibv_pd *pd, ibv_qp_init_attr *attr) {
    if (attr->qp_type != IBV_QPT_RC || !attr->send_cq || !attr->recv_cq || attr->srq ||
        attr->cap.max_send_wr > static_cast<uint32_t>(kMaxQpWr) || attr->cap.max_recv_wr > static_cast<uint32_t>(kMaxQpWr) ||
        attr->cap.max_inline_data > kMaxInlineData || attr->cap.max_send_sge > 30 || attr->cap.max_recv_sge > 30) {
        errno = EINVAL;
        return nullptr;
    }
    std::lock_guard lock(fabric().mu);
    auto *qp = new Qp();
    qp->qp.context = pd->context;
    qp->qp.pd = pd;
    qp->qp.send_cq = attr->send_cq;
    qp->qp.recv_cq = attr->recv_cq;
    qp->qp.qp_type = IBV_QPT_RC;
    qp->qp.state = IBV_QPS_RESET;
    qp->qp.qp_num = fabric().next_qpn++ & 0xffffff;
    qp->cap = attr->cap;
    fabric().qps[qp->qp.qp_num] = qp;
    return &qp->qp;
}

int ibv_modify_qp(ibv_qp *ibqp, ibv_qp_attr *attr, int mask) {
    std::lock_guard lock(fabric().mu);
    Qp *qp = reinterpret_cast<Qp *>(ibqp);
    if (!(mask & IBV_QP_STATE)) return EINVAL;
    const ibv_qp_state from = ibqp->state, to = attr->qp_state;
    const auto &ports = reinterpret_cast<Context *>(ibqp->context)->device->ports;
    if (to == IBV_QPS_ERR) {
        to_error(qp);
        return 0;
    }
    if (from == IBV_QPS_RESET && to == IBV_QPS_INIT) {
        if (!has(mask, IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) || attr->port_num < 1 ||
            attr->port_num > ports.size())
            return EINVAL;
        qp->port = attr->port_num;
        qp->access = static_cast<int>(attr->qp_access_flags);
    } else if (from == IBV_QPS_INIT && to == IBV_QPS_RTR) {
        if (!has(mask, IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
                           IBV_QP_MIN_RNR_TIMER))
            return EINVAL;
        const Port &port = ports[qp->port - 1];
        if (attr->path_mtu > port.attr.active_mtu || attr->ah_attr.port_num != qp->port) return EINVAL;
        if (port.attr.link_layer == IBV_LINK_LAYER_ETHERNET) {
            // RoCE: a GRH is mandatory and the source GID must exist.
            if (!attr->ah_attr.is_global || attr->ah_attr.grh.sgid_index >= port.gids.size()) return EINVAL;
        } else if (attr->ah_attr.dlid == 0) {
            return EINVAL;
        }
        qp->remote.ah_attr = attr->ah_attr;
        qp->remote.dest_qp_num = attr->dest_qp_num;
        qp->expect_psn = attr->rq_psn & 0xffffff;
    } else if (from == IBV_QPS_RTR && to == IBV_QPS_RTS) {
        if (!has(mask, IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
            return EINVAL;
        qp->remote.rnr_retry = attr->rnr_retry;
        qp->send_psn = attr->sq_psn & 0xffffff;
    } else {
        return EINVAL;
    }
    ibqp->state = to;
    return 0;
}

int ibv_destroy_qp(ibv_qp *ibqp) {
    std::lock_guard lock(fabric().mu);
    // Like mlx5, destroying a QP removes its completions from its CQs.
    for (ibv_cq *cq : {ibqp->send_cq, ibqp->recv_cq}) {
        auto &entries = reinterpret_cast<Cq *>(cq)->entries;
        entries.erase(std::remove_if(entries.begin(), entries.end(),
                                     [&](const CqEntry &e) { return e.wc.qp_num == ibqp->qp_num; }),
                      entries.end());
    }
    // libibverbs makes destroy wait for the QP's async events; dropping them keeps pointers valid the same way.
    auto &async = reinterpret_cast<Context *>(ibqp->context)->async;
    async.erase(std::remove_if(async.begin(), async.end(),
                               [&](const ibv_async_event &e) {
                                   return e.event_type == IBV_EVENT_QP_ACCESS_ERR && e.element.qp == ibqp;
                               }),
                async.end());
    fabric().qps.erase(ibqp->qp_num);
    delete reinterpret_cast<Qp *>(ibqp);
    return 0;
}

// --- strings -------------------------------------------------------------------

const char *ibv_wc_status_str(ibv_wc_status status) {
    switch (status) {
    case IBV_WC_SUCCESS: return "success";
    case IBV_WC_LOC_PROT_ERR: return "local protection error";
    case IBV_WC_WR_FLUSH_ERR: return "Work Request Flushed Error";
    case IBV_WC_REM_ACCESS_ERR: return "remote access error";
    case IBV_WC_REM_INV_REQ_ERR: return "remote invalid request error";
    case IBV_WC_RETRY_EXC_ERR: return "transport retry counter exceeded";
    case IBV_WC_RNR_RETRY_EXC_ERR: return "RNR retry counter exceeded";
    default: return "unknown";
    }
}

const char *ibv_event_type_str(ibv_event_type type) {
    switch (type) {
    case IBV_EVENT_QP_ACCESS_ERR: return "local access violation work queue error";
    case IBV_EVENT_CQ_ERR: return "CQ error";
    default: return "unknown";
    }
}

}  // extern "C"
