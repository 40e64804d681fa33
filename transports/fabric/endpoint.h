// One RDM endpoint with its own completion queue, posted receive buffers,
// transmit operation contexts and bounce buffers for messages.
//
// Why one CQ per endpoint: a remote write's completion names its source
// address (FI_SOURCE) but not the local endpoint; with one CQ per endpoint
// the pair (local endpoint, source) identifies the connection exactly. A
// context normally has a single endpoint; it opens another only where a
// second connection between the same two endpoints would be ambiguous (a
// context connecting to itself, or to one peer endpoint twice).
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
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "connection.h"
#include "errors.h"
#include "fabric.h"
#include "registration.h"

namespace afmesh::fabric {

/** Every operation context starts with fi_context2 (FI_CONTEXT / FI_CONTEXT2 modes). */
struct OpContext {
    fi_context2 fi;
    enum class Kind : uint8_t { kRecv, kTransmit } kind;
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

    /** A transmit completion (or error) for `op`: frees its resources. */
    void release(TxOp *op);
    /** Gives `slot` back to the provider after its message has been consumed. */
    void repost(RecvSlot *slot);

    // --- guarded by the context's lock ---
    /** Connections by peer address: attributes remote writes (FI_SOURCE). */
    std::unordered_map<fi_addr_t, Connection *> by_peer;
    /** Peers this endpoint has dialled: never dialled again, so a late write of an old connection never lands in a new one. */
    std::unordered_set<fi_addr_t> dialled;

private:
    Endpoint(Fabric &fabric, Registrar &registrar) : fabric_(fabric), registrar_(registrar) {}
    int post_locked(Outgoing &op, Reason *why);

    Fabric &fabric_;
    Registrar &registrar_;
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
