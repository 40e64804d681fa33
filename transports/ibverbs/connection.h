// SPDX-License-Identifier: Apache-2.0
// One RC connection: its queue pair, receive ring, send-queue accounting
// and the side-channel socket that set it up and watches the peer.
//
// Selective signalling: most work requests are unsignalled; a signal is
// forced every kSignalInterval requests (and on every send that uses a
// bounce buffer) so the send queue's slots retire. RC completes in order,
// so a signalled completion retires every request posted before it; the
// records in signals_ say how many each one covers. A chain (write_imm_v)
// is signalled, when it is, on its last request only.
#pragma once

#include <deque>
#include <string>
#include <vector>

#include "afmesh/hal/transport.h"
#include "buffers.h"
#include "counters.h"
#include "discovery.h"
#include "ibverbs/wire.h"
#include "net_host.h"
#include "thread_annotations.h"

namespace afmesh::ibverbs {

/** What every connection of a context shares. */
struct Fabric {
    const VerbsApi *api = nullptr;
    PortChoice port;
    ibv_pd *pd = nullptr;
    ibv_cq *cq = nullptr;
    SendPool *pool = nullptr;
    mutable Counters counters{kCounterSpecs};  // connections hold the Fabric const, and count through it
};

/** One RDMA write of a chain: `bytes` from `src` (under `lkey`; unused when inline) to `remote_addr` under `rkey`. */
struct WriteSegment {
    const void *src = nullptr;
    uint32_t bytes = 0;
    uint32_t lkey = 0;
    uint64_t remote_addr = 0;
    uint32_t rkey = 0;
};

/** wr_id bit marking a receive; the rest is the ring slot. Send wr_ids are sequence numbers. */
inline constexpr uint64_t kRecvTag = uint64_t{1} << 63;

class Connection {
public:
    enum class State {
        kDialing,       ///< client: TCP connect to the side channel in progress
        kAwaitReply,    ///< client: REQUEST sent
        kAwaitRequest,  ///< server: side channel accepted
        kAwaitReady,    ///< server: REPLY sent, QP is RTS, accept-able; posts wait for READY
        kEstablished,
        kFailed,
    };

    Connection(const Fabric &fabric, int fd, State state, std::string peer);
    ~Connection();
    Connection(const Connection &) = delete;
    Connection &operator=(const Connection &) = delete;

    afmesh_net_conn *handle() { return reinterpret_cast<afmesh_net_conn *>(this); }
    static Connection *from(afmesh_net_conn *conn) { return reinterpret_cast<Connection *>(conn); }

    int fd() const { return fd_; }
    uint32_t qpn() const { return qp_ ? qp_->qp_num : 0; }
    const std::string &peer() const { return peer_; }
    State state();

    // --- set-up, on the progress path ---

    /** Creates the QP in INIT with every receive posted. */
    bool create_qp(std::string *why);
    /** Client, socket connected: sends REQUEST. */
    bool send_request(std::string *why);
    /** Client: REPLY arrived; QP to RTS, READY sent, established. */
    bool on_reply(const QpInfo &remote, std::string *why);
    /** Server: REQUEST arrived; QP to RTS, REPLY sent. */
    bool on_request(const QpInfo &remote, std::string *why);
    void set_state(State state);
    /** Reads the next handshake message: 1 complete, 0 partial, -1 failed (`why`). */
    int read_handshake(std::string *why);
    const uint8_t *inbox() const { return inbox_; }

    // --- data path, any thread ---

    /**
     * Posts `count` (1 to kMaxWriteSegs) writes as one chain rung with one
     * doorbell: RDMA_WRITE for all but the last, RDMA_WRITE_WITH_IMM for
     * it. RC places a QP's writes in order, so every segment is visible
     * before the peer sees the immediate. `what` names the call in errors.
     */
    int write_imm(const WriteSegment *segs, uint32_t count, uint32_t imm, uint32_t flags, uint64_t cookie,
                  const char *what);
    int send(const void *buf, size_t len, uint32_t flags, uint64_t cookie);

    // --- completions, on the progress path ---

    /** A successful send-side completion: retires covered requests; reports the caller's signal. */
    void on_send_completion(const ibv_wc &wc, EventSink &sink, std::string *why, bool *ok);
    /** Reposts receive slot `slot`; false with `why`. */
    bool repost(uint32_t slot, std::string *why);
    const uint8_t *recv_slot(uint32_t slot) { return ring_.slot(slot); }

    /** Marks the connection failed, moves the QP to ERROR and shuts the side channel. False if already failed. */
    bool fail(int status, const std::string &reason);
    int failure_status() const { return failure_status_; }
    const char *failure_reason() const { return failure_reason_.c_str(); }

    /** close(): destroys the QP (no completion refers to it afterwards) and the socket; memory stays for the last events. */
    void shut();

    bool visible = false;             ///< the caller holds the handle (connect() or accept() returned it)
    std::vector<ibv_wc> early;        ///< completions that arrived before accept()
    uint32_t interest = 0;            ///< epoll events the socket is watched for

private:
    struct Signal {
        uint64_t seq;
        uint32_t covered;  // send-queue slots this completion retires
        int slot;          // bounce buffer to return, or -1
        uint32_t event;    // afmesh_net_event_type to report, or 0 for an internal signal
        uint64_t cookie;
    };
    int post_locked(ibv_send_wr *chain, uint32_t count, bool signal, int slot, uint32_t event, uint64_t cookie)
        AFMESH_REQUIRES(tx_mu_);
    int refused_locked(ibv_send_wr *chain, const ibv_send_wr *bad, uint32_t count, int slot, int error)
        AFMESH_REQUIRES(tx_mu_);
    int check_postable_locked(const char *what, uint32_t count) AFMESH_REQUIRES(tx_mu_);

    const Fabric &fabric_;
    int fd_;
    std::string peer_;
    ibv_qp *qp_ = nullptr;
    uint32_t psn_ = 0;
    SlotMemory ring_;
    uint8_t inbox_[kHandshakeSize];
    size_t inbox_filled_ = 0;

    Mutex tx_mu_;
    State state_ AFMESH_GUARDED_BY(tx_mu_);
    uint32_t outstanding_ AFMESH_GUARDED_BY(tx_mu_) = 0;  // posted, not yet retired by a signalled completion
    uint32_t unsignalled_ AFMESH_GUARDED_BY(tx_mu_) = 0;  // posted unsignalled since the last signal
    uint64_t next_seq_ AFMESH_GUARDED_BY(tx_mu_) = 0;
    std::deque<Signal> signals_ AFMESH_GUARDED_BY(tx_mu_);
    // Written once, under tx_mu_, as state_ becomes kFailed (fail(), shut()); read without it after
    // that (failure_status(), failure_reason(): the context reports a connection it saw fail).
    int failure_status_ = 0;
    std::string failure_reason_;
};

}  // namespace afmesh::ibverbs
