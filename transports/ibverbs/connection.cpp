// SPDX-License-Identifier: Apache-2.0
#include "connection.h"

#include <arpa/inet.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cinttypes>
#include <cstring>

#include "limits.h"
#include "net_host.h"
#include "queue_pair.h"
#include "side_channel.h"

namespace afmesh::ibverbs {

Connection::Connection(const Fabric &fabric, int fd, State state, std::string peer)
    : fabric_(fabric), fd_(fd), peer_(std::move(peer)), ring_(kRecvDepth, kMaxSendSize), state_(state) {}

Connection::~Connection() { shut(); }

Connection::State Connection::state() {
    MutexLock lock(&tx_mu_);
    return state_;
}

void Connection::set_state(State state) {
    MutexLock lock(&tx_mu_);
    state_ = state;
}

bool Connection::create_qp(std::string *why) {
    if (!ring_.register_with(*fabric_.api, fabric_.pd, why)) return false;
    qp_ = create_rc_qp(*fabric_.api, fabric_.pd, fabric_.cq, QpSizes{kSendDepth, kRecvDepth, kMaxInline},
                       fabric_.port.port, why);
    if (!qp_) return false;
    psn_ = random_psn();
    for (uint32_t slot = 0; slot < kRecvDepth; ++slot)
        if (!repost(slot, why)) return false;
    return true;
}

bool Connection::repost(uint32_t slot, std::string *why) {
    ibv_sge sge{reinterpret_cast<uintptr_t>(ring_.slot(slot)), ring_.slot_size(), ring_.lkey()};
    ibv_recv_wr wr{};
    wr.wr_id = kRecvTag | slot;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr *bad = nullptr;
    const int rc = fabric_.api->post_recv(qp_, &wr, &bad);
    if (rc == 0) {
        fabric_.counters.add(kRecvRequests);
        return true;
    }
    *why = std::string("ibv_post_recv: ") + strerror(rc);
    return false;
}

bool Connection::send_request(std::string *why) {
    uint8_t message[kHandshakeSize];
    encode_handshake(HandshakeType::kRequest, local_qp_info(fabric_.port, qp_, psn_), message);
    return send_message(fd_, message, sizeof message, why);
}

bool Connection::on_reply(const QpInfo &remote, std::string *why) {
    if (!connect_rc_qp(*fabric_.api, qp_, fabric_.port, psn_, remote, why)) return false;
    uint8_t message[kHandshakeSize];
    encode_handshake(HandshakeType::kReady, local_qp_info(fabric_.port, qp_, psn_), message);
    return send_message(fd_, message, sizeof message, why);
}

bool Connection::on_request(const QpInfo &remote, std::string *why) {
    if (!create_qp(why) || !connect_rc_qp(*fabric_.api, qp_, fabric_.port, psn_, remote, why)) return false;
    uint8_t message[kHandshakeSize];
    encode_handshake(HandshakeType::kReply, local_qp_info(fabric_.port, qp_, psn_), message);
    return send_message(fd_, message, sizeof message, why);
}

int Connection::read_handshake(std::string *why) {
    const int rc = read_some(fd_, inbox_, sizeof inbox_, &inbox_filled_, why);
    if (rc == 1) inbox_filled_ = 0;  // the caller decodes inbox() before the next read
    return rc;
}

int Connection::check_postable_locked(const char *what, uint32_t count) {
    if (state_ == State::kFailed)
        return host_error(AFMESH_HAL_PEER_FAILED, "%s: the connection to %s has failed: %s", what, peer_.c_str(),
                          failure_reason_.c_str());
    if (state_ != State::kEstablished) return AFMESH_HAL_AGAIN;  // EV_CONNECTED not reported yet
    if (outstanding_ + count > kSendDepth) return AFMESH_HAL_AGAIN;
    return AFMESH_HAL_OK;
}

// Posts the chain of `count` requests from `chain`; a signal, asked for or
// forced, goes on its last request and covers the whole chain.
int Connection::post_locked(ibv_send_wr *chain, uint32_t count, bool signal, int slot, uint32_t event,
                            uint64_t cookie) {
    signal = signal || unsignalled_ + count >= kSignalInterval;
    ibv_send_wr *last = chain;
    for (ibv_send_wr *wr = chain; wr; wr = wr->next) {
        wr->wr_id = next_seq_++;
        last = wr;
    }
    if (signal) last->send_flags |= IBV_SEND_SIGNALED;
    ibv_send_wr *bad = nullptr;
    fabric_.counters.add(kPostSendCalls);
    if (const int rc = fabric_.api->post_send(qp_, chain, &bad); rc != 0)
        return refused_locked(chain, bad, count, slot, rc);
    fabric_.counters.add(kSendRequests, count);
    outstanding_ += count;
    if (!signal) {
        unsignalled_ += count;
        return AFMESH_HAL_OK;
    }
    signals_.push_back(Signal{last->wr_id, unsignalled_ + count, slot, event, cookie});
    unsignalled_ = 0;
    return AFMESH_HAL_OK;
}

// ibv_post_send refused the chain at `bad`: the requests before it were
// posted, and take send-queue slots until a later signal retires them.
// None of them carries the immediate (the last request does), so the
// caller gets the error and the peer no EV_IMM.
int Connection::refused_locked(ibv_send_wr *chain, const ibv_send_wr *bad, uint32_t count, int slot, int error) {
    uint32_t posted = 0;
    if (bad)
        for (const ibv_send_wr *wr = chain; wr && wr != bad; wr = wr->next) ++posted;
    outstanding_ += posted;
    unsignalled_ += posted;
    if (slot >= 0) fabric_.pool->give_back(static_cast<uint32_t>(slot));
    if (posted == 0) return host_error(AFMESH_HAL_ERROR, "ibv_post_send to %s: %s", peer_.c_str(), strerror(error));
    return host_error(AFMESH_HAL_ERROR,
                      "ibv_post_send to %s: %s after taking %" PRIu32 " of the chain's %" PRIu32
                      " work requests (plain writes: the one with the immediate was not posted)",
                      peer_.c_str(), strerror(error), posted, count);
}

int Connection::write_imm(const WriteSegment *segs, uint32_t count, uint32_t imm, uint32_t flags, uint64_t cookie,
                          const char *what) {
    ibv_sge sges[kMaxWriteSegs];
    ibv_send_wr chain[kMaxWriteSegs];
    for (uint32_t i = 0; i < count; ++i) {
        const WriteSegment &seg = segs[i];
        sges[i] = ibv_sge{reinterpret_cast<uintptr_t>(seg.src), seg.bytes, seg.lkey};
        ibv_send_wr &wr = chain[i];
        wr = ibv_send_wr{};
        wr.next = i + 1 < count ? &chain[i + 1] : nullptr;
        wr.opcode = IBV_WR_RDMA_WRITE;
        wr.sg_list = &sges[i];
        wr.num_sge = seg.bytes > 0 ? 1 : 0;
        if (seg.bytes > 0 && seg.bytes <= kMaxInline) wr.send_flags = IBV_SEND_INLINE;
        wr.wr.rdma.remote_addr = seg.remote_addr;
        wr.wr.rdma.rkey = seg.rkey;
    }
    ibv_send_wr &last = chain[count - 1];
    last.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    last.imm_data = htonl(imm);  // network order on the wire; the receiver's ntohl gives it back
    MutexLock lock(&tx_mu_);
    if (const int rc = check_postable_locked(what, count); rc != AFMESH_HAL_OK) return rc;
    return post_locked(chain, count, flags & AFMESH_NET_SIGNAL, -1,
                       (flags & AFMESH_NET_SIGNAL) ? AFMESH_NET_EV_WRITE_DONE : 0, cookie);
}

int Connection::send(const void *buf, size_t len, uint32_t flags, uint64_t cookie) {
    MutexLock lock(&tx_mu_);
    if (const int rc = check_postable_locked("send", 1); rc != AFMESH_HAL_OK) return rc;
    ibv_sge sge{reinterpret_cast<uintptr_t>(buf), static_cast<uint32_t>(len), 0};
    ibv_send_wr wr{};
    wr.opcode = IBV_WR_SEND;
    wr.sg_list = &sge;
    wr.num_sge = len > 0 ? 1 : 0;
    int slot = -1;
    if (len > kMaxInline) {  // copied into a bounce buffer, which a forced signal returns
        slot = fabric_.pool->take();
        if (slot < 0) return AFMESH_HAL_AGAIN;
        memcpy(fabric_.pool->slot(static_cast<uint32_t>(slot)), buf, len);
        sge.addr = reinterpret_cast<uintptr_t>(fabric_.pool->slot(static_cast<uint32_t>(slot)));
        sge.lkey = fabric_.pool->lkey();
    } else if (len > 0) {
        wr.send_flags = IBV_SEND_INLINE;
    }
    return post_locked(&wr, 1, (flags & AFMESH_NET_SIGNAL) || slot >= 0, slot,
                       (flags & AFMESH_NET_SIGNAL) ? AFMESH_NET_EV_SEND_DONE : 0, cookie);
}

void Connection::on_send_completion(const ibv_wc &wc, EventSink &sink, std::string *why, bool *ok) {
    MutexLock lock(&tx_mu_);
    if (signals_.empty() || signals_.front().seq != wc.wr_id) {
        *ok = false;
        *why = "a send completion (wr_id " + std::to_string(wc.wr_id) + ") matches no signalled request";
        return;
    }
    const Signal signal = signals_.front();
    signals_.pop_front();
    outstanding_ -= signal.covered;
    if (signal.slot >= 0) fabric_.pool->give_back(static_cast<uint32_t>(signal.slot));
    *ok = true;
    if (signal.event == 0) return;
    afmesh_net_event &event = sink.add(static_cast<afmesh_net_event_type>(signal.event), handle());
    event.cookie = signal.cookie;
}

bool Connection::fail(int status, const std::string &reason) {
    {
        MutexLock lock(&tx_mu_);
        if (state_ == State::kFailed) return false;
        state_ = State::kFailed;
        failure_status_ = status;
        failure_reason_ = reason;
    }
    if (qp_) fail_qp(*fabric_.api, qp_);
    if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);  // the peer learns at once
    return true;
}

void Connection::shut() {
    {
        MutexLock lock(&tx_mu_);
        for (const Signal &signal : signals_)
            if (signal.slot >= 0) fabric_.pool->give_back(static_cast<uint32_t>(signal.slot));
        signals_.clear();
        if (state_ != State::kFailed) {
            state_ = State::kFailed;
            failure_status_ = AFMESH_HAL_PEER_FAILED;
            failure_reason_ = "closed";
        }
    }
    if (qp_) {
        // Destroying the QP also removes its completions from the shared CQ.
        if (const int rc = fabric_.api->destroy_qp(qp_); rc != 0)
            host_log(AFMESH_LOG_WARN, "ibv_destroy_qp(%" PRIu32 "): %s", qp_->qp_num, strerror(rc));
        qp_ = nullptr;
    }
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
}

}  // namespace afmesh::ibverbs
