// SPDX-License-Identifier: Apache-2.0
// One transport context (what init() creates): the chosen provider's
// fabric, domain and address vector, its endpoints, every connection, and
// the progress poll() drives.
//
// Endpoints: where the provider delivers 8 bytes of remote CQ data, one
// endpoint serves every connection: messages name their connection in the
// header, writes in the CQ data's high word (wire.h). With 4 bytes a write
// could not name its connection, so each connection end gets an endpoint of
// its own, which attributes every write it receives, plus a listener that
// only receives HELLOs. Sharing is what scales: an rxm endpoint holds
// megabytes of buffer pools. But it also shares the provider's queues, so
// it needs a provider that keeps peers apart inside an endpoint: rxm does
// (a connection per peer); shm 1.17 does not (one response queue per
// endpoint, read in order, so a peer killed with operations unanswered
// stalls the endpoint for every other peer: seen as a surviving server
// that heard nothing more from its workers after the other server was
// killed), and there endpoints stay per connection unless
// AFMESH_FABRIC_ENDPOINTS=shared asks. AFMESH_FABRIC_ENDPOINTS=per-connection
// forces the other way anywhere.
//
// Progress is manual: poll() (the core's NetRecv thread) drains each
// endpoint's backlog and reads its CQ with a bounded budget. With FI_WAIT_FD
// CQs the wait fd is an epoll set over every CQ's fd, an eventfd posting
// threads ring, and a timerfd for handshake deadlines and backlog retries;
// arm() is fi_trywait plus the module's own pending work.
//
// Locks, in the order they nest:
//   mu_           poll(), arm(), connection set-up and tear-down, and all
//                 connection bookkeeping (maps, pending events);
//   Endpoint::tx_mu_  one endpoint's transmit resources and backlog;
//   lists_mu_     failures posting threads hand to poll().
// Registrar has its own lock and nests inside all of these. The data path
// (write_imm, send) takes only tx_mu_ (and lists_mu_ on a failure).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <unordered_map>
#include <vector>

#include "afmesh/hal/transport.h"
#include "connection.h"
#include "endpoint.h"
#include "fabric.h"
#include "fabric/wire.h"
#include "hmem.h"
#include "provider.h"
#include "registration.h"
#include "thread_annotations.h"

namespace afmesh::fabric {

class Context {
public:
    /** init(): selects the provider, opens fabric, domain and AV, fills `caps`. */
    static int create(afmesh_net_caps *caps, Context **out);
    ~Context();
    Context(const Context &) = delete;
    Context &operator=(const Context &) = delete;

    int listen(void *addr, size_t *addr_len);
    int connect(const void *addr, size_t addr_len, afmesh_net_conn **out);
    int accept(afmesh_net_conn **out);
    int close(afmesh_net_conn *conn);

    int mem_register(void *ptr, size_t bytes, const afmesh_net_mem *mem, uint32_t access, afmesh_net_mr **mr,
                     afmesh_net_rkey *rkey);
    int mem_deregister(afmesh_net_mr *mr);

    int write_imm(afmesh_net_conn *conn, const void *src, size_t bytes, afmesh_net_mr *src_mr,
                  const afmesh_net_rkey *dst, uint64_t dst_offset, uint32_t imm, uint32_t flags, uint64_t cookie);
    int write_imm_v(afmesh_net_conn *conn, const afmesh_net_write_seg *segs, uint32_t count, uint64_t total,
                    uint32_t imm, uint32_t flags, uint64_t cookie);
    int send(afmesh_net_conn *conn, const void *buf, size_t len, uint32_t flags, uint64_t cookie);

    int poll(afmesh_net_event *events, int max);
    int wait_fd(int *fd) const;
    int arm();
    int describe(char *buf, size_t len);
    /** counters(): libfabric calls and this module's own system calls so far. */
    int counters(afmesh_net_counter *out, uint32_t capacity) const { return fabric_.counters.report(out, capacity); }

private:
    /** An event ready for poll(); `slot` is the receive buffer its data lives in, reposted after delivery. */
    struct Pending {
        afmesh_net_event event{};
        std::vector<uint8_t> owned;
        Endpoint *endpoint = nullptr;
        RecvSlot *slot = nullptr;
    };

    Context() = default;
    int open_fabric(afmesh_net_caps *caps, Reason *why);
    /** Shared or per-connection endpoints: AFMESH_FABRIC_ENDPOINTS and what the provider allows. */
    int choose_endpoints(Reason *why);
    int open_wait_set(Reason *why);

    /** write_imm and write_imm_v with bytes: one fi_writemsg of `count` pieces, `what` naming the call. */
    int post_write(afmesh_net_conn *conn, const afmesh_net_write_seg *segs, uint32_t count, uint64_t total,
                   uint32_t imm, uint32_t flags, uint64_t cookie, const char *what);

    // --- with mu_ held ---
    int add_endpoint(Endpoint **out, Reason *why) AFMESH_REQUIRES(mu_);
    /** The endpoint a new connection uses: the shared one (serving one more), or its own. */
    int endpoint_for_connection(Endpoint **out, Reason *why) AFMESH_REQUIRES(mu_);
    void remove_endpoint(Endpoint *endpoint) AFMESH_REQUIRES(mu_);
    void free_closed() AFMESH_REQUIRES(mu_);
    void release_held(Connection *conn) AFMESH_REQUIRES(mu_);
    int insert_address(const std::vector<uint8_t> &raw, fi_addr_t *out, Reason *why) AFMESH_REQUIRES(mu_);
    /** The AV entry for the endpoint a peer's address blob (HELLO, ACCEPT) names; false, saying why, when unusable. */
    bool insert_peer(const uint8_t *blob, size_t len, fi_addr_t *out, Reason *why) AFMESH_REQUIRES(mu_);
    Connection *new_connection(fi_addr_t peer, Reason *why) AFMESH_REQUIRES(mu_);
    /** HELLO, ACCEPT or BYE to `conn`'s peer, under the connection's ids. */
    int send_control(Connection *conn, MessageType type, const std::vector<uint8_t> &payload, Reason *why)
        AFMESH_REQUIRES(mu_);
    void fail(Connection *conn, int status, const char *reason) AFMESH_REQUIRES(mu_);
    void purge_events_of(const Connection *conn) AFMESH_REQUIRES(mu_);
    void push_event(uint32_t type, Connection *conn, uint64_t cookie = 0, uint32_t imm = 0) AFMESH_REQUIRES(mu_);
    void establish(Connection *conn, uint32_t remote_id, fi_addr_t peer) AFMESH_REQUIRES(mu_);
    void hold(Connection *conn, HeldEvent &&event) AFMESH_REQUIRES(mu_);

    // poll()'s work, with mu_ held too.
    void progress(Endpoint *endpoint) AFMESH_REQUIRES(mu_);
    void on_completion(Endpoint *endpoint, const fi_cq_data_entry &entry) AFMESH_REQUIRES(mu_);
    void on_error(Endpoint *endpoint) AFMESH_REQUIRES(mu_);
    void on_transmit(Endpoint *endpoint, TxOp *op, const Failure *failure) AFMESH_REQUIRES(mu_);
    void on_remote_write(Endpoint *endpoint, uint64_t data) AFMESH_REQUIRES(mu_);
    /** EV_IMM for `conn` now, or once the caller may see the connection. */
    void deliver_imm(Connection *conn, uint32_t imm) AFMESH_REQUIRES(mu_);
    bool on_message(Endpoint *endpoint, RecvSlot *slot, size_t len) AFMESH_REQUIRES(mu_);
    /** The connection a message received at `endpoint` is for; null when stale or not ours. */
    Connection *addressee(Endpoint *endpoint, const Header &header) AFMESH_REQUIRES(mu_);
    void on_hello(const Header &header, const uint8_t *payload, size_t len) AFMESH_REQUIRES(mu_);
    /** Answers a HELLO of another wire version with REJECT, so its connect fails at once, saying why. */
    void reject(const Header &hello, const uint8_t *payload, size_t len) AFMESH_REQUIRES(mu_);
    void on_accept(Connection *conn, const Header &header, const uint8_t *payload, size_t len) AFMESH_REQUIRES(mu_);
    void expire_handshakes() AFMESH_REQUIRES(mu_);
    void take_poster_failures() AFMESH_REQUIRES(mu_);

    // Posting threads.
    int submit(Connection *conn, Outgoing &&op, const char *what);
    // A failed connection for poll() to report.
    void queue_failure(Connection *conn, int status, const Reason &why) AFMESH_EXCLUDES(lists_mu_);
    void wake();

    Fabric fabric_;
    Selection selection_;
    HmemProbe hmem_;
    std::unique_ptr<Registrar> registrar_;
    uint64_t handshake_ns_ = 0;
    int epoll_fd_ = -1, wake_fd_ = -1, timer_fd_ = -1;

    Mutex mu_;
    // The shared one, or the listener and one per connection.
    std::vector<std::unique_ptr<Endpoint>> endpoints_ AFMESH_GUARDED_BY(mu_);
    Endpoint *shared_ AFMESH_GUARDED_BY(mu_) = nullptr;    // when shared: opened with the context
    Endpoint *listener_ AFMESH_GUARDED_BY(mu_) = nullptr;  // receives HELLOs; set by listen()
    uint32_t next_id_ AFMESH_GUARDED_BY(mu_) = 1;
    // Live (not closed) connections by id.
    std::unordered_map<uint32_t, Connection *> connections_ AFMESH_GUARDED_BY(mu_);
    std::map<std::vector<uint8_t>, fi_addr_t> addresses_ AFMESH_GUARDED_BY(mu_);  // raw address -> AV entry
    std::deque<Connection *> incoming_ AFMESH_GUARDED_BY(mu_);
    bool incoming_announced_ AFMESH_GUARDED_BY(mu_) = false;
    std::vector<Connection *> connecting_ AFMESH_GUARDED_BY(mu_);
    // A vector, not a deque: poll() takes events from the front and the
    // vector keeps its capacity, where a deque took and freed a block every
    // few events.
    std::vector<Pending> pending_ AFMESH_GUARDED_BY(mu_);
    // Reported by the last poll(): data valid until the next.
    std::vector<Pending> delivered_ AFMESH_GUARDED_BY(mu_);
    std::vector<Connection *> closed_ AFMESH_GUARDED_BY(mu_);
    std::vector<std::pair<Connection *, Failure>> scratch_failures_ AFMESH_GUARDED_BY(mu_);

    Mutex lists_mu_;
    std::vector<std::pair<Connection *, Failure>> poster_failures_ AFMESH_GUARDED_BY(lists_mu_);

    // Set by arm() before the caller sleeps; posting threads that hand poll() work then ring wake_fd_.
    std::atomic<bool> sleeping_{false};
};

}  // namespace afmesh::fabric
