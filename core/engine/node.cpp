// SPDX-License-Identifier: Apache-2.0
#include "node.h"

#include <algorithm>

#include "control/socket_util.h"
#include "engine/wire.h"
#include "log.h"

namespace afmesh {
namespace {

// Marks the signalled BYE of say_goodbye(); no other send is signalled.
constexpr uint64_t kFarewellCookie = UINT64_MAX;

std::chrono::milliseconds config_ms(const Config &config, const char *name) {
    return std::chrono::milliseconds(config.get_int(name));
}

ControlOptions control_options(const Config &config) {
    ControlOptions o;
    o.scheduler = config.get("AFMESH_SCHEDULER");
    o.auth_token = config.get("AFMESH_AUTH_TOKEN");
    const int64_t group = config.get_int("AFMESH_GROUP_SIZE");
    o.num_workers = static_cast<int32_t>(config.get_int("AFMESH_NUM_WORKERS") * group);
    o.num_servers = static_cast<int32_t>(config.get_int("AFMESH_NUM_SERVERS") * group);
    o.connect_timeout = config_ms(config, "AFMESH_CONNECT_TIMEOUT_MS");
    o.heartbeat_interval = config_ms(config, "AFMESH_HEARTBEAT_MS");
    o.heartbeat_timeout = config_ms(config, "AFMESH_PEER_TIMEOUT_MS");
    o.scheduler_reconnect = config_ms(config, "AFMESH_SCHEDULER_RECONNECT_MS");
    return o;
}

// StepMesh numbers instances within host groups: rank = group rank * G + device index.
int32_t requested_rank(const Config &config) {
    const int64_t rank = config.get_int("AFMESH_RANK"), group = config.get_int("AFMESH_GROUP_SIZE");
    if (rank < 0 || group <= 1) return static_cast<int32_t>(rank);
    return static_cast<int32_t>(rank * group + config.get_int("AFMESH_DEVICE_ID"));
}

Status require_scheduler(const Config &config) {
    if (config.get("AFMESH_SCHEDULER").empty())
        return {Code::kInvalidArgument, "no scheduler address: set AFMESH_SCHEDULER=host:port (or DMLC_PS_ROOT_URI "
                                        "and DMLC_PS_ROOT_PORT)"};
    return Status::ok();
}

}  // namespace

Status SchedulerNode::create(const Config &config, std::unique_ptr<SchedulerNode> *out) {
    if (Status s = require_scheduler(config); !s) return s;
    std::unique_ptr<SchedulerNode> node(new SchedulerNode());
    if (Status s = Scheduler::start(control_options(config), config.get("AFMESH_SCHEDULER"), &node->scheduler_); !s)
        return s;
    node->address_ = node->scheduler_->address();
    set_log_identity(role_name(Role::kScheduler), -1);
    *out = std::move(node);
    return Status::ok();
}

// The scheduler gives up by itself on nodes that never arrive, so this ends.
Status SchedulerNode::serve() {
    if (!outcome_) outcome_ = scheduler_->wait(std::chrono::hours(24 * 365));
    return *outcome_;
}

SchedulerNode::~SchedulerNode() {
    if (!scheduler_) return;  // create() failed before it started
    if (Status s = serve(); !s) AFMESH_LOG(AFMESH_LOG_WARN, "scheduler: %s", s.message().c_str());
}

Status Node::create(const Config &config, Role role, std::unique_ptr<Node> *out) {
    if (role != Role::kWorker && role != Role::kServer) return {Code::kInvalidArgument, "a node is a worker or a server"};
    if (Status s = require_scheduler(config); !s) return s;
    std::unique_ptr<Node> node(new Node(config, role));
    if (Status s = node->start(); !s) return s;
    *out = std::move(node);
    return Status::ok();
}

Status Node::start() {
    const Clock::time_point began = Clock::now();
    // Before any thread that reads them starts.
    heartbeat_interval_ = config_ms(config_, "AFMESH_HEARTBEAT_MS");
    peer_timeout_ = config_ms(config_, "AFMESH_PEER_TIMEOUT_MS");
    connect_timeout_ = config_ms(config_, "AFMESH_CONNECT_TIMEOUT_MS");
    PollMode mode;
    if (!parse_poll_mode(config_.get("AFMESH_POLL"), &mode))
        return {Code::kInvalidArgument, "AFMESH_POLL must be busy, adaptive or blocking"};
    if (Status s = select_module(config_, AFMESH_MODULE_DEVICE, &device_); !s) return s;
    const int device_id = static_cast<int>(config_.get_int("AFMESH_DEVICE_ID"));
    take_module_error();
    if (device_->device().set_device(device_->ctx(), device_id) != AFMESH_HAL_OK)
        return {Code::kInvalidArgument, "device " + std::to_string(device_id) + ": " + take_module_error()};
    // Before the transport loads: it picks its NIC as it initialises.
    if (Status s = place_node(config_, *device_, device_id, &placement_); !s) return s;
    if (!placement_.nic.empty()) {
        if (offer_module_setting("AFMESH_NET_DEVICES", placement_.nic))
            AFMESH_LOG(AFMESH_LOG_INFO, "NIC nearest device %d: %s", device_id, placement_.reason.c_str());
        else
            AFMESH_LOG(AFMESH_LOG_WARN, "another node of this process chose its NIC first; %s would be nearest "
                                        "device %d (set AFMESH_NET_DEVICES per process)",
                       placement_.nic.c_str(), device_id);
    }
    if (Status s = select_module(config_, AFMESH_MODULE_TRANSPORT, &transport_); !s) return s;
    const Clock::time_point modules_chosen = Clock::now();

    // The device module's memory is staged through pinned host memory when the transport cannot register it.
    const uint32_t device_kind = device_->device().mem_kind;
    const uint32_t staged_kinds =
        device_kind < AFMESH_MEM_KIND_COUNT && !transport_registers(*transport_, device_kind) ? AFMESH_MEM_BIT(device_kind) : 0;
    registry_ = std::make_unique<MemoryRegistry>(*transport_, staged_kinds);
    staging_ = std::make_unique<Staging>(*device_, *transport_, *registry_, device_id,
                                         static_cast<uint64_t>(config_.get_int("AFMESH_STAGING_CHUNK")),
                                         placement_.numa_node);
    progress_ = std::make_unique<Progress>(*transport_, mode, adaptive_spin(config_, *transport_),
                                           [this](const afmesh_net_event *ev, int n) { dispatch(ev, n); });

    Hello hello;
    hello.role = role_;
    hello.requested_rank = requested_rank(config_);
    hello.transport = transport_->name();
    hello.device = device_->name();
    if (role_ == Role::kServer) {
        hello.address.resize(std::max<uint32_t>(transport_->net_caps().max_addr_size, 16));
        size_t len = hello.address.size();
        take_module_error();
        if (transport_->net().listen(transport_->ctx(), hello.address.data(), &len) != AFMESH_HAL_OK)
            return {Code::kError, "transport " + transport_->name() + " cannot listen: " + take_module_error()};
        hello.address.resize(len);
    }
    if (Status s = start_embedded_scheduler(); !s) return s;
    const auto deadline = Clock::now() + config_ms(config_, "AFMESH_CONNECT_TIMEOUT_MS");
    // Held until the engines and the handshake exist (deliver_notices below).
    MembershipCallbacks membership{
        [this](Role r, int32_t rank, const std::string &reason) { on_peer_down(r, rank, reason); },
        [this](const RosterEntry &entry) { on_peer_up(entry); }, true};
    if (Status s = ControlClient::connect(control_options(config_), hello, std::move(membership), &control_); !s)
        return s;
    const Clock::time_point joined = Clock::now();

    set_log_identity(role_name(role_), rank());  // from here on, this node's lines say who wrote them
    counters_ = std::make_unique<NodeCounters>(role_ == Role::kWorker ? num_servers() : num_workers());
    EngineContext ctx{*transport_,
                      *device_,
                      *registry_,
                      *staging_,
                      *progress_,
                      *counters_,
                      mu_,
                      device_id,
                      eager_policy(config_, *transport_),
                      // Without a gathered write a message cannot ride on a tensor: no mailboxes.
                      transport_->write_segs() >= 2 ? static_cast<uint32_t>(config_.get_int("AFMESH_MAILBOX_ENTRIES"))
                                                    : 0,
                      [this](afmesh_net_conn *conn) AFMESH_REQUIRES(mu_) { close_link_locked(conn); },
                      [this](int32_t peer, const Status &why) AFMESH_REQUIRES(mu_) { report_peer_down_locked(peer, why); }};
    if (role_ == Role::kWorker)
        worker_ = std::make_unique<WorkerEngine>(ctx, rank(), num_servers());
    else
        server_ = std::make_unique<ServerEngine>(ctx, rank(), num_workers());
    {
        MutexLock lock(&mu_);
        handshake_ = std::make_unique<Handshake>(control_->roster(), rank());
        // A replacement neither dials nor waits for peers that are down as it joins.
        assert_engines_locked();
        for (const auto &[role, peer] : control_->down_at_join()) {
            if (role == role_) continue;
            down_at_join_.insert(peer);
            fail_peer(peer, {Code::kPeerFailed, "it was down when this node joined as a replacement"});
        }
    }
    // Peers that failed or were replaced since the roster are applied now,
    // before and while this node dials its servers (a replaced one is dialled
    // at its new address; dial_server_locked skips what is dialled already).
    control_->deliver_notices();

    if (worker_) progress_->set_background([worker = worker_.get()] { return worker->open_gates(); });
    if (Status s = progress_->start(placement_.cpus); !s) return s;
    ticker_ = std::make_unique<Ticker>(heartbeat_interval_, [this](Clock::time_point now) { tick(now); });
    if (Status s = connect_data_plane(deadline); !s) return s;
    const Clock::time_point connected = Clock::now();
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    // A replacement joins a cluster long past its start-up barrier.
    Status released = control_->replacement()
                          ? Status::ok()
                          : control_->barrier(BarrierGroup::kAll, std::max(left, std::chrono::milliseconds(1)));
    // Beside the scheduler's account of the cluster, this node's: which phase kept it.
    auto ms = [began](Clock::time_point at) {
        return static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(at - began).count());
    };
    AFMESH_LOG(AFMESH_LOG_DEBUG, "start-up: modules chosen after %lld ms, joined after %lld ms, connected to every "
                                 "peer after %lld ms, start-up barrier after %lld ms",
               ms(modules_chosen), ms(joined), ms(connected), ms(Clock::now()));
    return released;
}

Status Node::connect_data_plane(Clock::time_point deadline) {
    const Roster &roster = control_->roster();
    if (role_ == Role::kWorker) {
        MutexLock lock(&mu_);
        for (const RosterEntry &server : roster.servers) {
            // on_peer_up dialled a replacement at its new address already.
            if (handshake_->incarnation(Role::kServer, server.rank) != server.incarnation) continue;
            if (down_at_join_.count(server.rank)) continue;
            if (Status s = dial_server_locked(server); !s) return s;
        }
    }
    {
        MutexLock lock(&mu_);
        note_handshake_progress_locked();  // a handshake may have ended before the wait below starts
    }
    // Wait for every server's handshake (worker) or every worker's (server),
    // woken by the handshake's messages alone: a timed re-check here woke
    // every node of a big cluster on one host a thousand times a second, and
    // their spinning starved the handshakes.
    if (Status s = progress_->wait_until([this] { return data_plane_settled_.load(); }, deadline); !s) {
        if (s.code() != Code::kTimeout) return s;
        return {Code::kTimeout, role_ == Role::kWorker ? "not every server accepted the connection in time"
                                                       : "not every worker connected in time"};
    }
    MutexLock lock(&mu_);
    return connect_failure_;
}

Status Node::dial_server_locked(const RosterEntry &server) {
    const std::string name = "server " + std::to_string(server.rank);
    if (server.transport != transport_->name())
        return {Code::kInvalidArgument, name + " uses transport '" + server.transport + "', this worker '" +
                                            transport_->name() + "': set AFMESH_TRANSPORT alike on every node"};
    afmesh_net_conn *conn = nullptr;
    take_module_error();
    if (transport_->net().connect(transport_->ctx(), server.address.data(), server.address.size(), &conn) !=
        AFMESH_HAL_OK)
        return {Code::kPeerFailed, "cannot connect to " + name + ": " + take_module_error()};
    links_[conn].peer = server.rank;
    assert_engines_locked();
    worker_->attach_server(server.rank, conn);
    return Status::ok();
}

void Node::peer_connected_locked(int32_t peer) {
    assert_engines_locked();
    if (worker_) worker_->server_connected(peer);
    if (replacing_.erase(peer) == 0) return;
    const Role role = peer_role();
    AFMESH_LOG(AFMESH_LOG_INFO, "%s %d is back: its new incarnation passed the handshake", role_name(role), peer);
    events_.peer_up(role, peer, handshake_->incarnation(role, peer));
}

// Every accepted connection must complete the handshake within the peer
// timeout. Too many at once (strangers connecting in a loop) push out the
// one that has waited longest: a real worker answers in microseconds, so
// only a flood faster than that keeps one out, and it cannot pile up
// descriptors meanwhile.
void Node::accept_pending_locked() {
    const size_t most_pending = 64 + static_cast<size_t>(num_workers());
    afmesh_net_conn *conn = nullptr;
    while (transport_->net().accept(transport_->ctx(), &conn) == AFMESH_HAL_OK) {
        links_[conn].last_heard = Clock::now();
        handshake_->expect(conn, Clock::now() + peer_timeout_);
        if (handshake_->pending_count() > most_pending)
            refuse_locked(handshake_->oldest(), {Code::kAccess, "more than " + std::to_string(most_pending) +
                                                                   " connections in their handshake at once"});
    }
}

void Node::dispatch(const afmesh_net_event *events, int count) {
    MutexLock lock(&mu_);
    assert_engines_locked();
    for (int i = 0; i < count; ++i) {
        const afmesh_net_event &ev = events[i];
        if (ev.type == AFMESH_NET_EV_INCOMING) {
            if (role_ == Role::kServer) accept_pending_locked();
            continue;
        }
        auto it = links_.find(ev.conn);
        if (it == links_.end()) continue;  // closed by us: nothing more to do
        Link &link = it->second;
        switch (ev.type) {
        case AFMESH_NET_EV_CONNECTED: {
            // A replacement may still be loading its modules and waiting for its roster.
            const auto patience = replacing_.count(link.peer) ? connect_timeout_ : peer_timeout_;
            std::vector<uint8_t> ident;
            Status s = handshake_->open(ev.conn, link.peer, worker_->mailbox_for(link.peer), Clock::now() + patience,
                                        &ident);
            if (s) s = send_handshake_locked(ev.conn, link, ident, "IDENT");
            if (!s) refuse_locked(ev.conn, s);
            break;
        }
        case AFMESH_NET_EV_RECV:
            if (link.ended) break;
            link.heard = true;
            if (link.trusted)
                on_message_locked(link, ev.data, ev.len);
            else
                on_handshake_message_locked(ev.conn, link, ev.data, ev.len);
            break;
        case AFMESH_NET_EV_IMM:
            if (link.ended) break;
            if (!link.trusted) {
                refuse_locked(ev.conn, {Code::kAccess, "it wrote into this node before completing the handshake"});
                break;
            }
            link.heard = true;
            if (role_ == Role::kWorker)
                worker_->on_imm(link.peer, ev.imm);
            else
                server_->on_imm(link.peer, ev.imm);
            break;
        case AFMESH_NET_EV_WRITE_DONE:
            if (role_ == Role::kServer && link.trusted) server_->on_write_done(link.peer, ev.cookie);
            break;
        case AFMESH_NET_EV_SEND_DONE:
            if (ev.cookie == kFarewellCookie) farewell_done_locked(ev.conn);
            break;
        case AFMESH_NET_EV_CONN_ERROR: {
            Status why{static_cast<Code>(ev.status), ev.reason ? ev.reason : "connection failed"};
            farewell_done_locked(ev.conn);
            if (!link.trusted) {
                refuse_locked(ev.conn, why);  // a stranger that went away, or a server never reached
            } else if (!link.ended) {
                link.ended = true;
                fail_peer(link.peer, why);
            }
            break;
        }
        }
    }
    (void)flush_engines_locked();
}

void Node::on_message_locked(Link &link, const void *data, size_t len) {
    assert_engines_locked();
    const auto type = wire::peek_type(data, len);
    if (type == wire::Type::kHeartbeat) return;  // it has done its job: link.heard
    if (type == wire::Type::kBye) {
        link.ended = true;
        fail_peer(link.peer, {Code::kClosed, "it has stopped"});
    } else if (role_ == Role::kWorker) {
        worker_->on_message(link.peer, data, len);
    } else {
        server_->on_message(link.peer, data, len);
    }
}

// Before its handshake completes, a connection may carry only the
// handshake's next message; anything else, or a failed proof, drops it.
void Node::on_handshake_message_locked(afmesh_net_conn *conn, Link &link, const void *data, size_t len) {
    assert_engines_locked();
    std::vector<uint8_t> reply;
    const auto type = wire::peek_type(data, len);
    Status s;
    if (role_ == Role::kWorker) {
        s = handshake_->answer(conn, data, len, &reply);
        if (s) s = send_handshake_locked(conn, link, reply, "PROOF");
        if (s) {
            link.trusted = true;
            ++connected_;
            peer_connected_locked(link.peer);
        }
    } else if (type == wire::Type::kIdent) {
        s = handshake_->challenge(conn, data, len, &reply);
        if (s) s = send_handshake_locked(conn, link, reply, "CHALLENGE");
    } else if (type == wire::Type::kProof) {
        wire::Ident ident;
        s = handshake_->verify(conn, data, len, &ident);
        if (s) s = server_->attach_worker(ident, conn);
        if (s) {
            link.peer = ident.worker_rank;
            link.trusted = true;
            peer_connected_locked(link.peer);
        }
    } else {
        s = {Code::kAccess, "its first message was not an IDENT"};
    }
    if (!s) return refuse_locked(conn, s);
    link.last_heard = Clock::now();
    note_handshake_progress_locked();
}

// Sets data_plane_settled_ once start() has nothing more to wait for, and
// wakes it: handshakes complete on whichever thread polls.
void Node::note_handshake_progress_locked() {
    if (data_plane_settled_.load()) return;
    assert_engines_locked();
    const bool settled =
        !connect_failure_ || (role_ == Role::kWorker ? connected_ + static_cast<int>(down_at_join_.size()) >= num_servers()
                                                     : server_->all_workers_attached());
    if (!settled) return;
    data_plane_settled_.store(true);
    progress_->notify_waiters();
}

Status Node::send_handshake_locked(afmesh_net_conn *conn, const Link &link, const std::vector<uint8_t> &message,
                                  const char *what) {
    take_module_error();
    if (send_locked(conn, link, message, 0, 0) != AFMESH_HAL_OK)
        return {Code::kPeerFailed, std::string("cannot send ") + what + ": " + take_module_error()};
    return Status::ok();
}

int Node::send_locked(afmesh_net_conn *conn, const Link &link, const std::vector<uint8_t> &message, uint32_t flags,
                      uint64_t cookie) {
    const int rc = transport_->net().send(transport_->ctx(), conn, message.data(), message.size(), flags, cookie);
    // A server's CHALLENGE goes to a connection that has not proved who it is yet: counted with nobody.
    if (link.peer >= 0) {
        PeerCounters &counters = counters_->peer(link.peer);
        if (rc == AFMESH_HAL_OK) counters.messages.add();
        else if (rc == AFMESH_HAL_AGAIN) counters.queue_full.add();
    }
    return rc;
}

void Node::refuse_locked(afmesh_net_conn *conn, const Status &why) {
    auto it = links_.find(conn);
    if (it == links_.end()) return;
    const int32_t peer = it->second.peer;
    // Only a worker knows whom an unfinished handshake was with: the server it dialled.
    const std::string who = role_ == Role::kWorker ? "server " + std::to_string(peer) : "a data connection";
    if (role_ == Role::kWorker) {
        fail_peer(peer, why);
        if (connect_failure_) connect_failure_ = {why.code(), who + ": " + why.message()};
        note_handshake_progress_locked();
    }
    counters_->connections_refused.add();
    uint64_t held_back = 0;
    if (refusal_log_.allow(Clock::now(), &held_back))
        AFMESH_LOG(AFMESH_LOG_WARN, "dropping %s: %s (%llu refused in all, %llu not logged since the last report)",
                   who.c_str(), why.message().c_str(), static_cast<unsigned long long>(counters_->connections_refused.get()),
                   static_cast<unsigned long long>(held_back));
    close_link_locked(conn);
}

void Node::close_link_locked(afmesh_net_conn *conn) {
    transport_->net().close(transport_->ctx(), conn);
    links_.erase(conn);
    handshake_->forget(conn);
    farewell_done_locked(conn);
}

// Every heartbeat interval: each live peer gets a HEARTBEAT, and a peer
// that has sent nothing at all for the peer timeout is failed, so a frozen
// or partitioned peer turns into an error naming it whether or not the
// scheduler is still there to notice; connections that have not completed
// their handshake by their deadline are dropped.
void Node::tick(Clock::time_point now) {
    MutexLock lock(&mu_);
    for (afmesh_net_conn *conn : handshake_->take_expired(now))
        refuse_locked(conn, {Code::kTimeout, "no handshake within " + std::to_string(peer_timeout_.count()) + " ms"});
    std::vector<uint8_t> heartbeat;
    wire::encode_heartbeat(heartbeat);
    std::vector<afmesh_net_conn *> silent;
    for (auto &[conn, link] : links_) {
        if (!link.trusted || link.ended) continue;
        if (link.heard) {
            link.heard = false;
            link.last_heard = now;
        } else {
            counters_->peer(link.peer).heartbeats_missed.add();
            if (now - link.last_heard > peer_timeout_) {
                silent.push_back(conn);
                continue;
            }
        }
        // A full send queue already says the peer has work to read; AGAIN is no failure here.
        (void)send_locked(conn, link, heartbeat, 0, 0);
    }
    const char *peer_role = role_ == Role::kWorker ? "server " : "worker ";
    for (afmesh_net_conn *conn : silent) {
        const Link &link = links_.at(conn);
        const auto quiet = std::chrono::duration_cast<std::chrono::milliseconds>(now - link.last_heard);
        fail_peer(link.peer, {Code::kPeerFailed, "no data-plane traffic or heartbeat from " + std::string(peer_role) +
                                                     std::to_string(link.peer) + " for " + std::to_string(quiet.count()) +
                                                     " ms (AFMESH_PEER_TIMEOUT_MS): frozen, partitioned or overloaded"});
        // Closed, so a peer that was only frozen learns it has been given up on when it wakes.
        close_link_locked(conn);
    }
    (void)flush_engines_locked();
}

Status Node::stats(int32_t peer, afmesh_stats *out) const {
    if (peer >= 0) {
        if (static_cast<size_t>(peer) >= counters_->num_peers())
            return {Code::kNotFound, std::string("no ") + (role_ == Role::kWorker ? "server " : "worker ") +
                                         std::to_string(peer) + " in this cluster of " +
                                         std::to_string(counters_->num_peers())};
        counters_->peer(peer).push_pulls.add_to(out);
        counters_->peer(peer).add_traffic_to(out);
        return Status::ok();
    }
    uint64_t transport_syscalls = 0;
    if (Status s = transport_->syscalls(&transport_syscalls); !s) return s;
    counters_->add_to(out);
    progress_->counters().add_to(out);
    out->syscalls += transport_syscalls;
    out->staging_copies += staging_->copies();
    out->staging_bytes += staging_->copied_bytes();
    return Status::ok();
}

void Node::fail_peer(int32_t rank, const Status &why) {
    assert_engines_locked();
    if (worker_) worker_->fail_server(rank, why);
    if (server_) server_->fail_worker(rank, why);
}

// A peer's operations have failed: the application hears of it once per
// incarnation (membership_events.h), unless this node is the one stopping.
void Node::report_peer_down_locked(int32_t peer, const Status &why) {
    note_handshake_progress_locked();  // a server's start-up waits for every worker attached or failed
    if (stopping_.load()) return;
    const Role role = peer_role();
    const Code code = why.code() == Code::kClosed ? Code::kClosed : Code::kPeerFailed;
    events_.peer_down(role, peer, handshake_->incarnation(role, peer), {code, why.message()});
}

void Node::on_peer_down(Role role, int32_t rank, const std::string &reason) {
    if (role == Role::kScheduler) {
        // Rejoining a restarted one is the control client's to say (AFMESH_SCHEDULER_RECONNECT_MS).
        if (config_ms(config_, "AFMESH_SCHEDULER_RECONNECT_MS").count() == 0)
            AFMESH_LOG(AFMESH_LOG_WARN,
                       "lost the scheduler (%s): peers are still watched by data-plane heartbeats, and this node "
                       "will stop without the cluster-wide agreement",
                       reason.c_str());
        if (!stopping_.load()) events_.peer_down(Role::kScheduler, -1, 0, {Code::kPeerFailed, reason});
        return;
    }
    const Role peers = peer_role();
    if (role != peers) return;
    MutexLock lock(&mu_);
    fail_peer(rank, {Code::kPeerFailed, "declared dead by the scheduler: " + reason});
}

// A failed peer's replacement was admitted (the scheduler holds its roster
// until this returns). What is left of the old incarnation goes first: its
// operations fail, if nothing had failed them yet, and its connections
// close. Then only the new incarnation passes the handshake: a worker dials
// the new server, a server waits for the new worker to dial it. The
// application hears PEER_UP once that handshake completes.
void Node::on_peer_up(const RosterEntry &entry) {
    if (entry.role == Role::kScheduler) {
        AFMESH_LOG(AFMESH_LOG_INFO, "a restarted scheduler has taken this node back");
        if (!stopping_.load()) events_.peer_up(Role::kScheduler, -1, 0);
        return;
    }
    const Role peers = peer_role();
    if (entry.role != peers) return;
    MutexLock lock(&mu_);
    if (stopping_.load()) return;  // under the lock: close_data_plane() must not be followed by a dial
    assert_engines_locked();
    fail_peer(entry.rank, {Code::kPeerFailed, "replaced by a new incarnation"});
    std::vector<afmesh_net_conn *> old;
    for (const auto &[conn, link] : links_)
        if (link.peer == entry.rank) old.push_back(conn);
    for (afmesh_net_conn *conn : old) close_link_locked(conn);
    handshake_->replace(entry.role, entry.rank, entry.incarnation);
    replacing_.insert(entry.rank);
    if (server_) return server_->replace_worker(entry.rank);
    worker_->replace_server(entry.rank);
    if (Status s = dial_server_locked(entry); !s) {
        AFMESH_LOG(AFMESH_LOG_WARN, "cannot reach the replacement of server %d: %s", entry.rank, s.message().c_str());
        worker_->fail_server(entry.rank, s);
    }
}

// Under a job manager, global rank 0 serves the rendezvous too. It listens
// on every address at the scheduler's port: the name the others reach it by
// (a master address, a Kubernetes service) need not be one of its own.
Status Node::start_embedded_scheduler() {
    const std::optional<JobRole> &job = config_.job_role();
    if (!job || !job->runs_scheduler) return Status::ok();
    control::HostPort at;
    if (Status s = control::parse_host_port(job->scheduler, &at); !s) return s;
    if (Status s = Scheduler::start(control_options(config_), ":" + at.port, &embedded_scheduler_); !s)
        return {s.code(), "the scheduler this process runs for " + config_.job_place()->launcher + ": " + s.message()};
    AFMESH_LOG(AFMESH_LOG_INFO, "%s", describe_job(*config_.job_place(), *job).c_str());
    return Status::ok();
}

Status Node::stop() {
    if (stopped_ || !control_) return Status::ok();
    stopped_ = true;
    stopping_.store(true);  // peers failing from here on are this node's doing, not news
    events_.close();
    ticker_.reset();  // no heartbeat may chase a connection closed below
    if (progress_) say_goodbye();
    close_data_plane();
    Status agreed = control_->stop(config_ms(config_, "AFMESH_CONNECT_TIMEOUT_MS"));
    // The embedded scheduler ends with the cluster; the others need it until then.
    if (embedded_scheduler_)
        if (Status s = embedded_scheduler_->wait(config_ms(config_, "AFMESH_CONNECT_TIMEOUT_MS")); !s && agreed)
            agreed = s;
    // Without a scheduler nobody can confirm the others stopped too; this
    // node has said BYE to each of them, which is all it owes them.
    if (!agreed && control_->scheduler_gone()) {
        AFMESH_LOG(AFMESH_LOG_WARN, "stopped without the cluster-wide agreement: %s", agreed.message().c_str());
        return Status::ok();
    }
    return agreed;
}

bool Node::flush_engines_locked() {
    assert_engines_locked();
    const bool worker_drained = !worker_ || worker_->flush();
    const bool server_drained = !server_ || server_->flush();
    return worker_drained && server_drained;
}

// Says BYE to every peer, so those still waiting on this node (a server in
// get_batch, a worker in wait) learn at once that it has gone instead of when
// the whole cluster has agreed to stop. The BYE goes behind everything queued
// for the peer, and the connections stay open until it has left (its
// SEND_DONE, which also covers what was posted before it): close() drops
// what a transport still holds, and that could be a last response. Bounded
// by the peer timeout: a peer that has stopped reading is given up on.
void Node::say_goodbye() {
    const auto deadline = Clock::now() + std::chrono::milliseconds(config_ms(config_, "AFMESH_PEER_TIMEOUT_MS"));
    for (;;) {
        {
            MutexLock lock(&mu_);
            if (flush_engines_locked() || Clock::now() >= deadline) break;
        }
        // Retried after the transport has made progress; rarely more than once.
        (void)progress_->wait_until([] { return false; },
                                    std::min(deadline, Clock::now() + std::chrono::milliseconds(1)));
    }
    {
        MutexLock lock(&mu_);
        std::vector<uint8_t> bye;
        wire::encode_bye(bye);
        for (const auto &[conn, link] : links_)
            if (link.trusted && send_locked(conn, link, bye, AFMESH_NET_SIGNAL, kFarewellCookie) == AFMESH_HAL_OK)
                farewells_.insert(conn);
        farewells_left_.store(farewells_.size());
    }
    (void)progress_->wait_until([this] { return farewells_left_.load() == 0; }, deadline);
}

// A BYE has left, or its connection failed: one farewell fewer to wait for.
void Node::farewell_done_locked(afmesh_net_conn *conn) {
    if (farewells_.erase(conn) == 0) return;
    farewells_left_.store(farewells_.size());
    progress_->notify_waiters();
}

// Closes every data connection; operations on them fail with CLOSED.
void Node::close_data_plane() {
    MutexLock lock(&mu_);
    for (const auto &[conn, link] : links_) {
        transport_->net().close(transport_->ctx(), conn);
        if (link.trusted) fail_peer(link.peer, {Code::kClosed, "this node is stopping"});
    }
    links_.clear();
    farewells_.clear();
}

Node::~Node() {
    if (Status s = stop(); !s) AFMESH_LOG(AFMESH_LOG_WARN, "stop: %s", s.message().c_str());
    ticker_.reset();  // stop() did, unless start() failed half-way
    if (progress_) progress_->stop();
    if (transport_) close_data_plane();  // stop() did, unless start() failed half-way
    // The control client first: its thread reports peers going down to the engines.
    control_.reset();
    worker_.reset();
    server_.reset();
    staging_.reset();
    registry_.reset();
}

}  // namespace afmesh
