// SPDX-License-Identifier: Apache-2.0
// Context's connection set-up: the side-channel exchange that brings each RC QP up.
#include <sys/epoll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>

#include "context.h"
#include "ibverbs/wire.h"
#include "net_host.h"
#include "side_channel.h"

namespace afmesh::ibverbs {

void Context::accept_side_channels() {
    for (;;) {
        sockaddr_storage peer{};
        socklen_t length = sizeof peer;
        const int fd = accept4(listen_fd_, reinterpret_cast<sockaddr *>(&peer), &length, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED) continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK) host_log(AFMESH_LOG_WARN, "accept: %s", strerror(errno));
            return;
        }
        auto conn = std::make_unique<Connection>(fabric_, fd, Connection::State::kAwaitRequest, format_sockaddr(peer));
        connections_.insert(conn.get());
        set_interest(conn.get(), EPOLLIN);
        conn.release();
    }
}

// Client: the side channel is connected (or failed to): send our QP's REQUEST.
void Context::send_request(Connection *conn) {
    std::string why;
    if (const int error = socket_error(conn->fd()); error != 0)
        return fail(conn, AFMESH_HAL_PEER_FAILED, "connect to " + conn->peer() + ": " + strerror(error));
    if (!conn->send_request(&why)) return fail(conn, AFMESH_HAL_PEER_FAILED, why);
    conn->set_state(Connection::State::kAwaitReply);
    set_interest(conn, EPOLLIN);
}

// The connection set-up state machine, driven by side-channel readiness.
void Context::progress_handshake(Connection *conn, uint32_t events) {
    using State = Connection::State;
    std::string why;
    const State state = conn->state();
    if (state == State::kFailed) return;
    if (state == State::kDialing) {
        if (!(events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) return;
        return send_request(conn);
    }
    if (state == State::kEstablished) {
        uint8_t byte;
        size_t filled = 0;
        const int rc = read_some(conn->fd(), &byte, 1, &filled, &why);
        if (rc == 0) return;
        return fail(conn, AFMESH_HAL_PEER_FAILED,
                    rc < 0 ? "peer " + conn->peer() + ": " + why : "unexpected data on the side channel from " + conn->peer());
    }
    const int rc = conn->read_handshake(&why);
    if (rc == 0) return;
    if (rc < 0) return fail(conn, AFMESH_HAL_PEER_FAILED, "handshake with " + conn->peer() + ": " + why);
    const HandshakeType expected = state == State::kAwaitReply    ? HandshakeType::kReply
                                   : state == State::kAwaitRequest ? HandshakeType::kRequest
                                                                   : HandshakeType::kReady;
    QpInfo remote;
    const uint8_t local_link = fabric_.port.roce ? kLinkEthernet : kLinkInfiniBand;
    if (!decode_handshake(conn->inbox(), expected, &remote, &why))
        return fail(conn, AFMESH_HAL_PEER_FAILED, "bad handshake from " + conn->peer() + ": " + why);
    if (remote.link != local_link)
        return fail(conn, AFMESH_HAL_PEER_FAILED, "handshake from " + conn->peer() + ": link layers differ");
    switch (expected) {
    case HandshakeType::kReply:
        if (!conn->on_reply(remote, &why)) return fail(conn, AFMESH_HAL_PEER_FAILED, why);
        conn->set_state(State::kEstablished);
        connected_.push_back(conn);
        return;
    case HandshakeType::kRequest:
        if (!reserve_cq(&why)) return fail(conn, AFMESH_HAL_NO_MEMORY, why);
        if (!conn->on_request(remote, &why)) {
            if (conn->qpn() == 0) release_cq();  // forget() releases it once the QP exists
            return fail(conn, AFMESH_HAL_PEER_FAILED, why);
        }
        by_qpn_[conn->qpn()] = conn;
        // Accept-able now; posting waits (AGAIN) for READY, when the dialer's QP can receive.
        conn->set_state(State::kAwaitReady);
        incoming_.push_back(conn);
        return;
    case HandshakeType::kReady:
        conn->set_state(State::kEstablished);
        return;
    }
}

}  // namespace afmesh::ibverbs
