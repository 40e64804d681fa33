// SPDX-License-Identifier: Apache-2.0
// One peer: a non-blocking TCP socket carrying frames both ways.
//
// Threads. The receive half belongs to the progress thread (poll()). The
// send half, the epoll interest and the state are guarded by tx_mu_, so a
// poster on any thread writes its frame to the socket itself (the common
// case costs one sendmsg) while the progress thread continues whatever the
// socket did not take when it becomes writable. A failure is recorded once,
// under tx_mu_, by whichever thread meets it, and reported once by poll().
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "address.h"
#include "afmesh/hal/transport.h"
#include "failure_reason.h"
#include "frame_receiver.h"
#include "frame_sender.h"
#include "net_host.h"
#include "thread_annotations.h"

namespace afmesh::tcp {

class Context;

class Connection {
public:
    enum class State : uint8_t { kConnecting, kEstablished, kFailed, kClosed };

    /** Takes ownership of `fd`. */
    Connection(Context &context, int fd, State initial, const SocketAddress &peer);
    ~Connection();
    Connection(const Connection &) = delete;
    Connection &operator=(const Connection &) = delete;

    static Connection *from(afmesh_net_conn *handle) { return reinterpret_cast<Connection *>(handle); }
    afmesh_net_conn *handle() { return reinterpret_cast<afmesh_net_conn *>(this); }
    State state() const { return state_.load(std::memory_order_acquire); }
    int fd() const { return fd_; }
    const char *peer() const { return peer_.text; }

    // --- any thread ---

    /**
     * Queues one operation's frames and sends what the socket takes; see
     * FrameSender::queue. With `more` (AFMESH_NET_MORE) they wait for the
     * next post, so a burst leaves in one gathered send; poll() sends them
     * if none follows.
     */
    int post(OutgoingFrame *frames, size_t count, uint32_t completion, uint64_t cookie, bool more);
    /** Fails the connection (first failure wins) and queues its EV_CONN_ERROR. */
    void fail(const Failure &failure);

    // --- progress thread (or a caller holding the context's progress lock) ---

    /** Adds the socket to the epoll set: for the connect to finish, or for input. */
    void watch();
    /** The socket is writable: a connect finished, or queued bytes can go. */
    void on_writable(EventSink &sink);
    /**
     * Sends frames held back by `more` that no post followed, then reports
     * signalled completions; true when some did not fit in `sink`.
     */
    bool harvest(EventSink &sink);
    /** Set once the connection failed; stable from then on. */
    const Failure &failure() const { return failure_; }
    FrameReceiver &receiver() { return receiver_; }
    /**
     * The caller's close(): drops the frames the socket has not taken, and
     * sends a FIN after those it has. Returns true when the socket must now
     * linger (drain()): closing it with unread input would make the kernel
     * reset the connection and throw away what it still holds for the peer,
     * such as a last response and the BYE behind it.
     */
    bool close();
    /**
     * Reads and discards what a closed connection receives: true once the
     * peer has closed its side too (or the socket failed), when it may go.
     */
    bool drain();

    // The context's bookkeeping: membership of its work lists.
    bool receive_queued = false;              // progress thread
    std::atomic<bool> harvest_queued{false};  // set by posters, cleared by poll()

private:
    void push_locked() AFMESH_REQUIRES(tx_mu_);
    void fail_locked(const Failure &failure) AFMESH_REQUIRES(tx_mu_);
    void set_interest_locked(uint32_t events) AFMESH_REQUIRES(tx_mu_);

    Context &context_;
    int fd_;
    const AddressText peer_;
    std::atomic<State> state_;

    Mutex tx_mu_;
    uint32_t interest_ AFMESH_GUARDED_BY(tx_mu_) = 0;  // epoll events watched; 0 while outside the epoll set
    FrameSender sender_ AFMESH_GUARDED_BY(tx_mu_);
    // Unsent frames are held back for the next post, not blocked by the socket.
    bool holding_ AFMESH_GUARDED_BY(tx_mu_) = false;
    // Written once under tx_mu_, before state_ says kFailed; read without it after that (failure()).
    Failure failure_;

    FrameReceiver receiver_;
};

}  // namespace afmesh::tcp
