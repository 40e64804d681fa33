// SPDX-License-Identifier: Apache-2.0
// Context's progress half: poll(), arm(), and what each completion means.
#include <rdma/fi_errno.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>

#include "address.h"
#include "byte_codec.h"
#include "context.h"
#include "fabric/wire.h"
#include "libfabric_api.h"
#include "monotonic.h"
#include "net_host.h"

namespace afmesh::fabric {
namespace {

// CQ entries one poll() reads per endpoint: bounded, so one busy endpoint
// neither starves the others nor keeps the caller in poll() for long.
constexpr int kCqBudget = 64;
constexpr int kCqBatch = 16;
// While operations wait for the provider, a sleeping caller is woken this often to retry them.
constexpr uint64_t kBacklogRetryNs = 50'000;

}  // namespace

void Context::push_event(uint32_t type, Connection *conn, uint64_t cookie, uint32_t imm) {
    Pending p;
    p.event.type = type;
    p.event.conn = conn ? conn->handle() : nullptr;
    p.event.cookie = cookie;
    p.event.imm = imm;
    pending_.push_back(std::move(p));
}

void Context::purge_events_of(const Connection *conn) {
    auto keep = std::remove_if(pending_.begin(), pending_.end(), [&](const Pending &p) {
        return p.event.conn == const_cast<Connection *>(conn)->handle();
    });
    for (auto it = keep; it != pending_.end(); ++it)
        if (it->slot) it->endpoint->repost(it->slot);
    pending_.erase(keep, pending_.end());
}

// Fails `conn` once: one EV_CONN_ERROR after whatever it already reported,
// nothing after. An incoming connection the caller never accepted just goes.
void Context::fail(Connection *conn, int status, const char *reason) {
    const Connection::State state = conn->state.load(std::memory_order_acquire);
    if (state == Connection::State::kFailed || state == Connection::State::kClosed) return;
    conn->failure.status = status;
    conn->failure.reason.format("%s", reason);
    conn->endpoint->drop_backlog_of(conn);
    conn->held.clear();
    std::erase(connecting_, conn);
    if (state == Connection::State::kIncoming) {
        host_log(AFMESH_LOG_INFO, "an incoming connection failed before it was accepted: %s", reason);
        conn->state.store(Connection::State::kClosed, std::memory_order_release);
        std::erase(incoming_, conn);
        connections_.erase(conn->id);
        closed_.push_back(conn);
        return;
    }
    host_log(AFMESH_LOG_INFO, "connection %" PRIu32 " failed (%d): %s", conn->id, status, reason);
    conn->state.store(Connection::State::kFailed, std::memory_order_release);
    Pending p;
    p.event.type = AFMESH_NET_EV_CONN_ERROR;
    p.event.status = status;
    p.event.conn = conn->handle();
    p.event.reason = conn->failure.reason.text;
    pending_.push_back(std::move(p));
}

void Context::establish(Connection *conn, uint32_t remote_id, fi_addr_t peer) {
    conn->remote_id = remote_id;
    conn->peer = peer;
    conn->state.store(Connection::State::kEstablished, std::memory_order_release);
    std::erase(connecting_, conn);
    push_event(AFMESH_NET_EV_CONNECTED, conn);
    release_held(conn);
}

void Context::hold(Connection *conn, HeldEvent &&event) {
    event.event.conn = conn->handle();
    conn->held.push_back(std::move(event));
}

// What arrived before the caller could see the connection is reported now, in order.
void Context::release_held(Connection *conn) {
    for (HeldEvent &held : conn->held) {
        Pending p;
        p.event = held.event;
        p.owned = std::move(held.data);
        pending_.push_back(std::move(p));
    }
    conn->held.clear();
}

// Frees closed connections no operation refers to any more, with their own
// endpoints. The backlog counts too: a close's BYE may still wait there.
void Context::free_closed() {
    std::erase_if(closed_, [&](Connection *conn) AFMESH_REQUIRES(mu_) {
        if (conn->outstanding.load(std::memory_order_acquire) != 0 || conn->endpoint->has_backlog_of(conn))
            return false;
        if (conn->endpoint->owner == conn) remove_endpoint(conn->endpoint);
        delete conn;
        return true;
    });
}

int Context::poll(afmesh_net_event *events, int max) {
    if (max < 0 || (max > 0 && !events))
        return host_error(AFMESH_HAL_INVALID_ARGUMENT, "poll: need an array for max >= 0 events");
    MutexLock lock(&mu_);
    sleeping_.store(false, std::memory_order_seq_cst);
    // The previous poll's events are stale now: their receive buffers go back to the provider.
    for (Pending &p : delivered_)
        if (p.slot) p.endpoint->repost(p.slot);
    delivered_.clear();
    free_closed();
    if (wake_fd_ >= 0) {
        uint64_t count;
        [[maybe_unused]] ssize_t a = read(wake_fd_, &count, sizeof count);
        [[maybe_unused]] ssize_t b = read(timer_fd_, &count, sizeof count);
        fabric_.counters.add(kEventfdCalls, 2);
    }
    // By index: a HELLO handled here may open an endpoint for its connection.
    for (size_t i = 0; i < endpoints_.size(); ++i) progress(endpoints_[i].get());
    take_poster_failures();
    expire_handshakes();
    if (!incoming_.empty() && !incoming_announced_) {
        push_event(AFMESH_NET_EV_INCOMING, nullptr);
        incoming_announced_ = true;
    }
    const int n = static_cast<int>(std::min(pending_.size(), static_cast<size_t>(max)));
    for (int i = 0; i < n; ++i) {
        delivered_.push_back(std::move(pending_[i]));
        Pending &p = delivered_.back();
        if (p.event.type == AFMESH_NET_EV_RECV)
            p.event.data = p.slot ? static_cast<const void *>(p.slot->data + kHeaderSize) : p.owned.data();
        events[i] = p.event;
    }
    pending_.erase(pending_.begin(), pending_.begin() + n);  // usually all of them: nothing moves
    return n;
}

void Context::progress(Endpoint *endpoint) {
    endpoint->drain(&scratch_failures_);
    for (auto &[conn, failure] : scratch_failures_) fail(conn, failure.status, failure.reason.text);
    scratch_failures_.clear();
    fi_cq_data_entry entries[kCqBatch];
    for (int read = 0; read < kCqBudget;) {
        const ssize_t got = fi_cq_read(endpoint->cq(), entries, kCqBatch);
        fabric_.counters.add(kCqReads);
        if (got == -FI_EAGAIN) return;
        if (got == -FI_EAVAIL) {
            on_error(endpoint);
            ++read;
            continue;
        }
        if (got < 0) {
            host_log(AFMESH_LOG_WARN, "fi_cq_read: %s", fabric_strerror(static_cast<int>(-got)));
            return;
        }
        for (ssize_t i = 0; i < got; ++i) on_completion(endpoint, entries[i]);
        read += static_cast<int>(got);
    }
}

void Context::on_completion(Endpoint *endpoint, const fi_cq_data_entry &entry) {
    const bool remote_write = (entry.flags & FI_REMOTE_CQ_DATA) && (entry.flags & (FI_RMA | FI_REMOTE_WRITE));
    if (remote_write) {
        on_remote_write(endpoint, entry.data);
        // FI_RX_CQ_DATA providers consume a posted receive for it.
        if (RecvSlot *slot = endpoint->receive_slot(entry.op_context)) endpoint->repost(slot);
        return;
    }
    if (TxOp *op = endpoint->transmit_op(entry.op_context)) {
        on_transmit(endpoint, op, nullptr);
    } else if (RecvSlot *slot = endpoint->receive_slot(entry.op_context)) {
        if (!on_message(endpoint, slot, entry.len)) endpoint->repost(slot);
    } else {
        host_log(AFMESH_LOG_DEBUG, "a completion without a context of ours (flags 0x%" PRIx64 ") ignored",
                 static_cast<uint64_t>(entry.flags));
    }
}

void Context::on_error(Endpoint *endpoint) {
    fi_cq_err_entry entry;
    Failure failure;
    if (!read_cq_error(endpoint->cq(), &entry, "operation failed", &failure)) return;
    fabric_.counters.add(kCqErrors);
    if (TxOp *op = endpoint->transmit_op(entry.op_context)) {
        on_transmit(endpoint, op, &failure);
    } else if (RecvSlot *slot = endpoint->receive_slot(entry.op_context)) {
        // A receive failed (e.g. a message larger than a buffer): it names no
        // connection; the buffer goes back unless the endpoint is closing.
        host_log(AFMESH_LOG_WARN, "receive: %s", failure.reason.text);
        if (entry.err != FI_ECANCELED) endpoint->repost(slot);
    } else {
        host_log(AFMESH_LOG_WARN, "an incoming operation failed: %s", failure.reason.text);
    }
}

void Context::on_transmit(Endpoint *endpoint, TxOp *op, const Failure *failure) {
    const auto [conn, event, cookie] = endpoint->release(op);
    if (!conn) return;
    conn->outstanding.fetch_sub(1, std::memory_order_acq_rel);
    if (failure) {
        fail(conn, failure->status, failure->reason.text);
    } else if (event && conn->state.load(std::memory_order_acquire) == Connection::State::kEstablished) {
        push_event(event, conn, cookie);
    }
}

void Context::on_remote_write(Endpoint *endpoint, uint64_t data) {
    const uint32_t imm = static_cast<uint32_t>(data);
    if (endpoint == shared_) {
        // The bytes landed in a registered region (the provider checked the
        // key and bounds); only the tag says which connection they are for.
        auto it = connections_.find(write_target(data));
        if (it == connections_.end()) {
            host_log(AFMESH_LOG_DEBUG, "a write for connection %" PRIu32 " (closed or not ours); its immediate is dropped",
                     write_target(data));
            return;
        }
        deliver_imm(it->second, imm);
        return;
    }
    Connection *conn = endpoint->owner;
    if (!conn) {
        host_log(AFMESH_LOG_WARN, "a remote write to the listening endpoint; its immediate is dropped");
        return;
    }
    if (write_target(data) != (fabric_.tagged_writes ? conn->id : 0)) {
        Reason why;
        if (fabric_.tagged_writes)
            why.format("the peer tagged a write for connection %" PRIu32 ", not this one (%" PRIu32 ")",
                       write_target(data), conn->id);
        else
            why.format("the peer sent more than a 32-bit immediate");
        fail(conn, AFMESH_HAL_PEER_FAILED, why.text);
        return;
    }
    deliver_imm(conn, imm);
}

void Context::deliver_imm(Connection *conn, uint32_t imm) {
    switch (conn->state.load(std::memory_order_acquire)) {
    case Connection::State::kEstablished: push_event(AFMESH_NET_EV_IMM, conn, 0, imm); return;
    case Connection::State::kConnecting:
    case Connection::State::kIncoming: {
        HeldEvent event;
        event.event.type = AFMESH_NET_EV_IMM;
        event.event.imm = imm;
        hold(conn, std::move(event));
        return;
    }
    default: return;  // failed or closed: nothing more is reported
    }
}

// Returns true when `slot` now belongs to a pending event (reposted after delivery).
bool Context::on_message(Endpoint *endpoint, RecvSlot *slot, size_t len) {
    Header header;
    Reason why;
    if (len > kMessageBufferSize || !decode_header(slot->data, len, &header, &why)) {
        host_log(AFMESH_LOG_WARN, "dropping a message: %s", len > kMessageBufferSize ? "oversize" : why.text);
        return false;
    }
    const uint8_t *payload = slot->data + kHeaderSize;
    const size_t payload_len = len - kHeaderSize;
    if (header.type == MessageType::kHello) {
        if (endpoint != listener_) host_log(AFMESH_LOG_DEBUG, "dropping a HELLO: this endpoint does not listen");
        else if (header.version != kWireVersion) reject(header, payload, payload_len);
        else on_hello(header, payload, payload_len);
        return false;
    }
    Connection *conn = addressee(endpoint, header);
    if (!conn) {
        host_log(AFMESH_LOG_DEBUG, "dropping a type %u message for connection %" PRIu32 " (stale or not ours)",
                 static_cast<unsigned>(header.type), header.dst_conn);
        return false;
    }
    const Connection::State state = conn->state.load(std::memory_order_acquire);
    switch (header.type) {
    case MessageType::kAccept: on_accept(conn, header, payload, payload_len); return false;
    case MessageType::kBye: fail(conn, AFMESH_HAL_PEER_FAILED, "the peer closed the connection"); return false;
    case MessageType::kImm: deliver_imm(conn, load_le32(payload)); return false;
    case MessageType::kReject:
        if (state == Connection::State::kConnecting) {
            Reason reason;
            reason.format("the peer speaks fabric wire protocol %u, this module %u: run one afmesh version on every node",
                          unsigned{header.version}, unsigned{kWireVersion});
            fail(conn, AFMESH_HAL_UNSUPPORTED_VERSION, reason.text);
        }
        return false;
    case MessageType::kData:
        if (state == Connection::State::kEstablished) {
            Pending p;
            p.event.type = AFMESH_NET_EV_RECV;
            p.event.conn = conn->handle();
            p.event.len = static_cast<uint32_t>(payload_len);
            p.endpoint = endpoint;
            p.slot = slot;
            pending_.push_back(std::move(p));
            return true;
        }
        if (state == Connection::State::kIncoming || state == Connection::State::kConnecting) {
            HeldEvent held;  // RDM does not order it behind the ACCEPT, or the caller has not accepted yet
            held.event.type = AFMESH_NET_EV_RECV;
            held.event.len = static_cast<uint32_t>(payload_len);
            held.data.assign(payload, payload + payload_len);
            hold(conn, std::move(held));
        }
        return false;
    case MessageType::kHello: break;  // refused above
    }
    return false;
}

// Only a connection's peer, under the ids both ends gave it, is heard on it.
Connection *Context::addressee(Endpoint *endpoint, const Header &header) {
    Connection *conn = nullptr;
    if (endpoint == shared_) {
        auto it = connections_.find(header.dst_conn);
        if (it != connections_.end()) conn = it->second;
    } else if (endpoint->owner && (header.dst_conn == 0 || header.dst_conn == endpoint->owner->id)) {
        conn = endpoint->owner;
    }
    if (conn && conn->remote_id != 0 && conn->remote_id != header.src_conn) return nullptr;
    return conn;
}

void Context::on_accept(Connection *conn, const Header &header, const uint8_t *payload, size_t len) {
    if (conn->state.load(std::memory_order_acquire) != Connection::State::kConnecting) return;  // a duplicate
    Reason why;
    fi_addr_t peer;
    if (!insert_peer(payload, len, &peer, &why)) {
        Reason reason;
        reason.format("the peer's acceptance is malformed: %s", why.text);
        fail(conn, AFMESH_HAL_PEER_FAILED, reason.text);
        return;
    }
    establish(conn, header.src_conn, peer);
}

void Context::on_hello(const Header &header, const uint8_t *payload, size_t len) {
    Reason why;
    fi_addr_t peer;
    if (!insert_peer(payload, len, &peer, &why)) {
        host_log(AFMESH_LOG_WARN, "refusing a connection request: %s", why.text);
        return;
    }
    Connection *conn = new_connection(peer, &why);
    if (!conn) {
        host_log(AFMESH_LOG_WARN, "refusing a connection request: %s", why.text);
        return;
    }
    conn->remote_id = header.src_conn;
    conn->state.store(Connection::State::kIncoming, std::memory_order_release);
    incoming_.push_back(conn);
    std::vector<uint8_t> own;
    encode_address(fabric_.info->addr_format, conn->endpoint->raw_address(), &own);
    const int rc = send_control(conn, MessageType::kAccept, own, &why);
    if (rc != AFMESH_HAL_OK) fail(conn, rc, why.text);
}

void Context::reject(const Header &hello, const uint8_t *payload, size_t len) {
    Reason why;
    fi_addr_t peer;
    if (!insert_peer(payload, len, &peer, &why)) {
        host_log(AFMESH_LOG_WARN, "a HELLO of fabric wire protocol %u without a usable address: %s",
                 unsigned{hello.version}, why.text);
        return;
    }
    host_log(AFMESH_LOG_WARN, "refusing a connection from a peer of fabric wire protocol %u (this module speaks %u)",
             unsigned{hello.version}, unsigned{kWireVersion});
    Outgoing op;
    op.dest = peer;
    encode_header({MessageType::kReject, hello.src_conn, 0}, op.header.data());
    bool queued = false;
    if (listener_->submit(std::move(op), &queued, &why) != AFMESH_HAL_OK)
        host_log(AFMESH_LOG_WARN, "could not send the refusal: %s", why.text);
}

void Context::expire_handshakes() {
    if (connecting_.empty()) return;
    const uint64_t now = monotonic_ns();
    for (size_t i = 0; i < connecting_.size();) {
        Connection *conn = connecting_[i];
        if (now < conn->deadline_ns) {
            ++i;
            continue;
        }
        Reason why;
        why.format("the peer did not answer the connection request within %" PRIu64 " ms (AFMESH_CONNECT_TIMEOUT_MS)",
                   handshake_ns_ / 1'000'000);
        fail(conn, AFMESH_HAL_TIMEOUT, why.text);  // removes it from connecting_
    }
}

void Context::take_poster_failures() {
    {
        MutexLock lock(&lists_mu_);
        scratch_failures_.swap(poster_failures_);
    }
    for (auto &[conn, failure] : scratch_failures_) fail(conn, failure.status, failure.reason.text);
    scratch_failures_.clear();
}

// The fi_trywait pattern. sleeping_ is set before the module's own work is
// checked, and posting threads queue work before they read sleeping_, so
// either arm() sees the work or the poster sees the sleeper and wakes it.
int Context::arm() {
    if (epoll_fd_ < 0)
        return host_error(AFMESH_HAL_NOT_SUPPORTED, "arm: provider %s has no wait fd",
                          fabric_.info->fabric_attr->prov_name);
    MutexLock lock(&mu_);
    sleeping_.store(true, std::memory_order_seq_cst);
    bool pending = !pending_.empty() || (!incoming_.empty() && !incoming_announced_);
    {
        MutexLock lists(&lists_mu_);
        pending = pending || !poster_failures_.empty();
    }
    std::vector<fid *> cqs;
    bool backlog = false;
    for (auto &endpoint : endpoints_) {
        cqs.push_back(&endpoint->cq()->fid);
        backlog = backlog || endpoint->has_backlog();
    }
    if (!pending && !cqs.empty()) {
        fabric_.counters.add(kTrywaits);
        pending = fi_trywait(fabric_.fabric, cqs.data(), static_cast<int>(cqs.size())) != 0;
    }
    if (pending) {
        sleeping_.store(false, std::memory_order_seq_cst);
        return AFMESH_HAL_AGAIN;
    }
    // Wake for the earliest handshake deadline, and soon while operations wait to be posted.
    uint64_t wake_at = 0;
    for (Connection *conn : connecting_) wake_at = wake_at ? std::min(wake_at, conn->deadline_ns) : conn->deadline_ns;
    if (backlog) {
        const uint64_t soon = monotonic_ns() + kBacklogRetryNs;
        wake_at = wake_at ? std::min(wake_at, soon) : soon;
    }
    itimerspec timer{};
    if (wake_at) {
        timer.it_value.tv_sec = static_cast<time_t>(wake_at / 1'000'000'000u);
        timer.it_value.tv_nsec = static_cast<long>(wake_at % 1'000'000'000u);
    }
    timerfd_settime(timer_fd_, TFD_TIMER_ABSTIME, &timer, nullptr);
    return AFMESH_HAL_OK;
}

}  // namespace afmesh::fabric
