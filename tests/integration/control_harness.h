// SPDX-License-Identifier: Apache-2.0
// Helpers for the control-plane integration tests: nodes that join a
// scheduler concurrently, a recorder for PeerDownCallback notices, and a raw
// socket peer that speaks (or mangles) the wire protocol by hand.
// Every wait has a deadline; nothing sleeps to synchronise.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "control/control_client.h"
#include "control/frame_reader.h"
#include "control/messages.h"
#include "control/socket_util.h"

namespace afmesh::testing {

using std::chrono::milliseconds;
using namespace std::chrono_literals;

/** Options for a test cluster: fast heartbeats, patient failure detection. */
ControlOptions test_options(int32_t num_workers, int32_t num_servers);

/** Starts a scheduler on 127.0.0.1 with a free port; fails the test if it cannot. */
std::unique_ptr<Scheduler> start_scheduler(const ControlOptions &options, const std::string &listen = "127.0.0.1:0");

/** Records the membership notices (MembershipCallbacks) of any number of clients. */
class MembershipLog {
public:
    struct Notice {
        std::string observer;  // which client saw it
        Role role;
        int32_t rank;
        std::string reason;        // PEER_DOWN's
        bool up = false;           // a PEER_UP: a replacement was admitted,
        uint64_t incarnation = 0;  // with this incarnation
    };

    MembershipCallbacks callbacks(std::string observer);
    /** Waits until at least `count` notices arrived; false at the deadline. */
    bool wait_for_count(size_t count, milliseconds timeout);
    std::vector<Notice> notices() const;

private:
    mutable std::mutex mu_;
    std::condition_variable cv_;
    std::vector<Notice> notices_;
};

/** How a test node joins: its role and rank, and anything it gets deliberately wrong. */
struct NodeSpec {
    NodeSpec(Role role, int32_t requested_rank = -1) : role(role), requested_rank(requested_rank) {}
    NodeSpec &token(std::string t) {
        auth_token = std::move(t);
        return *this;
    }
    NodeSpec &workers(int32_t n) {
        num_workers = n;
        return *this;
    }

    Role role;
    int32_t requested_rank;
    std::optional<std::string> auth_token;  // default: the options' token
    std::optional<int32_t> num_workers;     // default: the options' count (set to fake a topology mismatch)
};

/** A node's address blob in these tests: unique per node so rosters can be checked. */
std::vector<uint8_t> address_of(size_t index);

/**
 * Runs ControlClient::connect for each started node on its own thread: the
 * scheduler answers only once every node is in, so nodes must join
 * concurrently. connect() is bounded by connect_timeout, so every wait here is.
 */
class Joiner {
public:
    Joiner(ControlOptions options, MembershipLog *log = nullptr) : options_(std::move(options)), log_(log) {}
    ~Joiner();

    /** Starts one node; returns its index. */
    size_t start(const NodeSpec &spec);
    /** Waits for node `index`'s connect() to return and gives its status. */
    const Status &status(size_t index);
    /** Waits for node `index` and takes its client (null when connect failed). */
    std::unique_ptr<ControlClient> take(size_t index);
    /** The next node whose connect() returned, in completion order; nullopt at the deadline. */
    std::optional<size_t> next_done(milliseconds timeout);

private:
    struct Node {
        std::thread thread;
        Status status;
        std::unique_ptr<ControlClient> client;
    };
    void wait(size_t index);

    const ControlOptions options_;
    MembershipLog *log_;
    std::vector<std::unique_ptr<Node>> nodes_;
    std::mutex mu_;
    std::condition_variable cv_;
    std::vector<size_t> done_;  // completion order
    size_t done_taken_ = 0;
};

/** Joins `workers` workers and `servers` servers (any rank) and expects every one to succeed. */
std::vector<std::unique_ptr<ControlClient>> join_cluster(const ControlOptions &options, MembershipLog *log = nullptr);

/** A scheduler on a free loopback port and a cluster joined to it, every membership notice logged. */
struct RunningCluster {
    ControlOptions options;  // .scheduler: where the scheduler listens
    std::unique_ptr<Scheduler> scheduler;
    MembershipLog log;
    std::vector<std::unique_ptr<ControlClient>> clients;  // workers first, then servers
};
/** Starts one with `options`' topology; null, with the test failed, when any part of it fails. */
std::unique_ptr<RunningCluster> start_cluster(ControlOptions options);

/** Calls fn(client) for every non-null client on its own thread, returns the statuses in order. */
std::vector<Status> on_each(const std::vector<ControlClient *> &clients,
                            const std::function<Status(ControlClient &)> &fn);

/** Every non-null client's barrier over everyone, or its stop, at once; the statuses in order. */
std::vector<Status> barrier_all(const std::vector<std::unique_ptr<ControlClient>> &clients, milliseconds timeout);
std::vector<Status> stop_all(const std::vector<std::unique_ptr<ControlClient>> &clients, milliseconds timeout);

/** Raw pointers to the non-null clients. */
std::vector<ControlClient *> pointers(const std::vector<std::unique_ptr<ControlClient>> &clients);

/** A hand-driven TCP peer of the scheduler. */
class RawPeer {
public:
    explicit RawPeer(const std::string &scheduler);
    bool connected() const { return fd_.valid(); }

    /** Writes all of `bytes` (deadline 5 s); false if the socket refused. */
    bool send_bytes(std::span<const uint8_t> bytes);
    bool send_frame(control::MessageType type, std::span<const uint8_t> payload);
    /** Half-closes: the scheduler sees end of stream. */
    void shutdown_write();

    enum class Event { kFrame, kClosed, kTimeout };
    /** Next frame, end of stream, or the deadline. */
    Event read(control::Frame *frame, milliseconds timeout);
    /**
     * Reads until the scheduler closes the connection (true) or the deadline
     * (false); `error` gets the last ERROR frame seen, if any.
     */
    bool wait_closed(milliseconds timeout, std::optional<Status> *error);

private:
    control::UniqueFd fd_;
    control::FrameReader reader_;
};

/** 12 header bytes as the wire has them, with every field under the caller's control. */
std::vector<uint8_t> raw_header(uint32_t magic, uint16_t version, uint16_t type, uint32_t length);

/** A well-formed HELLO payload for a hand-driven node. */
std::vector<uint8_t> hello_payload(const ControlOptions &options, Role role, int32_t rank);

}  // namespace afmesh::testing
