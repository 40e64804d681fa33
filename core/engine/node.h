// SPDX-License-Identifier: Apache-2.0
// A node: one process's membership in the cluster. It loads the modules,
// joins through the scheduler, connects workers to every server, routes the
// transport's completions to the worker or server engine, and stops cleanly.
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "afmesh/afmesh.h"
#include "config.h"
#include "control/control_client.h"
#include "counters.h"
#include "handshake.h"
#include "log_limiter.h"
#include "membership_events.h"
#include "memory_registry.h"
#include "module_loader.h"
#include "placement.h"
#include "progress.h"
#include "server.h"
#include "staging.h"
#include "thread_annotations.h"
#include "ticker.h"
#include "worker.h"

namespace afmesh {
class Node;
}

struct afmesh_node {
    virtual ~afmesh_node() = default;
    /**
     * The worker or server behind a handle, or null for the scheduler: what
     * every data-plane call asks first, so a virtual call rather than a
     * dynamic_cast's walk of the type hierarchy.
     */
    virtual afmesh::Node *data_node() { return nullptr; }
    const afmesh::Node *data_node() const { return const_cast<afmesh_node *>(this)->data_node(); }
};

namespace afmesh {

/** The scheduler role: serves the rendezvous until destroyed. */
class SchedulerNode : public afmesh_node {
public:
    static Status create(const Config &config, std::unique_ptr<SchedulerNode> *out);
    ~SchedulerNode() override;
    const std::string &address() const { return address_; }
    /**
     * Serves until every node has stopped or failed, or the cluster never
     * formed: OK only when every node stopped cleanly. Idempotent.
     */
    Status serve();

private:
    std::unique_ptr<Scheduler> scheduler_;
    std::string address_;
    std::optional<Status> outcome_;  // once serve() has returned
};

/** A worker or a server. */
class Node : public afmesh_node {
public:
    static Status create(const Config &config, Role role, std::unique_ptr<Node> *out);
    ~Node() override;
    Node *data_node() override { return this; }

    Role role() const { return role_; }
    /** The role this node exchanges data with: servers for a worker, workers for a server. */
    Role peer_role() const { return role_ == Role::kWorker ? Role::kServer : Role::kWorker; }
    const std::string &device_name() const { return device_->name(); }
    const std::string &transport_name() const { return transport_->name(); }
    int32_t rank() const { return control_->rank(); }
    /** This node took a failed node's place in a running cluster. */
    bool replacement() const { return control_->replacement(); }
    int32_t num_workers() const { return static_cast<int32_t>(control_->roster().workers.size()); }
    int32_t num_servers() const { return static_cast<int32_t>(control_->roster().servers.size()); }

    /** nullptr unless role() is kWorker / kServer. */
    WorkerEngine *worker() { return worker_.get(); }
    ServerEngine *server() { return server_.get(); }
    MemoryRegistry &registry() { return *registry_; }
    Progress &progress() { return *progress_; }
    Status barrier(BarrierGroup group, std::chrono::milliseconds timeout) { return control_->barrier(group, timeout); }
    /** Adds the node's counters (peer < 0) or one peer's to `out`; NOT_FOUND for a rank outside the cluster. */
    Status stats(int32_t peer, afmesh_stats *out) const;
    /** The transport module's own counters. */
    Status transport_counters(std::vector<afmesh_net_counter> *out) const { return transport_->counters(out); }
    /** Stops cleanly: every node agrees, then connections close. Idempotent. */
    Status stop();
    /** The oldest membership event not taken yet (membership_events.h). */
    Status next_event(std::chrono::milliseconds timeout, MembershipEvent *out) { return events_.next(timeout, out); }

private:
    /** What the node knows of one data connection. */
    struct Link {
        int32_t peer = -1;     // the peer's rank; on a server, -1 until the handshake names it
        bool trusted = false;  // the handshake has completed
        bool ended = false;    // the peer said BYE or failed: no heartbeats, no silence check
        bool heard = false;    // a message or write arrived since the last tick
        Clock::time_point last_heard;
    };

    Node(const Config &config, Role role) : config_(config), role_(role) {}
    Status start();
    Status start_embedded_scheduler();
    Status connect_data_plane(Clock::time_point deadline) AFMESH_EXCLUDES(mu_);
    void accept_pending_locked() AFMESH_REQUIRES(mu_);
    void note_handshake_progress_locked() AFMESH_REQUIRES(mu_);
    void say_goodbye() AFMESH_EXCLUDES(mu_);
    void farewell_done_locked(afmesh_net_conn *conn) AFMESH_REQUIRES(mu_);
    bool flush_engines_locked() AFMESH_REQUIRES(mu_);
    void close_data_plane() AFMESH_EXCLUDES(mu_);
    void dispatch(const afmesh_net_event *events, int count) AFMESH_EXCLUDES(mu_);
    void on_message_locked(Link &link, const void *data, size_t len) AFMESH_REQUIRES(mu_);
    void on_handshake_message_locked(afmesh_net_conn *conn, Link &link, const void *data, size_t len)
        AFMESH_REQUIRES(mu_);
    Status send_handshake_locked(afmesh_net_conn *conn, const Link &link, const std::vector<uint8_t> &message,
                                 const char *what) AFMESH_REQUIRES(mu_);
    /** Sends a message the node itself makes (handshake, heartbeat, BYE), counted with the link's peer. */
    int send_locked(afmesh_net_conn *conn, const Link &link, const std::vector<uint8_t> &message, uint32_t flags,
                    uint64_t cookie) AFMESH_REQUIRES(mu_);
    /** Drops a connection that failed its handshake or broke the protocol, failing its peer if it had one. */
    void refuse_locked(afmesh_net_conn *conn, const Status &why) AFMESH_REQUIRES(mu_);
    void close_link_locked(afmesh_net_conn *conn) AFMESH_REQUIRES(mu_);
    void tick(Clock::time_point now) AFMESH_EXCLUDES(mu_);
    void on_peer_down(Role role, int32_t rank, const std::string &reason) AFMESH_EXCLUDES(mu_);
    void on_peer_up(const RosterEntry &entry) AFMESH_EXCLUDES(mu_);
    /** Worker: dials `server` and attaches the connection to the engine; the handshake follows (dispatch). */
    Status dial_server_locked(const RosterEntry &server) AFMESH_REQUIRES(mu_);
    /** A peer's handshake completed: a replacement's PEER_UP goes to the application now, when it can be used. */
    void peer_connected_locked(int32_t peer) AFMESH_REQUIRES(mu_);
    void fail_peer(int32_t rank, const Status &why) AFMESH_REQUIRES(mu_);
    void report_peer_down_locked(int32_t peer, const Status &why) AFMESH_REQUIRES(mu_);
    /**
     * The engines guard their state with EngineContext::mu, which is mu_
     * under another name (start() hands it over): the analysis cannot see
     * through that reference, so this tells it that holding mu_ holds
     * theirs. Called before a call into an engine that needs its lock.
     */
    void assert_engines_locked() const AFMESH_REQUIRES(mu_) AFMESH_ASSERT_CAPABILITY(worker_->mu())
        AFMESH_ASSERT_CAPABILITY(server_->mu()) {}

    Config config_;
    const Role role_;
    std::chrono::milliseconds heartbeat_interval_{0}, peer_timeout_{0}, connect_timeout_{0};
    std::unique_ptr<Module> device_, transport_;
    std::unique_ptr<MemoryRegistry> registry_;
    std::unique_ptr<Staging> staging_;  // after registry_: its buffers are registrations
    std::unique_ptr<Progress> progress_;
    // The scheduler, when a job manager's layout puts it in this process
    // (global rank 0); destroyed after control_, which talks to it.
    std::unique_ptr<Scheduler> embedded_scheduler_;
    Placement placement_;  // the NIC and the progress thread's CPUs, chosen before the transport loads
    std::unique_ptr<ControlClient> control_;
    std::unique_ptr<NodeCounters> counters_;  // made once the roster says how many peers there are
    Mutex mu_;  // the engines' state (EngineContext::mu), and what is marked guarded by it below
    // Made by start() before the threads that use them, destroyed after
    // those have stopped; their state is the engines' (ctx.mu).
    std::unique_ptr<WorkerEngine> worker_;
    std::unique_ptr<ServerEngine> server_;
    std::unique_ptr<Handshake> handshake_ AFMESH_PT_GUARDED_BY(mu_);  // made by start(), used under mu_
    std::unordered_map<afmesh_net_conn *, Link> links_ AFMESH_GUARDED_BY(mu_);  // every open data connection
    int connected_ AFMESH_GUARDED_BY(mu_) = 0;       // worker: servers whose handshake has completed
    Status connect_failure_ AFMESH_GUARDED_BY(mu_);  // worker: why a server could not be reached during start()
    // Every handshake start() waits for has completed, or one failed: read
    // without mu_ by that wait, whose predicate may run under Progress's
    // wait_mu_ (which ranks below mu_).
    std::atomic<bool> data_plane_settled_{false};
    // Connections whose BYE has not left yet (say_goodbye); the count is read by waiters without the lock.
    std::unordered_set<afmesh_net_conn *> farewells_ AFMESH_GUARDED_BY(mu_);
    std::atomic<size_t> farewells_left_{0};
    LogLimiter refusal_log_ AFMESH_GUARDED_BY(mu_){std::chrono::seconds(1)};
    // Peers replaced by a new incarnation (PEER_UP) whose handshake has not completed yet.
    std::unordered_set<int32_t> replacing_ AFMESH_GUARDED_BY(mu_);
    // A replacement's peers that were down as it joined: start() neither dials nor waits for them.
    std::unordered_set<int32_t> down_at_join_ AFMESH_GUARDED_BY(mu_);
    bool stopped_ = false;  // the caller's thread only (stop())
    std::atomic<bool> stopping_{false};  // stop() has begun: peers failing now are not reported
    MembershipEvents events_;  // filled under mu_ and by the control thread; drained by the application
    std::unique_ptr<Ticker> ticker_;  // last: stopped before anything it touches
};

}  // namespace afmesh
