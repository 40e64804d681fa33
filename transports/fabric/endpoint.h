// SPDX-License-Identifier: Apache-2.0
// One RDM endpoint with its own completion queue, posted receive buffers,
// transmit operation contexts and bounce buffers for messages.
//
// A context opens either one endpoint that every connection shares, or one
// per connection end plus a listener (context.h says when). Shared, it keeps
// recv_depth receives posted per connection, up to the provider's receive
// queue size; beyond that the provider holds unexpected messages.
//
// Transmit path (any thread, under tx_mu_): an operation is posted at once
// when the provider takes it and nothing of its connection waits, else kept
// in a backlog that poll() drains in order per connection; only a full
// backlog makes the caller see AGAIN. -FI_EAGAIN is therefore never spun
// on, and one connection the provider holds back (rxm reconnecting to a
// dead peer) holds back no other connection sharing the endpoint.
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_endpoint.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <vector>

#include "connection.h"
#include "errors.h"
#include "fabric.h"
#include "registration.h"
#include "thread_annotations.h"
#include "wire.h"

namespace afmesh::fabric {

/**
 * Every operation context starts with fi_context2 (FI_CONTEXT / FI_CONTEXT2
 * modes). A completion's context is recognised by its address (see
 * Endpoint::transmit_op), never by reading through it.
 */
struct OpContext {
    fi_context2 fi;
};

struct RecvSlot : OpContext {
    uint8_t *data = nullptr;  // kMessageBufferSize bytes inside one of the endpoint's receive slabs
    void *desc = nullptr;     // that slab's registration descriptor
};

struct TxOp : OpContext {
    Connection *conn = nullptr;  // null for a control message of an already closed connection
    uint32_t event = 0;          // EV_WRITE_DONE / EV_SEND_DONE when signalled, else 0
    uint64_t cookie = 0;
    int bounce = -1;  // message buffer held until completion
    TxOp *next_free = nullptr;
};

/** Most pieces one write gathers (write_imm_v's segments; caps.max_write_segs). */
constexpr uint32_t kMaxWritePieces = 4;

/** One piece of a write: local source and where in the peer it lands. */
struct WritePiece {
    const void *src = nullptr;
    size_t bytes = 0;
    void *desc = nullptr;
    uint64_t remote_addr = 0, key = 0;
};

/** An operation to post, or waiting in the backlog. */
struct Outgoing {
    bool is_write = false;
    Connection *conn = nullptr;
    fi_addr_t dest = FI_ADDR_UNSPEC;
    // Writes: the pieces' sources (all in `copy`, in order, when copied),
    // targets, total bytes and remote CQ data; one fi_writemsg for them all.
    std::array<WritePiece, kMaxWritePieces> pieces{};
    uint32_t num_pieces = 0;
    size_t bytes = 0;  // a write's total, a message's payload
    uint64_t data = 0;
    uint32_t event = 0;
    uint64_t cookie = 0;
    // Messages: the header, and `bytes` of payload from `payload` (the
    // caller's until submit() returns, so posting at once copies them
    // straight into a bounce buffer), or from `copy` once deferred.
    std::array<uint8_t, kHeaderSize> header{};
    const void *payload = nullptr;
    // Deferred inline writes' and messages' bytes.
    std::vector<uint8_t> copy;
};

class Endpoint {
public:
    /** Opens and enables an endpoint with its CQ, and posts its receives. */
    static int open(Fabric &fabric, Registrar &registrar, std::unique_ptr<Endpoint> *out, Reason *why);
    /** Receives an endpoint keeps posted per connection it serves (caps.recv_depth). */
    static size_t recv_depth();
    /**
     * Posts more receives until `connections` connections have recv_depth
     * each, or the provider's receive queue is full; they stay posted until
     * the endpoint closes. Call with the context's lock held.
     */
    int serve(size_t connections, Reason *why);
    ~Endpoint();
    Endpoint(const Endpoint &) = delete;
    Endpoint &operator=(const Endpoint &) = delete;

    fid_ep *ep() const { return ep_; }
    fid_cq *cq() const { return cq_; }
    /** The CQ's wait fd, or -1 without FI_WAIT_FD. */
    int wait_fd() const { return wait_fd_; }
    const std::vector<uint8_t> &raw_address() const { return raw_address_; }

    /**
     * Posts `op`, or queues it behind earlier ones (setting *queued: poll()
     * must then drain). OK, AGAIN (backlog full) or an error with why. Any thread.
     */
    int submit(Outgoing &&op, bool *queued, Reason *why) AFMESH_EXCLUDES(tx_mu_);
    /** poll(): posts what the backlog holds, each connection's in order, as the provider takes it; reports failed posts. */
    void drain(std::vector<std::pair<Connection *, Failure>> *failed) AFMESH_EXCLUDES(tx_mu_);
    /** Whether the backlog holds operations (poll() must come back). */
    bool has_backlog() AFMESH_EXCLUDES(tx_mu_);
    /** Whether the backlog holds operations of `conn` (it cannot be freed yet). */
    bool has_backlog_of(const Connection *conn) AFMESH_EXCLUDES(tx_mu_);
    /** close(): forgets the backlog's operations for `conn`. */
    void drop_backlog_of(Connection *conn) AFMESH_EXCLUDES(tx_mu_);

    /** What a finished transmit was for. */
    struct Finished {
        Connection *conn;
        uint32_t event;
        uint64_t cookie;
    };
    /**
     * A transmit completion (or error) for `op`: frees its resources and
     * returns what it was for, read under the lock its poster held.
     */
    Finished release(TxOp *op) AFMESH_EXCLUDES(tx_mu_);
    /**
     * A completion's op_context as one of this endpoint's transmit contexts
     * or receive slots; null when it is neither. Decided by address alone:
     * a provider may report a context that is not ours (shm 1.17 gives a
     * remote write's target the writer's context, a pointer into another
     * process).
     */
    TxOp *transmit_op(void *context);
    RecvSlot *receive_slot(void *context);
    /** Gives `slot` back to the provider after its message has been consumed. */
    void repost(RecvSlot *slot);

    /**
     * The one connection this endpoint serves; null for a listener and for a
     * shared endpoint. Guarded by the context's lock.
     */
    Connection *owner = nullptr;

private:
    /** Receive buffers registered and posted together; never moved once posted. */
    struct RecvSlab {
        std::unique_ptr<uint8_t[]> memory;
        fid_mr *mr = nullptr;
        std::vector<RecvSlot> slots;
        ~RecvSlab();
    };

    Endpoint(Fabric &fabric, Registrar &registrar) : fabric_(fabric), registrar_(registrar) {}
    int post_locked(Outgoing &op, Reason *why) AFMESH_REQUIRES(tx_mu_);
    /** Registers and posts `count` more receive buffers. */
    int add_receives(size_t count, Reason *why);

    Fabric &fabric_;
    Registrar &registrar_;
    fid_ep *ep_ = nullptr;
    fid_cq *cq_ = nullptr;
    int wait_fd_ = -1;
    std::vector<uint8_t> raw_address_;

    // Guarded by the context's lock (receives are posted and reaped in poll()).
    // Each slab as large as all before it: few to search for a completion's slot.
    std::vector<std::unique_ptr<RecvSlab>> recv_slabs_;
    size_t receives_ = 0;

    std::unique_ptr<uint8_t[]> bounce_memory_;
    fid_mr *bounce_mr_ = nullptr;
    void *bounce_desc_ = nullptr;

    Mutex tx_mu_;
    // Sized by open() and never again, so transmit_op() finds an op by its
    // address without the lock; the ops themselves are tx_mu_'s.
    std::vector<TxOp> ops_;
    TxOp *free_ops_ AFMESH_GUARDED_BY(tx_mu_) = nullptr;
    std::vector<int> free_bounces_ AFMESH_GUARDED_BY(tx_mu_);
    // Erased from the middle: a held-back connection's operations stay.
    std::list<Outgoing> backlog_ AFMESH_GUARDED_BY(tx_mu_);
};

}  // namespace afmesh::fabric
