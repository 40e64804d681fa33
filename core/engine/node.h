// A node: one process's membership in the cluster. It loads the modules,
// joins through the scheduler, connects workers to every server, routes the
// transport's completions to the worker or server engine, and stops cleanly.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "afmesh/afmesh.h"
#include "config.h"
#include "control/control_client.h"
#include "memory_registry.h"
#include "module_loader.h"
#include "progress.h"
#include "server.h"
#include "staging.h"
#include "worker.h"

struct afmesh_node {
    virtual ~afmesh_node() = default;
};

namespace afmesh {

/** The scheduler role: serves the rendezvous until destroyed. */
class SchedulerNode : public afmesh_node {
public:
    static Status create(const Config &config, std::unique_ptr<SchedulerNode> *out);
    ~SchedulerNode() override;
    const std::string &address() const { return address_; }

private:
    std::unique_ptr<Scheduler> scheduler_;
    std::string address_;
};

/** A worker or a server. */
class Node : public afmesh_node {
public:
    static Status create(const Config &config, Role role, std::unique_ptr<Node> *out);
    ~Node() override;

    Role role() const { return role_; }
    const std::string &device_name() const { return device_->name(); }
    const std::string &transport_name() const { return transport_->name(); }
    int32_t rank() const { return control_->rank(); }
    int32_t num_workers() const { return static_cast<int32_t>(control_->roster().workers.size()); }
    int32_t num_servers() const { return static_cast<int32_t>(control_->roster().servers.size()); }

    /** nullptr unless role() is kWorker / kServer. */
    WorkerEngine *worker() { return worker_.get(); }
    ServerEngine *server() { return server_.get(); }
    MemoryRegistry &registry() { return *registry_; }
    Progress &progress() { return *progress_; }
    Status barrier(BarrierGroup group, std::chrono::milliseconds timeout) { return control_->barrier(group, timeout); }
    /** Stops cleanly: every node agrees, then connections close. Idempotent. */
    Status stop();

private:
    Node(const Config &config, Role role) : config_(config), role_(role) {}
    Status start();
    Status connect_data_plane(Clock::time_point deadline);
    void accept_pending();
    void accept_pending_locked();
    void say_goodbye();
    void farewell_done_locked(afmesh_net_conn *conn);
    bool flush_engines_locked();
    void close_data_plane();
    void dispatch(const afmesh_net_event *events, int count);
    void on_peer_down(Role role, int32_t rank, const std::string &reason);
    void fail_peer(int32_t rank, const Status &why);

    Config config_;
    const Role role_;
    std::unique_ptr<Module> device_, transport_;
    std::unique_ptr<MemoryRegistry> registry_;
    std::unique_ptr<Staging> staging_;  // after registry_: its buffers are registrations
    std::unique_ptr<Progress> progress_;
    std::unique_ptr<ControlClient> control_;
    std::mutex mu_;  // the engines' state (EngineContext::mu)
    std::unique_ptr<WorkerEngine> worker_;
    std::unique_ptr<ServerEngine> server_;
    std::unordered_map<afmesh_net_conn *, int32_t> peer_of_;  // connection -> peer rank (-1: not identified yet)
    std::vector<afmesh_net_conn *> conns_;
    int connected_ = 0;  // worker: servers whose connection is up
    // Connections whose BYE has not left yet (say_goodbye); the count is read by waiters without the lock.
    std::unordered_set<afmesh_net_conn *> farewells_;
    std::atomic<size_t> farewells_left_{0};
    bool stopped_ = false;
};

}  // namespace afmesh
