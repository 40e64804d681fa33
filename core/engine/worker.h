// SPDX-License-Identifier: Apache-2.0
// The worker (attention) side of the AF data path: push_pull, wait, traces.
//
// A push-pull is split into one part per server it involves. Each part
// writes its push tensors into the server's advertised receive slices (one
// write_imm each), then sends one REQUEST carrying the tensors' metadata and
// where to write the answers. It completes when that server's RESPONSE and
// one immediate per answered pull have arrived, in any order. Small host
// tensors (AFMESH_EAGER_BYTES in all) skip the writes: they travel inside
// the REQUEST, and the answers inside the RESPONSE where the pull buffers
// are host memory, so a small push-pull is one transport operation each way.
// Where the transport gathers writes, the REQUEST of a larger push-pull
// rides on its last tensor write into the server's mailbox, and the server
// answers into the worker's (mailbox.h): one operation each way too. A slice is
// "busy" from the write until the response: a later push of the same key to
// the same server waits (credit), so the server never sees a slice
// overwritten while it still reads it.
//
// Device tensors the transport cannot register are staged (staging.h): a
// push is copied into pinned host memory before it is posted, behind the
// caller's work on its stream; a pull is received into pinned memory and
// copied to the device before wait/test report success (or, after
// stream_wait, before the stream is released).
//
// A push-pull given a stream never blocks its caller on the device: the
// staging copies are queued on that stream chunk by chunk, each followed by
// an event (a "gate"). A part claims its slices as soon as they are free,
// then posts each chunk once its gate has opened: the progress thread polls
// the gates in stream order (open_gates), so chunk k is on the wire while
// the device still copies chunk k+1. The REQUEST goes last and says how many
// writes the pushes took. Device tensors the transport reads directly wait
// for the first gate. If the stream fails part-way, the REQUEST goes out
// marked aborted, counting only the writes made: the server answers it
// empty, so the slices come back and nothing half-written is handed out.
//
// A push-pull started many times with the same description (every layer of
// every step, in AF) can be prepared once (afmesh_prepare_push_pull): the
// op build_op() makes of it, with its REQUESTs' tensor metadata encoded, is
// kept and copied into a slot at each start, so a start skips checking the
// arguments, finding the registrations, grouping the tensors by server and
// encoding their metadata. Registrations it holds are checked by the
// registry's epoch: one deregistered since makes the next start build afresh.
//
// Where it lives: the table of ops in flight and their handles in
// inflight_table.h; staging, the gates and stream_wait's flags in
// worker_stream.cpp (the flags: stream_flags.h); prepared push-pulls in
// worker_prepared.cpp; the rest in worker.cpp.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "afmesh/afmesh.h"
#include "engine/wire.h"
#include "engine_context.h"
#include "inflight_table.h"
#include "mailbox.h"
#include "outbox.h"
#include "stream_flags.h"

namespace afmesh {

class WorkerEngine {
public:
    WorkerEngine(EngineContext ctx, int32_t rank, int32_t num_servers);
    ~WorkerEngine();
    WorkerEngine(const WorkerEngine &) = delete;
    WorkerEngine &operator=(const WorkerEngine &) = delete;

    int32_t rank() const { return rank_; }

    // The user's calls: each takes ctx.mu itself.
    /** `stream`: the device stream the pushed device tensors are produced on (null: none to wait for). */
    Status push_pull(const afmesh_push *push, size_t num_push, const afmesh_pull *pull, size_t num_pull,
                     void *stream, afmesh_handle *handle) AFMESH_EXCLUDES(ctx_.mu);
    /** A push-pull described once, started many times (worker_prepared.cpp); the C API's afmesh_prepared. */
    struct Prepared;
    /**
     * Checks and keeps a push-pull's description (the arrays may go after
     * the call); the engine owns it until release_prepared() or its end.
     */
    Status prepare(const afmesh_push *push, size_t num_push, const afmesh_pull *pull, size_t num_pull,
                   Prepared **out) AFMESH_EXCLUDES(ctx_.mu);
    /** Starts a push-pull as `prepared` describes it; `stream` as in push_pull(). */
    Status start(Prepared &prepared, void *stream, afmesh_handle *handle) AFMESH_EXCLUDES(ctx_.mu);
    /** Frees a prepared push-pull of this engine; NOT_FOUND for anything else. */
    Status release_prepared(Prepared *prepared) AFMESH_EXCLUDES(ctx_.mu);
    /** Makes `stream` wait until the push-pull has ended, with the device module's flags. */
    Status stream_wait(afmesh_handle handle, void *stream) AFMESH_EXCLUDES(ctx_.mu);
    Status wait(afmesh_handle handle, int timeout_ms) AFMESH_EXCLUDES(ctx_.mu);
    Status test(afmesh_handle handle) AFMESH_EXCLUDES(ctx_.mu);
    Status pull_bytes(afmesh_handle handle, size_t index, uint64_t *bytes) AFMESH_EXCLUDES(ctx_.mu);
    Status trace(afmesh_handle handle, afmesh_trace *traces, size_t capacity, size_t *count) AFMESH_EXCLUDES(ctx_.mu);

    /** ctx.mu, for the node to say that its lock is this one (Node::assert_engines_locked). */
    Mutex &mu() const AFMESH_RETURN_CAPABILITY(ctx_.mu) { return ctx_.mu; }

    // Called by the node, with ctx.mu held.
    void attach_server(int32_t server, afmesh_net_conn *conn) AFMESH_REQUIRES(ctx_.mu);
    /** The handshake with `server` has completed: push-pulls may use it. */
    void server_connected(int32_t server) AFMESH_REQUIRES(ctx_.mu) { servers_[server].connecting = false; }
    /** This worker's mailbox for `server`'s RESPONSEs, for the IDENT (entries 0: none). */
    wire::MailboxAddress mailbox_for(int32_t server) const AFMESH_REQUIRES(ctx_.mu);
    void on_message(int32_t server, const void *data, size_t len) AFMESH_REQUIRES(ctx_.mu);
    void on_imm(int32_t server, uint32_t imm) AFMESH_REQUIRES(ctx_.mu);
    void fail_server(int32_t server, const Status &why) AFMESH_REQUIRES(ctx_.mu);
    /**
     * `server` has a new incarnation: whatever was left of the old one fails
     * (if nothing had failed it yet) and is forgotten (its slices, mailbox
     * and parked work). Push-pulls to it resume once the node has attached
     * a connection to the new one and its handshake has completed.
     */
    void replace_server(int32_t server) AFMESH_REQUIRES(ctx_.mu);
    /** Retries work held back by a full send queue; true when none is held back any more. */
    bool flush() AFMESH_REQUIRES(ctx_.mu);

    /**
     * Posts the parts of ops whose stream work has finished; fails ops whose
     * stream failed. Called by the progress thread after each poll, without
     * ctx.mu; true while some op still waits for its stream.
     */
    bool open_gates() AFMESH_EXCLUDES(ctx_.mu);

private:
    struct PushSpec {
        uint64_t key;
        afmesh_tensor tensor;  // for a staged push: the pinned copy
        afmesh_net_mr *mr;
        Staging::Buffer staged;
        uint64_t ready_bytes;  // produced by the stream so far: bytes [0, ready_bytes) may be sent
    };
    /** Stream work a push waits for: once `event` has completed, push `push` is ready up to `ready_bytes`. */
    struct Gate {
        void *event;
        uint32_t push;  // kEveryDirectPush: opens the device pushes the transport reads directly
        uint64_t ready_bytes;
    };
    static constexpr uint32_t kEveryDirectPush = UINT32_MAX;
    struct PullSpec {
        uint64_t key;
        afmesh_tensor tensor;
        int32_t server;
        const Registration *reg;
        uint64_t received_bytes;
        Staging::Buffer staged;       // a staged pull: tensor.data is staged.ptr,
        void *device_data = nullptr;  // and the answer is copied here
    };
    struct Part {
        int32_t server = -1;
        std::vector<uint32_t> pushes;  // indexes into Op::pushes
        std::vector<uint32_t> pulls;   // indexes into Op::pulls
        bool claimed = false;          // its slices are reserved for it; posting has begun
        size_t next_push = 0;          // pushes before this one are posted whole,
        uint64_t next_offset = 0;      // and this one up to here
        uint32_t writes = 0;           // posted so far
        size_t request_bytes = 0;    // the REQUEST's metadata
        int32_t entry = -1;          // the mailbox entry its REQUEST and RESPONSE ride in; -1: sent as messages
        bool eager = false;          // the pushes travel inside the REQUEST (decided when claimed)
        bool eager_answers = false;  // the REQUEST offers to take the answers inside the RESPONSE
        bool request_sent = false, aborted = false, response_arrived = false, done = false;
        bool answer_failed = false;  // the RESPONSE said the server could not send its whole answer
        bool lost = false;           // its server failed before answering: nothing of it is accepted any more
        uint32_t imms = 0;
        afmesh_trace trace{};
        // A prepared push-pull's: its REQUEST's tensor metadata, encoded once
        // (wire::encode_tensors). Empty: encoded at each post.
        std::vector<uint8_t> encoded_tensors;
        uint32_t answer_writes = 0;       // announced by the RESPONSE
        uint32_t most_answer_writes = 0;  // what the pull buffers allow, before the RESPONSE says
        /** Response immediates: none for an aborted request (the server writes nothing), else as announced. */
        uint32_t answers_expected() const {
            return aborted ? 0 : response_arrived ? answer_writes : most_answer_writes;
        }
    };
    enum : int { kPending = 0, kDone = 1, kFailed = 2 };
    struct Op {
        bool in_use = false;   // issued and not yet waited
        bool retired = false;  // waited: results stay readable until the slot is reused
        uint32_t sequence = 0;  // handle = sequence << 16 | slot
        uint64_t issued_ns = 0;  // when push_pull() issued it: its completion time is counted from here
        std::vector<PushSpec> pushes;
        std::vector<PullSpec> pulls;
        std::vector<Part> parts;
        std::atomic<int> state{kPending};
        Status error;  // first failure; the op ends once no server still owes it an answer
        bool staged = false;                 // some tensor goes through staging buffers
        std::atomic<bool> delivered{false};  // staged pulls copied to the device
        bool flag_armed = false;             // a stream waits on flags_[slot] for this op
        std::vector<Gate> gates;             // in stream order; open_gates() opens them
        size_t next_gate = 0;                // gates before this one have opened
    };
    struct RemoteSlice {
        bool known = false;
        bool alloc_pending = false;
        uint64_t requested_bytes = 0;  // of the pending rendezvous
        uint64_t refused_bytes = 0;    // asked for this much and the server could not grow the slice
        wire::Advert advert;
        int32_t busy_slot = -1;  // the op whose push occupies it
    };
    struct Parked {
        uint16_t slot;
        uint32_t part;
        uint32_t sequence;  // guards against the slot having been reused
    };
    struct Server {
        std::unique_ptr<Outbox> outbox;
        bool connecting = true;  // dialled, its handshake not complete: no push-pull may use it yet
        bool failed = false;
        Status failure;
        std::unordered_map<uint64_t, RemoteSlice> slices;
        std::deque<Parked> parked;  // parts waiting for slices, in posting order
        std::unique_ptr<Mailbox> mailbox;     // where this server writes RESPONSEs; null without one
        wire::MailboxAddress server_mailbox;  // where REQUESTs go, once the server's MAILBOX has come
        MailboxEntries entries;               // free in both
    };

    // Without ctx.mu: validate(), and the device work that may block: stage(),
    // stage_in_chunks(), release_gates(); deliver() either way. The rest with it.
    Status validate(const afmesh_push *push, size_t num_push, const afmesh_pull *pull, size_t num_pull) const;

    // Push-pulls on a device stream: staging behind the stream, the gates
    // that open as its work completes, and stream_wait's flags
    // (worker_stream.cpp).
    /**
     * Stages the device tensors the transport cannot register: (*staged)[i]
     * for push i, [num_push + j] for pull j; left empty when nothing is staged.
     * Pushes are copied behind `stream`'s work, in chunks each followed by a
     * gate, or at once without a stream. Device pushes the transport reads
     * directly get one gate behind the stream's work when no chunk has one.
     * Called without the lock.
     */
    Status stage(const afmesh_push *push, size_t num_push, const afmesh_pull *pull, size_t num_pull, void *stream,
                 std::vector<Staging::Buffer> *staged, std::vector<Gate> *gates) AFMESH_EXCLUDES(ctx_.mu);
    /** Queues the copy of a push into its staging buffer on `stream`, one gate per chunk. */
    Status stage_in_chunks(uint32_t push, const afmesh_tensor &tensor, const Staging::Buffer &buffer, void *stream,
                           std::vector<Gate> *gates);
    /** Gives back events of gates that have not opened; `wait`: first waits for their stream work. */
    void release_gates(std::vector<Gate> &gates, bool wait) AFMESH_EXCLUDES(ctx_.mu);
    /** Holds back the device pushes of the op in `slot` (being issued, with gates) until open_gates() opens them. */
    void watch_gates(uint16_t slot) AFMESH_REQUIRES(ctx_.mu);
    /** Gives back an opened gate's event and lets its push be sent further; `first`: the op's first gate. */
    void open_gate(Op &op, Gate &gate, bool first) AFMESH_REQUIRES(ctx_.mu);
    /** Lets a stream that stream_wait()ed for the settled op in `slot` proceed. */
    void release_stream(uint16_t slot) AFMESH_REQUIRES(ctx_.mu);

    /** Makes the op built in `slot` (ops_.next_free()) live under a new handle and posts what it can; with ctx.mu. */
    void issue(uint16_t slot, std::vector<Gate> &&gates, afmesh_handle *handle) AFMESH_REQUIRES(ctx_.mu);
    /** Copies staged pulls to the device, once. */
    Status deliver(Op &op);
    void release_staging(Op &op) AFMESH_REQUIRES(ctx_.mu);
    /** Refuses a push-pull when every slot is in flight. */
    Status room_for_op() const AFMESH_REQUIRES(ctx_.mu);
    /**
     * Builds the op a push-pull's (validated) arguments describe: its tensors
     * with their registrations, and its parts, one per server. Fails on what
     * the description itself gets wrong; servers_ready() checks the servers.
     */
    Status build_op(Op &op, const afmesh_push *push, size_t num_push, const afmesh_pull *pull, size_t num_pull,
                    const std::vector<Staging::Buffer> &staged) AFMESH_REQUIRES(ctx_.mu);
    /** Whether every server the op involves can take it now: neither failed nor still in its handshake. */
    Status servers_ready(const Op &op) const AFMESH_REQUIRES(ctx_.mu);
    /** (Re)builds a prepared push-pull's op, with its parts' tensor metadata encoded. */
    Status build_prepared(Prepared &prepared) AFMESH_REQUIRES(ctx_.mu);
    /**
     * Claims the part's slices and posts what is ready; false when it must
     * wait for a slice (credit or rendezvous). `now_ns`: the caller's clock
     * reading, the part's trace.posted (one read per batch of parts, not
     * one per part on the hot path).
     */
    bool advance(uint16_t slot, Part &part, uint64_t now_ns) AFMESH_REQUIRES(ctx_.mu);
    /**
     * Posts what the stream has produced of a claimed part's pushes, then
     * its REQUEST once every byte is posted, or at once (aborted) when the op failed.
     */
    void post_ready(uint16_t slot, Part &part) AFMESH_REQUIRES(ctx_.mu);
    /** Whether the part's pushes may travel inside its REQUEST: few bytes of host memory, all ready. */
    bool eager_pushes(const Op &op, const Part &part) const AFMESH_REQUIRES(ctx_.mu);
    /** Whether every pull buffer of the part is host memory (staged ones are), so answers may come eagerly. */
    bool host_pulls(const Op &op, const Part &part) const AFMESH_REQUIRES(ctx_.mu);
    /** The metadata of the part's tensors, into request.pushes and request.pulls. */
    static void describe_tensors(const Op &op, const Part &part, wire::Request *request);
    /** Encodes the part's REQUEST into scratch_. */
    void encode_request(uint16_t slot, const Part &part) AFMESH_REQUIRES(ctx_.mu);
    /** Copies an eager RESPONSE's answers into the part's pull buffers. */
    void take_eager_answers(Op &op, const Part &part, const wire::Response &response) AFMESH_REQUIRES(ctx_.mu);
    /**
     * Sends the part's REQUEST: with `last`, the last push's last piece (not
     * yet posted; null when there is none), into the server's mailbox where
     * an entry is free, else as a message after that piece.
     */
    void send_request(uint16_t slot, Part &part, const afmesh_net_write_seg *last) AFMESH_REQUIRES(ctx_.mu);
    /** A RESPONSE, sent (entry -1) or written into mailbox entry `entry` by a carrier. */
    void on_response(int32_t server, const wire::Response &response, int32_t entry) AFMESH_REQUIRES(ctx_.mu);
    /** A carrier immediate: the RESPONSE it put into this worker's mailbox. */
    void on_carrier(int32_t server, uint32_t imm) AFMESH_REQUIRES(ctx_.mu);
    /** True when every slice the part needs is advertised, large enough and free. */
    bool slices_ready(uint16_t slot, const Part &part) AFMESH_REQUIRES(ctx_.mu);
    void advance_parked(int32_t server) AFMESH_REQUIRES(ctx_.mu);
    void complete_part_if_done(uint16_t slot, Part &part) AFMESH_REQUIRES(ctx_.mu);
    void fail_op(uint16_t slot, const Status &why) AFMESH_REQUIRES(ctx_.mu);
    /** Ends the op (done or failed) once every part is answered, failed or will never be posted. */
    void finish_if_settled(uint16_t slot) AFMESH_REQUIRES(ctx_.mu);
    void protocol_error(int32_t server, const std::string &what) AFMESH_REQUIRES(ctx_.mu);
    /** Counts how a settling op ended, and each of its parts. */
    void count_outcome(const Op &op) AFMESH_REQUIRES(ctx_.mu);

    EngineContext ctx_;
    const int32_t rank_;
    const int32_t num_servers_;  // servers_.size(), for validate() without the lock
    std::vector<Server> servers_ AFMESH_GUARDED_BY(ctx_.mu);
    // An op reached through a handle's slot (ops_.find) is read without the
    // lock once settled: the thread that waits for it owns it then.
    InflightTable<Op> ops_ AFMESH_GUARDED_BY(ctx_.mu);
    std::vector<uint8_t> scratch_ AFMESH_GUARDED_BY(ctx_.mu);  // message encoding buffer, reused
    std::vector<int32_t> part_of_ AFMESH_GUARDED_BY(ctx_.mu);  // build_op: each server's part, or -1; reused
    std::vector<uint8_t> eager_ AFMESH_GUARDED_BY(ctx_.mu);    // an eager REQUEST's pushes, gathered; reused
    wire::Response decoded_ AFMESH_GUARDED_BY(ctx_.mu);        // the RESPONSE being taken in; reused
    // REQUEST being encoded, reused so its vectors keep their capacity.
    wire::Request request_ AFMESH_GUARDED_BY(ctx_.mu);
    StreamFlags flags_ AFMESH_GUARDED_BY(ctx_.mu);  // per slot, made by the first stream_wait on it
    std::vector<Parked> gated_ AFMESH_GUARDED_BY(ctx_.mu);  // ops (slot, sequence) whose gate open_gates() watches
    // The push-pulls prepared here and not yet freed, owned: what
    // release_prepared() may free, and what the engine's end frees.
    std::unordered_map<const Prepared *, std::unique_ptr<Prepared>> prepared_ AFMESH_GUARDED_BY(ctx_.mu);
    std::atomic<size_t> num_gated_{0};  // gated_.size(), read without the lock
};

/**
 * The caller's description, owned, and the op build_op() made of it, copied
 * into a slot at each start. The op is valid while `built` and the
 * registry's epoch is still `epoch`; start() rebuilds it, with ctx.mu held.
 */
struct WorkerEngine::Prepared {
    const WorkerEngine *owner = nullptr;
    std::vector<afmesh_push> push;  // each one's `servers` points into `servers`
    std::vector<int32_t> servers;
    std::vector<afmesh_pull> pull;
    /** Every tensor is host memory: a start without a stream copies `op` (else it is a push_pull()). */
    bool host = true;
    bool built = false;
    uint64_t epoch = 0;
    Op op;
};

}  // namespace afmesh
