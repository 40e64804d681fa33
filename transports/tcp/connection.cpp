// SPDX-License-Identifier: Apache-2.0
#include "connection.h"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <utility>

#include "context.h"
#include "net_host.h"
#include "socket_io.h"

namespace afmesh::tcp {

Connection::Connection(Context &context, int fd, State initial, const SocketAddress &peer)
    : context_(context), fd_(fd), peer_(format_address(peer)), state_(initial), sender_(context.counters()),
      receiver_(context.counters()) {}

Connection::~Connection() {
    if (fd_ >= 0) ::close(fd_);
}

int Connection::post(OutgoingFrame *frames, size_t count, uint32_t completion, uint64_t cookie, bool more) {
    MutexLock lock(&tx_mu_);
    switch (state()) {
    case State::kFailed:
        return host_error(AFMESH_HAL_PEER_FAILED, "connection to %s has failed: %s", peer(), failure_.reason.text);
    case State::kClosed: return host_error(AFMESH_HAL_INVALID_ARGUMENT, "connection to %s is closed", peer());
    case State::kConnecting:
    case State::kEstablished: break;
    }
    // With a backlog (the socket was full) EPOLLOUT is armed and poll()
    // carries on sending it; frames merely held back go out with this one.
    const bool backlog = sender_.has_unsent() && !holding_;
    const int rc = sender_.queue(frames, count, completion, cookie);
    if (rc != AFMESH_HAL_OK || backlog || state() != State::kEstablished) return rc;
    if (!more) {
        push_locked();
    } else if (!holding_) {
        holding_ = true;
        context_.queue_harvest(this);  // poll() sends the burst if its last post never comes
    }
    return rc;
}

void Connection::fail(const Failure &failure) {
    MutexLock lock(&tx_mu_);
    fail_locked(failure);
}

void Connection::watch() {
    MutexLock lock(&tx_mu_);
    if (state() == State::kConnecting || state() == State::kEstablished)
        set_interest_locked(state() == State::kConnecting ? EPOLLOUT : EPOLLIN);
}

void Connection::on_writable(EventSink &sink) {
    MutexLock lock(&tx_mu_);
    if (state() == State::kConnecting) {
        if (sink.full()) return;  // the socket stays writable: reported again next poll
        if (const int error = socket_error(fd_); error != 0) {
            Failure failure{AFMESH_HAL_PEER_FAILED, {}};
            failure.reason.format("connect to %s failed: %s", peer(), strerror(error));
            fail_locked(failure);
            return;
        }
        state_.store(State::kEstablished, std::memory_order_release);
        sink.add(AFMESH_NET_EV_CONNECTED, handle());
    }
    if (state() == State::kEstablished) push_locked();
}

bool Connection::harvest(EventSink &sink) {
    MutexLock lock(&tx_mu_);
    if (state() != State::kEstablished) return false;
    if (holding_) push_locked();
    return sender_.retire(&sink, handle());
}

bool Connection::close() {
    MutexLock lock(&tx_mu_);
    const bool connected = state() != State::kConnecting;
    state_.store(State::kClosed, std::memory_order_release);
    sender_.drop_all();
    if (!connected || shutdown(fd_, SHUT_WR) != 0) {
        set_interest_locked(0);
        return false;
    }
    set_interest_locked(EPOLLIN);
    return true;
}

bool Connection::drain() {
    char discard[4096];
    for (;;) {
        const ssize_t n = recv(fd_, discard, sizeof discard, 0);
        if (n > 0) continue;
        return n == 0 || !would_block(errno);
    }
}

// Sends what the socket takes, keeps EPOLLOUT armed exactly while bytes
// wait, and retires what was sent.
void Connection::push_locked() {
    holding_ = false;
    Failure failure;
    switch (sender_.flush(fd_, &failure)) {
    case FrameSender::Flush::kFailed: fail_locked(failure); return;
    case FrameSender::Flush::kBlocked: set_interest_locked(EPOLLIN | EPOLLOUT); break;
    case FrameSender::Flush::kAllSent: set_interest_locked(EPOLLIN); break;
    }
    if (state() == State::kEstablished && sender_.retire(nullptr, handle())) context_.queue_harvest(this);
}

void Connection::fail_locked(const Failure &failure) {
    if (state() == State::kFailed || state() == State::kClosed) return;
    failure_ = failure;
    state_.store(State::kFailed, std::memory_order_release);
    set_interest_locked(0);
    // Tell the peer now; the descriptor itself stays open until close() so
    // that no other thread can ever act on a reused number.
    shutdown(fd_, SHUT_RDWR);
    sender_.drop_all();
    host_log(AFMESH_LOG_INFO, "connection to %s failed: %s", peer(), failure_.reason.text);
    context_.queue_failure(this);
}

void Connection::set_interest_locked(uint32_t events) {
    if (events == interest_) return;
    // Removal of a watched descriptor cannot fail; if it somehow did, the
    // socket is shut down and no longer produces work anyway.
    if (context_.set_interest(fd_, interest_, events, this) || events == 0) {
        interest_ = events;
        return;
    }
    Failure failure{AFMESH_HAL_ERROR, {}};
    failure.reason.format("epoll_ctl on the connection to %s: %s", peer(), strerror(errno));
    fail_locked(failure);
}

}  // namespace afmesh::tcp
