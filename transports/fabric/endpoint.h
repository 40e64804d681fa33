// One RDM endpoint with its own completion queue, posted receive buffers,
// transmit operation contexts and bounce buffers for messages.
//
// Why one endpoint (and CQ) per connection end: a remote write's completion
// carries the immediate but, in practice, not a trustworthy source: with
// libfabric 1.17, tcp;ofi_rxm reports source 0 for every remote write with
// CQ data, whatever FI_SOURCE promises, and shm reports 0 for a peer not yet
// in the AV. An endpoint that serves exactly one connection attributes every
// write it receives without asking the provider who sent it. Besides those,
// a context has one listening endpoint, which only receives HELLOs.
//
// Transmit path (any thread, under tx_mu_): an operation is posted at once
// when the provider takes it, else kept in an ordered backlog that poll()
// drains; only a full backlog makes the caller see AGAIN. -FI_EAGAIN is
// therefore never spun on.
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_endpoint.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "connection.h"
#include "errors.h"
#include "fabric.h"
#include "registration.h"

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
    uint8_t *data = nullptr;  // kMessageBufferSize bytes inside the endpoint's receive slab
};

struct TxOp : OpContext {
    Connection *conn = nullptr;  // null for a control message of an already closed connection
    uint32_t event = 0;          // EV_WRITE_DONE / EV_SEND_DONE when signalled, else 0
    uint64_t cookie = 0;
    int bounce = -1;  // message buffer held until completion
    TxOp *next_free = nullptr;
};

/** An operation to post, or waiting in the backlog. */
struct Outgoing {
    bool is_write = false;
    Connection *conn = nullptr;
    fi_addr_t dest = FI_ADDR_UNSPEC;
    // Writes: the source (inside `copy` when it was copied), target and immediate.
    const void *src = nullptr;
    size_t bytes = 0;
    void *desc = nullptr;
    uint64_t remote_addr = 0, key = 0;
    uint32_t imm = 0;
    uint32_t event = 0;
    uint64_t cookie = 0;
    // Messages: header and payload. Inline writes: their bytes, once deferred.
    std::vector<uint8_t> copy;
};

class Endpoint {
public:
    /** Opens and enables an endpoint with its CQ, and posts its receives. */
    static int open(Fabric &fabric, Registrar &registrar, std::unique_ptr<Endpoint> *out, Reason *why);
    /** Receives each endpoint keeps posted (caps.recv_depth). */
    static size_t recv_depth();
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
    int submit(Outgoing &&op, bool *queued, Reason *why);
    /** poll(): posts what the backlog holds until the provider pushes back; reports failed posts. */
    void drain(std::vector<std::pair<Connection *, Failure>> *failed);
    /** Whether the backlog holds operations (poll() must come back). */
    bool has_backlog();
    /** close(): forgets the backlog's operations for `conn`. */
    void drop_backlog_of(const Connection *conn);

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
    Finished release(TxOp *op);
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

    /** The connection this endpoint serves; null for the listener. Guarded by the context's lock. */
    Connection *owner = nullptr;

private:
    explicit Endpoint(Fabric &fabric) : fabric_(fabric) {}
    int post_locked(Outgoing &op, Reason *why);

    Fabric &fabric_;
    fid_ep *ep_ = nullptr;
    fid_cq *cq_ = nullptr;
    int wait_fd_ = -1;
    std::vector<uint8_t> raw_address_;

    std::unique_ptr<uint8_t[]> recv_memory_, bounce_memory_;
    fid_mr *recv_mr_ = nullptr, *bounce_mr_ = nullptr;
    void *recv_desc_ = nullptr, *bounce_desc_ = nullptr;
    std::vector<RecvSlot> recv_slots_;

    std::mutex tx_mu_;
    // --- guarded by tx_mu_ ---
    std::vector<TxOp> ops_;
    TxOp *free_ops_ = nullptr;
    std::vector<int> free_bounces_;
    std::deque<Outgoing> backlog_;
};

}  // namespace afmesh::fabric
