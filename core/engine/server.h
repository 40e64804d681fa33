// SPDX-License-Identifier: Apache-2.0
// The server (FFN) side of the AF data path: receive slices, get_batch,
// respond.
//
// A request from a worker is complete when its REQUEST message and one
// immediate per write it announces (a push is one write, or several when
// the worker sends a staged push chunk by chunk) have arrived, in any order;
// a REQUEST that rode on a write into this server's mailbox (mailbox.h)
// arrives with that write, which it does not count. Its push tensors are
// views of the receive slices; responding writes each answer straight into
// the worker's pull buffer, then sends a RESPONSE with the real lengths,
// which also hands the slices back to the worker (credit). The RESPONSE to
// a REQUEST that came through the mailbox rides on the last answer's write
// into the worker's mailbox entry of the same number.
//
// Device memory the transport cannot register is staged (staging.h): a
// device receive buffer gets a pinned twin that the workers write into, and
// get_batch copies each request's pushes to the device before handing it
// out; device response tensors are copied to pinned memory chunk by chunk,
// each chunk written while the next is copied, and the RESPONSE says how
// many writes the answers took.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "afmesh/afmesh.h"
#include "engine/wire.h"
#include "engine_context.h"
#include "mailbox.h"
#include "outbox.h"
#include "request_pool.h"

namespace afmesh {

class ServerEngine {
public:
    ServerEngine(EngineContext ctx, int32_t rank, int32_t num_workers);
    ~ServerEngine();

    int32_t rank() const { return rank_; }

    // The user's calls: each takes ctx.mu itself.
    Status register_recv_buffer(void *ptr, uint64_t bytes, uint32_t kind, int device, const int32_t *worker_ranks,
                                const uint64_t *keys, size_t count) AFMESH_EXCLUDES(ctx_.mu);
    Status get_batch(afmesh_batch_mode mode, int timeout_ms, afmesh_request **requests, size_t capacity,
                     size_t *count) AFMESH_EXCLUDES(ctx_.mu);
    Status respond(afmesh_request *request, const afmesh_tensor *tensors, size_t count) AFMESH_EXCLUDES(ctx_.mu);
    Status respond_vec(const afmesh_tensor &buffer, const int64_t *counts, afmesh_request *const *requests,
                       size_t num_requests) AFMESH_EXCLUDES(ctx_.mu);

    /** ctx.mu, for the node to say that its lock is this one (Node::assert_engines_locked). */
    Mutex &mu() const AFMESH_RETURN_CAPABILITY(ctx_.mu) { return ctx_.mu; }

    // Called by the node, with ctx.mu held.
    /** A worker's IDENT arrived on `conn`. */
    Status attach_worker(const wire::Ident &ident, afmesh_net_conn *conn) AFMESH_REQUIRES(ctx_.mu);
    void on_message(int32_t worker, const void *data, size_t len) AFMESH_REQUIRES(ctx_.mu);
    void on_imm(int32_t worker, uint32_t imm) AFMESH_REQUIRES(ctx_.mu);
    void on_write_done(int32_t worker, uint64_t cookie) AFMESH_REQUIRES(ctx_.mu);
    void fail_worker(int32_t worker, const Status &why) AFMESH_REQUIRES(ctx_.mu);
    /**
     * `worker` has a new incarnation, which will connect: whatever was left
     * of the old one fails (if nothing had failed it yet) and its requests
     * not yet handed out are dropped; those handed out are answered with
     * PEER_FAILED. Its slices stay, advertised again once it attaches, and
     * get_batch over all workers waits for it again.
     */
    void replace_worker(int32_t worker) AFMESH_REQUIRES(ctx_.mu);
    /** Retries work held back by a full send queue; true when none is held back any more. */
    bool flush() AFMESH_REQUIRES(ctx_.mu);
    bool all_workers_attached() const AFMESH_REQUIRES(ctx_.mu);

private:
    struct Slice {
        void *ptr = nullptr;  // where workers write
        uint64_t capacity = 0;
        const Registration *reg = nullptr;
        void *device_ptr = nullptr;  // staged: the user's device slice that ptr is copied to
        uint32_t device_kind = AFMESH_MEM_HOST;
        int device = -1;
        bool owned = false;     // allocated by a rendezvous (freed by us), not the user's
        uint32_t where = AFMESH_ALLOC_DEVICE;  // of an owned slice
        uint32_t readers = 0;   // requests handed out and not yet answered
    };
    // A slot's REQUEST and immediates as they arrive. Kept per slot and
    // reset, not erased: the request's vectors keep their capacity.
    struct Inbound {
        uint32_t imms = 0;
        bool have_request = false;
        wire::Request request;
        int32_t entry = -1;  // of the mailbox, when the REQUEST came through it

        void reset() {
            imms = 0;
            have_request = false;
            entry = -1;
        }
    };
    struct Worker {
        explicit Worker(PeerCounters &c) : counters(c) {}
        PeerCounters &counters;
        std::unique_ptr<Outbox> outbox;
        std::atomic<bool> failed{false};  // also read by respond() while it waits, without the lock
        std::atomic<uint32_t> incarnation{0};  // replacements so far; read by respond() while it waits
        bool failure_reported = false;    // by get_batch in ANY mode
        Status failure;
        std::unordered_map<uint64_t, Slice> slices;
        std::vector<Inbound> inbound;  // by slot, grown to the highest seen (below kMaxOpsInFlight)
        std::deque<afmesh_request *> ready;
        uint64_t responses_posted = 0;                 // cookie of the last signalled response write
        std::atomic<uint64_t> responses_completed{0};  // highest cookie completed locally
        std::unique_ptr<Mailbox> mailbox;     // where the worker writes REQUESTs; null without one
        wire::MailboxAddress worker_mailbox;  // where RESPONSEs to them go
    };

    void advertise(int32_t worker, uint64_t key, const Slice &slice) AFMESH_REQUIRES(ctx_.mu);
    /** OK while `request`'s worker incarnation is alive: PEER_FAILED once it failed or was replaced. */
    Status still_there(const afmesh_request &request, const Worker &worker) const AFMESH_REQUIRES(ctx_.mu);
    void handle_alloc(int32_t worker, const wire::AllocReq &req) AFMESH_REQUIRES(ctx_.mu);
    /** The application's first get_batch: answers the ALLOC_REQs held until then. */
    void begin_serving() AFMESH_REQUIRES(ctx_.mu);
    /**
     * `req` (decoded_, swapped into the slot's Inbound); `entry`: of the
     * mailbox the REQUEST came in, or -1 for a message.
     */
    void handle_request(int32_t worker, wire::Request &req, int32_t entry) AFMESH_REQUIRES(ctx_.mu);
    /** The slot's Inbound, made if need be; null (and the worker failed) for a slot no worker uses. */
    Inbound *inbound_slot(int32_t worker, uint16_t slot) AFMESH_REQUIRES(ctx_.mu);
    /** A carrier immediate: the REQUEST it put into this server's mailbox. */
    void on_carrier(int32_t worker, uint32_t imm) AFMESH_REQUIRES(ctx_.mu);
    void complete_if_ready(int32_t worker, uint16_t slot) AFMESH_REQUIRES(ctx_.mu);
    /** Stamps responded_ns and encodes the RESPONSE into scratch_. */
    void encode_response(wire::Response &response) AFMESH_REQUIRES(ctx_.mu);
    /** Stamps responded_ns and sends the RESPONSE. */
    Status send_response(Worker &worker, wire::Response &response) AFMESH_REQUIRES(ctx_.mu);
    /** Whether a RESPONSE of `count` answers to `request` can ride on its last answer's write. */
    bool carries(const afmesh_request &request, size_t count) const;
    /**
     * Sends the RESPONSE that ends an answer, with ctx.mu held: as a message,
     * or with `last` (the last answer's last piece, not yet posted; signalled
     * with `cookie`) into the worker's mailbox. Failing to, fails the worker.
     */
    Status conclude(const afmesh_request &request, Worker &worker, wire::Response &response,
                    const afmesh_net_write_seg *last = nullptr, uint64_t cookie = 0) AFMESH_REQUIRES(ctx_.mu);
    /** Whether the answer travels inside the RESPONSE: the worker takes it so, and it is small host memory. */
    bool eager_answer(const afmesh_request &request, const afmesh_tensor *tensors, size_t count,
                      const std::vector<Staging::Buffer> &buffers) const;
    /** Answers a request the worker aborted: empty answers, no writes. */
    void answer_aborted(int32_t worker, const wire::Request &request) AFMESH_REQUIRES(ctx_.mu);
    /** Answers a request with no answer at all (failed: the worker's push-pull fails; the slices come back). */
    void answer_empty(int32_t worker, const wire::Request &request) AFMESH_REQUIRES(ctx_.mu);
    /** Copies an eager push's bytes into its receive slice. */
    Status place_eager(const Slice &slice, const uint8_t *bytes, uint64_t count) AFMESH_REQUIRES(ctx_.mu);
    void protocol_error(int32_t worker, const std::string &what) AFMESH_REQUIRES(ctx_.mu);
    void free_slice(Slice &slice);
    /** Reads only the atomics: a wait's predicate, without the lock. */
    bool batch_ready(afmesh_batch_mode mode) const;
    /** Pinned buffers for response tensors the transport cannot register; `buffers` stays empty when none is. */
    Status acquire_staging(const afmesh_tensor *tensors, size_t count, std::vector<Staging::Buffer> *buffers)
        AFMESH_EXCLUDES(ctx_.mu);
    /** Checks a response against its request and finds each tensor's registration (its pinned buffer's, if staged). */
    Status check_response(afmesh_request *request, const afmesh_tensor *tensors, size_t count,
                          const std::vector<Staging::Buffer> &buffers) AFMESH_REQUIRES(ctx_.mu);
    /** The request's RESPONSE, its fields but the answers' own set. */
    wire::Response &start_response(afmesh_request &request, const afmesh_tensor *tensors, size_t count);
    /** Sends a RESPONSE with the answers inside it (eager_answer() said they may go so). */
    Status post_eager(afmesh_request &request, Worker &worker, const afmesh_tensor *tensors, size_t count)
        AFMESH_REQUIRES(ctx_.mu);
    /**
     * Writes the answers into the worker's pull buffers, then sends the
     * RESPONSE; takes the lock itself, between the staging copies. Not for
     * eager answers (post_eager).
     * *cookie: of the last signalled write (0: none).
     */
    Status post_response(afmesh_request &request, Worker &worker, const afmesh_tensor *tensors, size_t count,
                         const std::vector<Staging::Buffer> &buffers, uint64_t *cookie) AFMESH_EXCLUDES(ctx_.mu);
    /** post_response, then waits until the answers' buffers may be reused. */
    Status answer(afmesh_request &request, Worker &worker, const afmesh_tensor *tensors, size_t count,
                  const std::vector<Staging::Buffer> &buffers) AFMESH_EXCLUDES(ctx_.mu);
    void update_ready_counters() AFMESH_REQUIRES(ctx_.mu);
    /** Returns handed-out requests to the front of their workers' queues (get_batch could not finish). */
    void put_back(afmesh_request *const *requests, size_t count) AFMESH_EXCLUDES(ctx_.mu);

    EngineContext ctx_;
    const int32_t rank_;
    const size_t num_workers_;  // workers_.size(), for the checks and waits without the lock
    // respond() keeps the Worker it looked up under the lock: it reads its
    // atomics without the lock, and post_response the rest under it again.
    std::vector<std::unique_ptr<Worker>> workers_ AFMESH_GUARDED_BY(ctx_.mu);
    RequestPool requests_ AFMESH_GUARDED_BY(ctx_.mu);
    wire::Request decoded_ AFMESH_GUARDED_BY(ctx_.mu);  // the REQUEST being taken in
    // A worker's ALLOC_REQ (the first push of a key without a registered
    // buffer) is answered only once the application has begun to serve (its
    // first get_batch): the receive buffers it registers before then are the
    // ones used, also on a replacement server whose workers push as soon as
    // its handshake completes. Until then they wait here.
    struct HeldAlloc {
        int32_t worker;
        uint32_t incarnation;  // the worker's when it asked: a replaced worker's request is dropped
        wire::AllocReq req;
    };
    bool serving_ AFMESH_GUARDED_BY(ctx_.mu) = false;
    std::vector<HeldAlloc> held_allocs_ AFMESH_GUARDED_BY(ctx_.mu);
    std::vector<uint8_t> scratch_ AFMESH_GUARDED_BY(ctx_.mu);
    std::vector<uint8_t> eager_ AFMESH_GUARDED_BY(ctx_.mu);  // an eager RESPONSE's answers, gathered; reused
    // Read by waiters without the lock.
    std::atomic<int> workers_with_requests_{0};
    std::atomic<int> failed_workers_{0};
    std::atomic<int> unreported_failures_{0};
};

}  // namespace afmesh
