// SPDX-License-Identifier: Apache-2.0
// The control plane seen from a worker or server: HELLO to the scheduler,
// the roster of every node's transport address, barriers, peer-failure
// notices and a clean stop. Data never flows here; this is the slow path.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "crypto.h"
#include "status.h"

namespace afmesh {

enum class Role : uint8_t { kScheduler = 0, kWorker = 1, kServer = 2 };
const char *role_name(Role role);

/** One node of the cluster as the scheduler announces it. */
struct RosterEntry {
    Role role = Role::kWorker;
    int32_t rank = -1;                  // within its role, 0..n-1
    std::string host;                   // the IP the node connected to the scheduler from ("10.0.0.7", "::1")
    std::string transport;              // transport module name ("tcp", "fabric"...)
    std::vector<uint8_t> address;       // the transport's listen() blob
    std::string device;                 // device module name, for diagnostics
    /**
     * Random and never 0, issued by the scheduler when the node entered the
     * roster: a later process under the same role and rank is another
     * incarnation, and data connections are authenticated per incarnation.
     */
    uint64_t incarnation = 0;
};

struct Roster {
    std::vector<RosterEntry> workers;  // indexed by rank
    std::vector<RosterEntry> servers;  // indexed by rank
    /**
     * The secret every data connection proves knowledge of (handshake.h):
     * random per cluster, handed only to the nodes the scheduler admitted,
     * over their control connections.
     */
    crypto::Key cluster_key{};

    /** The entries of `role`: workers or servers. */
    std::vector<RosterEntry> &of(Role role) { return role == Role::kWorker ? workers : servers; }
    const std::vector<RosterEntry> &of(Role role) const { return role == Role::kWorker ? workers : servers; }
};

/** What a node tells the scheduler about itself. */
struct Hello {
    Role role = Role::kWorker;
    int32_t requested_rank = -1;  // -1: let the scheduler assign
    std::string transport;
    std::vector<uint8_t> address;
    std::string device;
};

/** Which nodes a barrier waits for. */
enum class BarrierGroup : uint8_t { kWorkers = 1, kServers = 2, kAll = 3 };

struct ControlOptions {
    std::string scheduler;                         // "host:port", "[v6]:port"
    std::string auth_token;                        // empty: none
    int32_t num_workers = 1, num_servers = 1;
    std::chrono::milliseconds connect_timeout{30000};  // HELLO until the roster arrives
    // Both directions: nodes and scheduler heartbeat each other every interval
    // and give up on the other side after `heartbeat_timeout` of silence. A
    // node whose interval is not shorter than the scheduler's timeout (or vice
    // versa) is refused at HELLO.
    std::chrono::milliseconds heartbeat_interval{1000};
    std::chrono::milliseconds heartbeat_timeout{5000};  // silence after which a node is declared dead
    /**
     * How long a node that lost the scheduler keeps trying to rejoin one
     * restarted at the same address (0: it does not). The data plane runs on
     * meanwhile; barriers and stop wait for the rejoin.
     */
    std::chrono::milliseconds scheduler_reconnect{0};

    /** How many nodes of `role` (worker or server) the cluster has. */
    int32_t nodes_of(Role role) const { return role == Role::kWorker ? num_workers : num_servers; }
};

/**
 * What a node hears of the other nodes' membership, in the order the
 * scheduler said it. Both are called from the client's I/O thread: they must
 * return promptly (heartbeats wait for them) and must not destroy the
 * client; barrier() and stop() called from them return INVALID_ARGUMENT
 * instead of waiting for an answer only that thread can deliver.
 */
struct MembershipCallbacks {
    /** A node was declared dead; (Role::kScheduler, 0, reason) when the scheduler itself is lost. */
    std::function<void(Role role, int32_t rank, const std::string &reason)> peer_down;
    /**
     * A failed node's replacement was admitted: `entry` is its new address
     * and incarnation. An entry of Role::kScheduler (no address): a restarted
     * scheduler has adopted the cluster, with this node in it.
     */
    std::function<void(const RosterEntry &entry)> peer_up;
    /**
     * Hold PEER_DOWN and PEER_UP from the roster on until deliver_notices():
     * a node builds the state they change only after connect() returns.
     * (Losing the scheduler is told at once either way.)
     */
    bool held_until_delivered = false;
};

class ControlClient {
public:

    /**
     * Connects to the scheduler, sends `hello` and waits for the roster.
     * Errors: TIMEOUT when the scheduler or the other nodes do not appear
     * before options.connect_timeout (the message says how many of each
     * role it was still waiting for); ACCESS for a refused auth token;
     * INVALID_ARGUMENT for a rank clash, a topology or heartbeat-timing
     * mismatch, or a bad argument; UNSUPPORTED_VERSION when the scheduler
     * speaks another protocol version; PEER_FAILED when the scheduler went
     * away before the roster.
     */
    static Status connect(const ControlOptions &options, const Hello &hello, MembershipCallbacks callbacks,
                          std::unique_ptr<ControlClient> *out);
    /** Without a completed stop(), closing the connection makes the others see this node as failed. */
    virtual ~ControlClient() = default;

    virtual const Roster &roster() const = 0;
    /** This node's rank within its role (assigned when it asked for -1). */
    virtual int32_t rank() const = 0;
    /**
     * This node took the place of a failed one in a running cluster: its
     * peers connect to it as they learn of it, and there is no start-up
     * barrier to enter (the others passed it long ago).
     */
    virtual bool replacement() const = 0;
    /**
     * A replacement's peers that were down (failed, not yet replaced) when
     * it joined: it neither dials nor waits for them. Empty otherwise.
     */
    virtual const std::vector<std::pair<Role, int32_t>> &down_at_join() const = 0;
    /**
     * With MembershipCallbacks::held_until_delivered: the callbacks may run
     * from now on, beginning with the notices held so far. PEER_UP is
     * acknowledged to the scheduler only once its callback has returned.
     */
    virtual void deliver_notices() = 0;
    /**
     * Blocks until every node of `group` has entered, or `timeout` (TIMEOUT).
     * Barriers are numbered per group on each node; the n-th barrier of every
     * member meets, even after a node gave up waiting on an earlier one.
     * PEER_FAILED when a member failed or stopped, or the scheduler was lost
     * (while it is being rejoined, a barrier waits for the rejoin, and one
     * already waiting fails); INVALID_ARGUMENT when this node is not in
     * `group`, after stop(), or while another thread waits on the same group.
     */
    virtual Status barrier(BarrierGroup group, std::chrono::milliseconds timeout) = 0;
    /**
     * Announces a clean stop and waits (up to `timeout`) until every node has
     * done the same, so nobody tears down connections others still use. A
     * node that never arrives makes this return TIMEOUT naming the nodes still
     * missing, not hang; calling stop() again keeps waiting. A node that died
     * counts as stopped-with-failure, so survivors are never held hostage by
     * it: the stop then completes with PEER_FAILED naming the dead nodes.
     * OK when every node stopped cleanly.
     */
    virtual Status stop(std::chrono::milliseconds timeout) = 0;
    /**
     * Whether the connection to the scheduler broke or went silent after the
     * roster (not: the scheduler refused or evicted this node), and no
     * restarted scheduler has taken this node back yet. Nobody can then
     * confirm that the other nodes stopped, nor declare one dead.
     */
    virtual bool scheduler_gone() const = 0;
};

/** A running scheduler: its own process, or inside global rank 0 under a job manager (Node::start_embedded_scheduler). */
class Scheduler {
public:
    /**
     * Binds `listen_address` ("host:port"; port 0 picks a free one) and
     * serves the rendezvous in a background thread.
     */
    static Status start(const ControlOptions &options, const std::string &listen_address,
                        std::unique_ptr<Scheduler> *out);
    /** Stops serving at once and closes every connection: clients still running see the scheduler lost. */
    virtual ~Scheduler() = default;
    /** "host:port" actually bound. */
    virtual std::string address() const = 0;
    /**
     * Blocks until every node has stopped (or failed) and the scheduler has
     * shut down: OK, or PEER_FAILED naming the nodes that failed. TIMEOUT
     * (saying what it still waits for) when `timeout` passes first.
     */
    virtual Status wait(std::chrono::milliseconds timeout) = 0;
};

}  // namespace afmesh
