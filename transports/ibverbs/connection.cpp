#include "connection.h"

#include <arpa/inet.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cinttypes>
#include <cstring>

#include "host.h"
#include "limits.h"
#include "queue_pair.h"
#include "side_channel.h"

namespace afmesh::ibverbs {

Connection::Connection(const Fabric &fabric, int fd, State state, std::string peer)
    : fabric_(fabric), fd_(fd), peer_(std::move(peer)), ring_(kRecvDepth, kMaxSendSize), state_(state) {}

Connection::~Connection() { shut(); }

Connection::State Connection::state() {
    std::lock_guard lock(tx_mu_);
    return state_;
}

void Connection::set_state(State state) {
    std::lock_guard lock(tx_mu_);
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
    if (rc == 0) return true;
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

int Connection::check_postable_locked(const char *what) {
    if (state_ == State::kFailed)
        return host_error(AFMESH_HAL_PEER_FAILED, "%s: the connection to %s has failed: %s", what, peer_.c_str(),
                          failure_reason_.c_str());
    if (state_ != State::kEstablished) return AFMESH_HAL_AGAIN;  // EV_CONNECTED not reported yet
    if (outstanding_ >= kSendDepth) return AFMESH_HAL_AGAIN;
    return AFMESH_HAL_OK;
}

int Connection::post_locked(ibv_send_wr &wr, bool signal, int slot, uint32_t event, uint64_t cookie) {
    signal = signal || unsignalled_ + 1 >= kSignalInterval;
    const uint64_t seq = next_seq_++;
    wr.wr_id = seq;
    if (signal) wr.send_flags |= IBV_SEND_SIGNALED;
    ibv_send_wr *bad = nullptr;
    const int rc = fabric_.api->post_send(qp_, &wr, &bad);
    if (rc != 0) {
        if (slot >= 0) fabric_.pool->give_back(static_cast<uint32_t>(slot));
        return host_error(AFMESH_HAL_ERROR, "ibv_post_send to %s: %s", peer_.c_str(), strerror(rc));
    }
    ++outstanding_;
    if (!signal) {
        ++unsignalled_;
        return AFMESH_HAL_OK;
    }
    signals_.push_back(Signal{seq, unsignalled_ + 1, slot, event, cookie});
    unsignalled_ = 0;
    return AFMESH_HAL_OK;
}

int Connection::write_imm(const void *src, size_t bytes, uint32_t lkey, uint64_t remote_addr, uint32_t rkey,
                          uint32_t imm, uint32_t flags, uint64_t cookie) {
    ibv_sge sge{reinterpret_cast<uintptr_t>(src), static_cast<uint32_t>(bytes), lkey};
    ibv_send_wr wr{};
    wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    wr.imm_data = htonl(imm);  // network order on the wire; the receiver's ntohl gives it back
    wr.sg_list = &sge;
    wr.num_sge = bytes > 0 ? 1 : 0;
    if (bytes > 0 && bytes <= kMaxInline) wr.send_flags = IBV_SEND_INLINE;
    wr.wr.rdma.remote_addr = remote_addr;
    wr.wr.rdma.rkey = rkey;
    std::lock_guard lock(tx_mu_);
    if (const int rc = check_postable_locked("write_imm"); rc != AFMESH_HAL_OK) return rc;
    return post_locked(wr, flags & AFMESH_NET_SIGNAL, -1, (flags & AFMESH_NET_SIGNAL) ? AFMESH_NET_EV_WRITE_DONE : 0,
                       cookie);
}

int Connection::send(const void *buf, size_t len, uint32_t flags, uint64_t cookie) {
    std::lock_guard lock(tx_mu_);
    if (const int rc = check_postable_locked("send"); rc != AFMESH_HAL_OK) return rc;
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
    return post_locked(wr, (flags & AFMESH_NET_SIGNAL) || slot >= 0, slot,
                       (flags & AFMESH_NET_SIGNAL) ? AFMESH_NET_EV_SEND_DONE : 0, cookie);
}

void Connection::on_send_completion(const ibv_wc &wc, EventSink &sink, std::string *why, bool *ok) {
    std::lock_guard lock(tx_mu_);
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
        std::lock_guard lock(tx_mu_);
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
        std::lock_guard lock(tx_mu_);
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
