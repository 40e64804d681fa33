// SPDX-License-Identifier: Apache-2.0
// The floor: the same exchange as afmesh's push-pull, written directly
// against the transport module with no engine, in either of the two
// primitives a transport offers. By write: each worker writes its push bytes
// to every server with one write_imm; each server, on the immediate, writes
// the pull bytes straight back. By message (sizes within caps.max_send_size):
// each worker sends its push bytes, each server copies them into the
// worker's region and sends the pull bytes back, which the worker copies
// into its own, as afmesh's eager path does. Servers answer at once or,
// batching like afmesh's servers in their AF step, once every worker's push
// has arrived. Measured in the same run, with the same polling style, the
// faster of the two is what afmesh's overhead is judged against: the best
// this transport offers for the size, not afmesh's own choice.
//
// Its memory is afmesh's too: each peer writes into a region of its own
// (a server keeps one per worker, a worker one per server), and a server
// answers a worker from that worker's region, as the bench's servers answer
// from the receive slice. With one region shared by every peer the floor
// would do what no application can (two answers landing in one buffer) and
// its copies would touch half the memory afmesh's do. For the AF pipeline,
// each region holds one lane per micro-batch in flight, as afmesh's servers
// keep one slice per micro-batch key.
#pragma once

#include <cstdint>
#include <deque>
#include <initializer_list>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "config.h"
#include "engine/progress.h"
#include "module_loader.h"
#include "status.h"

namespace afmesh::bench {

/** What a worker needs to reach a floor server (sent through afmesh itself). */
struct FloorCard {
    std::vector<uint8_t> address;
    afmesh_net_rkey rkey{};
    std::vector<uint8_t> encode() const;
    static bool decode(const uint8_t *data, size_t len, FloorCard *out);
};

/**
 * How many micro-batches the floor keeps in flight for the AF pipeline:
 * `microbatches`, where a write's immediate can name the lane beside the
 * answer's size (below 64 MiB, at most 64 lanes); else 1, and the pipeline
 * has no floor. Both ends compute it from the same options.
 */
int floor_lanes(uint64_t bytes, int microbatches);

/** The transport primitive a floor round trip uses. */
enum class FloorPrimitive { kWrite, kMessage };
/** "write", "send". */
const char *floor_primitive_name(FloorPrimitive primitive);

class FloorEndpoint {
public:
    /**
     * Loads the transport the configuration selects and registers `bytes`
     * to send from and, for each of `peers`, `lanes` x `bytes` to receive
     * into (floor_lanes()).
     */
    static Status create(const Config &config, PollMode mode, uint64_t bytes, int peers, int lanes,
                         std::unique_ptr<FloorEndpoint> *out);
    ~FloorEndpoint();

    // Server side.
    /**
     * Listens and describes how to reach this endpoint. Serving happens on
     * the progress thread: each write is answered as it lands, or, with
     * `batch_workers` > 1, once a write from each of that many workers has.
     */
    Status serve(int batch_workers, FloorCard *card);

    // Worker side.
    /** Connects to every server; `slot` (this worker's rank) picks the region it writes into on each. */
    Status connect(const std::vector<FloorCard> &servers, int slot, std::chrono::milliseconds timeout);
    /** Whether a round of these sizes fits in messages (the write primitive always fits). */
    bool fits_messages(uint64_t push_bytes, uint64_t pull_bytes) const;
    /** One round: push `push_bytes` to every server, wait until each answered `pull_bytes`. */
    Status round_trip(FloorPrimitive primitive, uint64_t push_bytes, uint64_t pull_bytes, uint64_t *elapsed_ns);
    /** Whether pipeline_layer() can run: more than one lane. */
    bool pipelines() const { return lanes_ > 1; }
    /**
     * One layer of the AF pipeline, as afmesh's: a write per lane to every
     * server back to back, then each lane waited for in order; each lane's
     * time from its write to its last answer is appended to `lane_ns`.
     */
    Status pipeline_layer(uint64_t push_bytes, uint64_t pull_bytes, std::vector<uint64_t> *lane_ns);
    void set_mode(PollMode mode) { progress_->set_mode(mode); }

    // What it cost so far (readable from any thread while it runs).
    /** System calls: its progress loop's sleeps, wake-ups and yields, and those the transport counts. */
    Status syscalls(uint64_t *out) const {
        if (Status s = transport_->syscalls(out); !s) return s;
        *out += progress_->counters().syscalls();
        return Status::ok();
    }
    /** Transport operations it posted: write_imm and send. */
    uint64_t operations() const { return operations_.load(std::memory_order_relaxed); }

private:
    FloorEndpoint() = default;
    void dispatch(const afmesh_net_event *events, int count);
    /** Posts one write of the push for `lane` to server `s`, naming the lane and the answer's size. */
    int write_push(size_t s, int lane, uint64_t push_bytes, uint64_t pull_bytes);
    /** Waits until `answers` (a lane's count) reaches one per server, or a server failed. */
    Status await_answers(const std::atomic<int> &answers);
    /** Sends `parts` as one message (the first is its tag), retrying while the send queue is full. */
    int send_message(afmesh_net_conn *conn, std::initializer_list<std::span<const uint8_t>> parts);
    void on_message(const afmesh_net_event &ev);

    std::unique_ptr<Module> transport_;
    std::unique_ptr<Progress> progress_;
    uint64_t lane_bytes_ = 0;    // of each lane of a region
    int lanes_ = 1;
    uint64_t region_bytes_ = 0;  // of each peer's region in recv_buf_: lanes_ x lane_bytes_
    std::vector<uint8_t> send_buf_, recv_buf_;
    afmesh_net_mr *send_mr_ = nullptr, *recv_mr_ = nullptr;
    afmesh_net_rkey recv_rkey_{};
    bool serving_ = false;
    int batch_workers_ = 1;
    std::vector<afmesh_net_conn *> conns_;
    // Server: where each connected worker wants its answers (from its first
    // message), and the answers it is owed, oldest first: until that message
    // arrives, or until the batch is complete.
    struct Owed {
        uint32_t bytes;
        FloorPrimitive primitive;  // the push's, which its answer takes too
        int lane = 0;
    };
    struct Peer {
        bool known = false;
        afmesh_net_rkey rkey{};
        uint64_t offset = 0;  // of its region for this server's answers
        uint64_t slot = 0;    // its region here, which answers are sent from
        std::deque<Owed> owed;
    };
    std::unordered_map<afmesh_net_conn *, Peer> peers_;
    std::vector<uint8_t> message_;  // a tagged message being built (send copies it)
    void answer(afmesh_net_conn *conn, const Peer &peer, const Owed &owed);
    void answer_owed();
    // Worker: the servers' regions, where in them it writes, and progress of the current round.
    std::vector<afmesh_net_rkey> server_rkeys_;
    uint64_t write_offset_ = 0;
    std::atomic<int> connected_{0};
    std::unique_ptr<std::atomic<int>[]> lane_answers_;  // answers per lane in this round (round_trip: lane 0)
    std::atomic<bool> failed_{false};
    // Posted from the calling thread (worker) and the progress thread (server).
    std::atomic<uint64_t> operations_{0};
};

}  // namespace afmesh::bench
