// SPDX-License-Identifier: Apache-2.0
// The scheduler: one thread, one poll() loop over the listener and every
// control connection. Sockets are non-blocking and every peer has its own
// output queue, so a slow or silent node can delay nobody but itself.
//
// A connection goes GREETING (until its HELLO) -> JOINED (admitted, waiting
// for the roster) -> MEMBER (in the roster) -> CLOSING (refused, evicted or
// finished: its last frames are flushed, then it is closed). The cluster-wide
// state lives in Rendezvous (before the roster), MemberTable (after it) and
// BarrierTracker.
//
// A scheduler restarted under a running cluster hears REJOIN instead of
// HELLO first: it adopts the cluster (Adoption) instead of forming one, and
// holds any HELLO, a replacement's, until the adoption is complete.
#include <poll.h>
#include <sys/socket.h>

#include <array>
#include <cerrno>
#include <condition_variable>
#include <map>
#include <optional>
#include <set>
#include <thread>
#include <utility>

#include "control/adoption.h"
#include "control/barrier_tracker.h"
#include "control/control_client.h"
#include "control/frame_reader.h"
#include "control/frame_writer.h"
#include "control/member_table.h"
#include "control/messages.h"
#include "control/options_check.h"
#include "control/rendezvous.h"
#include "control/socket_util.h"
#include "control/startup_timeline.h"
#include "control/waker.h"
#include "log.h"
#include "log_limiter.h"
#include "thread_annotations.h"

namespace afmesh {
namespace control {
namespace {

using std::chrono::milliseconds;

/** How long a refused or finished peer gets to read its last frames and close. */
constexpr auto kCloseLinger = std::chrono::seconds(2);
/** A peer with this much unsent output is not reading its connection. */
constexpr size_t kMaxQueuedBytes = 64u << 20;
/** Pause before accepting again after accept() failed (e.g. out of descriptors), instead of spinning. */
constexpr auto kAcceptBackoff = milliseconds(100);

enum class PeerPhase { kGreeting, kJoined, kMember, kClosing };

// Every node enters its first barrier over everyone once its data plane is
// connected (Node::start): the scheduler's start-up timeline ends there.
constexpr uint64_t kStartupBarrier = 1;

// How long a restarted scheduler waits, from the first REJOIN, for the rest
// of the cluster. A live node notices the old scheduler gone within its
// heartbeat timeout and then retries at least every second (ControlClient):
// one timeout and two retries' worth, and a node still missing is dead.
constexpr auto kRejoinRetries = std::chrono::seconds(2);

Status issue_incarnations(Roster *roster) {
    for (auto *entries : {&roster->workers, &roster->servers}) {
        for (RosterEntry &entry : *entries) {
            if (Status s = draw_incarnation(&entry.incarnation); !s) return s;
        }
    }
    return Status::ok();
}

Status roster_fits(const std::vector<uint8_t> &payload) {
    if (payload.size() <= kMaxFramePayload) return Status::ok();
    return {Code::kInvalidArgument, "the roster is " + std::to_string(payload.size()) +
                                        " bytes, above the control protocol's " + std::to_string(kMaxFramePayload) +
                                        "-byte frame limit: transport address blobs are too big"};
}

struct Peer {
    PeerId id = 0;
    UniqueFd fd;
    FrameReader reader{kMaxNodePayload};
    FrameWriter writer;
    std::string host;      // bare IP, for the roster
    std::string endpoint;  // "ip:port", for logs
    PeerPhase phase = PeerPhase::kGreeting;
    Role role = Role::kWorker;  // from kJoined
    NodeId node;                // from kMember
    Clock::time_point last_heard;
    Clock::time_point close_by;  // kClosing
    bool write_shut = false;     // kClosing: FIN sent after the last frame
    std::optional<ProgressMsg> progress_sent;
    bool closed = false;  // erased at the end of the loop iteration
    // A replacement's roster waits until every other member has taken in its
    // PEER_UP (their PEER_UP_ACKs), so none meets it with the old key.
    bool roster_held = false;
    std::set<PeerId> awaiting_acks;
    std::array<uint64_t, 3> barriers_done{};  // where its barrier numbering starts

    std::string name() const {
        if (phase == PeerPhase::kMember) return node_name(node);
        if (phase == PeerPhase::kJoined) return std::string(role_name(role)) + " at " + endpoint;
        return "connection from " + endpoint;
    }
};

class SchedulerImpl final : public Scheduler {
public:
    SchedulerImpl(const ControlOptions &options, UniqueFd listener, std::string address, Waker waker,
                  const crypto::Key &cluster_key)
        : options_(options),
          listener_(std::move(listener)),
          address_(std::move(address)),
          waker_(std::move(waker)),
          cluster_key_(cluster_key),
          rendezvous_(options),
          barriers_(options.num_workers, options.num_servers),
          timeline_(Clock::now()) {
        summary_ = join_summary();
        thread_ = std::thread([this] { run(); });
    }

    ~SchedulerImpl() override {
        {
            MutexLock lock(&mu_);
            exit_requested_ = true;
        }
        waker_.wake();
        thread_.join();
    }

    std::string address() const override { return address_; }

    Status wait(milliseconds timeout) override {
        MutexLock lock(&mu_);
        if (!lock.wait_for(cv_, timeout, [&]() AFMESH_REQUIRES(mu_) { return finished_; })) {
            return {Code::kTimeout, "the scheduler is still running after " + std::to_string(timeout.count()) +
                                        " ms: " + summary_};
        }
        return final_status_;
    }

private:
    void run();
    void poll_once();
    void accept_all(Clock::time_point now);
    void service(Peer &p, Clock::time_point now);
    void handle(Peer &p, const Frame &frame);
    void on_hello(Peer &p, const Frame &frame);
    void on_rejoin(Peer &p, const Frame &frame);
    /** Why this scheduler cannot adopt a running cluster now, or OK. */
    Status adoptable() const;
    /** Rebuilds the roster from the nodes that rejoined; the others are down. */
    void finish_adoption();
    void admit_replacement(Peer &p, const HelloMsg &m);
    void on_peer_up_ack(Peer &p, const Frame &frame);
    /** `acked` has taken in the PEER_UP of every replacement it was asked to (or is gone). */
    void ack_replacements(PeerId acked, std::optional<NodeId> of = std::nullopt);
    /** Sends a held roster once no member's ack is awaited any more. */
    void release_roster(Peer &p);
    /** Which failed node a replacement may take the place of: its rank in `*node`, or why none. */
    Status replaceable(const Hello &hello, NodeId *node) const;
    void on_barrier(Peer &p, const Frame &frame);
    void on_stop(Peer &p);
    void publish_roster();
    using Placement = std::vector<std::pair<PeerId, NodeId>>;
    /**
     * Makes the placed nodes members and sends each its copy of `msg`
     * (your_rank patched in); false, with every one of them refused, when
     * the roster does not fit in a frame.
     */
    bool seat_members(RosterMsg msg, const Placement &placement);
    /** Refuses every placed node with `why` (nothing is left to tell the cluster). */
    void refuse_all(const Placement &placement, const Status &why);
    void tick(Clock::time_point now);
    void finish_iteration();
    void maybe_finish();
    void give_up_joining();
    template <class Message>
    void end_sessions(PeerPhase phase, const Message &last);

    /** The peer is gone or must go. With `tell`, it gets an ERROR before the connection closes. */
    void lose(Peer &p, const std::string &reason, std::optional<Status> tell);
    void protocol_error(Peer &p, const Status &error);
    void begin_closing(Peer &p);
    void close_now(Peer &p);
    void flush(Peer &p);
    void send_release(const BarrierRelease &release);
    void member_unavailable(NodeId node, const std::string &why);
    Peer *member_peer(NodeId node);

    std::string join_summary() const;
    void set_finished(Status status);

    const ControlOptions options_;
    UniqueFd listener_;
    const std::string address_;
    Waker waker_;
    const crypto::Key cluster_key_;  // handed to the admitted nodes in the roster (unless adopting one)
    std::map<PeerId, Peer> peers_;
    PeerId next_peer_ = 1;
    Rendezvous rendezvous_;
    std::optional<Adoption> adoption_;  // restarted under a running cluster, until it is adopted
    Clock::time_point adoption_deadline_;
    std::map<PeerId, HelloMsg> held_hellos_;  // replacements that came during the adoption
    std::optional<MemberTable> members_;  // from the roster on
    Roster roster_;                       // as published, then as replacements change it
    std::map<NodeId, PeerId> member_peers_;
    BarrierTracker barriers_;
    StartupTimeline timeline_;
    std::vector<PeerId> progress_due_;  // peers owed a PROGRESS at the end of this iteration
    ProgressMsg progress_;              // the current one: join before the roster, stop after
    bool state_changed_ = false;
    bool finishing_ = false;  // STOP_DONE sent: draining the last connections
    Status outcome_;
    Clock::time_point next_tick_;
    Clock::time_point join_deadline_;  // no complete roster by then: give up
    Clock::time_point accept_resume_;
    LogLimiter accept_log_{std::chrono::seconds(1)};

    Mutex mu_;
    std::condition_variable cv_;
    bool exit_requested_ AFMESH_GUARDED_BY(mu_) = false;
    bool finished_ AFMESH_GUARDED_BY(mu_) = false;
    Status final_status_ AFMESH_GUARDED_BY(mu_);
    std::string summary_ AFMESH_GUARDED_BY(mu_);  // what wait() reports on timeout
    std::thread thread_;
};

void SchedulerImpl::run() {
    next_tick_ = Clock::now() + options_.heartbeat_interval;
    // Twice the nodes' own deadline: they give up first, each with the
    // scheduler's latest PROGRESS report; the scheduler ends after them.
    join_deadline_ = Clock::now() + 2 * options_.connect_timeout;
    progress_ = {ProgressPhase::kJoin, rendezvous_.workers_missing(), rendezvous_.servers_missing(), ""};
    for (;;) {
        {
            MutexLock lock(&mu_);
            if (exit_requested_ || finished_) return;
        }
        if (finishing_ && peers_.empty()) {
            set_finished(outcome_);
            return;
        }
        poll_once();
    }
}

void SchedulerImpl::poll_once() {
    std::vector<pollfd> fds;
    std::vector<PeerId> ids;
    fds.push_back({waker_.fd(), POLLIN, 0});
    Clock::time_point now = Clock::now();
    Clock::time_point deadline = next_tick_;
    bool accepting = listener_.valid() && now >= accept_resume_;
    if (accepting) fds.push_back({listener_.get(), POLLIN, 0});
    if (listener_.valid() && !accepting) deadline = std::min(deadline, accept_resume_);
    for (auto &[id, p] : peers_) {
        fds.push_back({p.fd.get(), static_cast<short>(POLLIN | (p.writer.empty() ? 0 : POLLOUT)), 0});
        ids.push_back(id);
        if (p.phase == PeerPhase::kClosing) deadline = std::min(deadline, p.close_by);
    }
    int rc = poll(fds.data(), fds.size(), poll_timeout_ms(deadline));
    if (rc < 0 && errno != EINTR) {
        // Only a broken process (EFAULT, ENOMEM) gets here; report it rather than spin on it.
        AFMESH_LOG(AFMESH_LOG_ERROR, "scheduler: poll failed: %s; shutting down", errno_text(errno).c_str());
        set_finished({Code::kError, "scheduler poll failed: " + errno_text(errno)});
        return;
    }
    now = Clock::now();
    if (fds[0].revents) waker_.drain();
    if (accepting && fds[1].revents) accept_all(now);
    size_t first_peer = accepting ? 2 : 1;
    for (size_t i = 0; i < ids.size(); ++i) {
        if (!fds[first_peer + i].revents) continue;
        Peer &p = peers_.at(ids[i]);
        if (!p.closed) service(p, now);
    }
    if (now >= next_tick_) {
        tick(now);
        next_tick_ = now + options_.heartbeat_interval;
    }
    for (auto &[id, p] : peers_) {
        if (p.phase == PeerPhase::kClosing && !p.closed && now >= p.close_by) close_now(p);
    }
    finish_iteration();
}

void SchedulerImpl::accept_all(Clock::time_point now) {
    for (;;) {
        UniqueFd fd;
        std::string host, endpoint;
        if (Status s = accept_tcp(listener_.get(), &fd, &host, &endpoint); !s) {
            uint64_t held_back = 0;
            if (accept_log_.allow(now, &held_back))
                AFMESH_LOG(AFMESH_LOG_WARN, "scheduler: %s; pausing new connections for %lld ms (%llu more pauses "
                           "since the last report)", s.message().c_str(),
                           static_cast<long long>(kAcceptBackoff.count()), static_cast<unsigned long long>(held_back));
            accept_resume_ = now + kAcceptBackoff;
            return;
        }
        if (!fd.valid()) return;
        PeerId id = next_peer_++;
        Peer &p = peers_[id];
        p.id = id;
        p.fd = std::move(fd);
        p.host = std::move(host);
        p.endpoint = std::move(endpoint);
        p.last_heard = now;
        AFMESH_LOG(AFMESH_LOG_DEBUG, "scheduler: connection from %s", p.endpoint.c_str());
    }
}

void SchedulerImpl::service(Peer &p, Clock::time_point now) {
    Status read = p.reader.fill(p.fd.get());
    if (p.phase == PeerPhase::kClosing) {
        // Its input no longer matters; end of stream means it has read our last frames.
        p.reader.clear();
        if (!read) close_now(p);
        return;
    }
    // Frames that arrived before an end of stream still count (e.g. a STOP then a close).
    for (;;) {
        std::optional<Frame> frame;
        if (Status s = p.reader.next(&frame); !s) {
            protocol_error(p, s);
            return;
        }
        if (!frame) break;
        p.last_heard = now;
        handle(p, *frame);
        if (p.closed || p.phase == PeerPhase::kClosing) return;
    }
    if (read.code() == Code::kInvalidArgument) return protocol_error(p, read);
    if (!read) lose(p, read.message(), std::nullopt);
}

void SchedulerImpl::handle(Peer &p, const Frame &frame) {
    MessageType type = frame.type;
    if (type == MessageType::kHeartbeat && p.phase != PeerPhase::kGreeting) {
        HeartbeatMsg m;
        if (Status s = decode(frame.payload, &m); !s) protocol_error(p, s);
        return;
    }
    if (p.phase == PeerPhase::kGreeting && type == MessageType::kHello) return on_hello(p, frame);
    if (p.phase == PeerPhase::kGreeting && type == MessageType::kRejoin) return on_rejoin(p, frame);
    if (p.phase == PeerPhase::kMember && type == MessageType::kBarrier) return on_barrier(p, frame);
    if (p.phase == PeerPhase::kMember && type == MessageType::kPeerUpAck) return on_peer_up_ack(p, frame);
    if (p.phase == PeerPhase::kMember && type == MessageType::kStop) {
        StopMsg m;
        if (Status s = decode(frame.payload, &m); !s) return protocol_error(p, s);
        return on_stop(p);
    }
    protocol_error(p, {Code::kInvalidArgument, std::string("unexpected ") + message_type_name(type) + " (type " +
                                                   std::to_string(static_cast<unsigned>(type)) + ") from a " +
                                                   (p.phase == PeerPhase::kGreeting ? "node that has not sent HELLO"
                                                    : p.phase == PeerPhase::kJoined ? "node waiting for the roster"
                                                                                    : "cluster member")});
}

void SchedulerImpl::on_hello(Peer &p, const Frame &frame) {
    HelloMsg m;
    if (Status s = decode(frame.payload, &m); !s) return protocol_error(p, s);
    if (members_) return admit_replacement(p, m);
    if (adoption_) {
        // Only a replacement can join a running cluster, and which node it
        // replaces is known once the adoption is.
        p.phase = PeerPhase::kJoined;
        p.role = m.hello.role;
        held_hellos_[p.id] = std::move(m);
        return;
    }
    Status admitted = rendezvous_.admit(p.id, m, p.host);
    if (!admitted) {
        AFMESH_LOG(AFMESH_LOG_WARN, "scheduler: refusing %s from %s: %s", role_name(m.hello.role), p.endpoint.c_str(),
                   admitted.to_string().c_str());
        return lose(p, admitted.message(), admitted);
    }
    p.phase = PeerPhase::kJoined;
    p.role = m.hello.role;
    timeline_.joined(m.hello.requested_rank >= 0 ? node_name({p.role, m.hello.requested_rank}) : p.name(), Clock::now());
    // Debug, as every per-node line here: info is a handful of lines per cluster, whatever its size.
    AFMESH_LOG(AFMESH_LOG_DEBUG, "scheduler: %s (requested rank %d) joined from %s; still missing %u worker(s), %u server(s)",
               role_name(p.role), m.hello.requested_rank, p.endpoint.c_str(), rendezvous_.workers_missing(),
               rendezvous_.servers_missing());
    state_changed_ = true;
    if (rendezvous_.complete()) {
        publish_roster();
    } else {
        progress_due_.push_back(p.id);
    }
}

void SchedulerImpl::publish_roster() {
    Placement placement;
    RosterMsg msg;
    msg.roster = rendezvous_.assign(&placement);
    msg.roster.cluster_key = cluster_key_;
    if (Status s = issue_incarnations(&msg.roster); !s) return refuse_all(placement, s);
    if (!seat_members(std::move(msg), placement)) return;
    timeline_.roster_sent(Clock::now());
    AFMESH_LOG(AFMESH_LOG_INFO, "scheduler: roster complete: %d worker(s), %d server(s)", options_.num_workers,
               options_.num_servers);
}

bool SchedulerImpl::seat_members(RosterMsg msg, const Placement &placement) {
    // Encoded once, not once per node: copies differ only in your_rank.
    const std::vector<uint8_t> payload = encode(msg);
    if (Status too_big = roster_fits(payload); !too_big) {
        refuse_all(placement, too_big);
        return false;
    }
    members_.emplace(options_.num_workers, options_.num_servers);
    roster_ = std::move(msg.roster);
    for (auto &[peer, node] : placement) {
        Peer &p = peers_.at(peer);
        p.phase = PeerPhase::kMember;
        p.node = node;
        p.progress_sent.reset();
        member_peers_[node] = peer;
        p.writer.queue(MessageType::kRoster, with_your_rank(payload, node.rank));
    }
    return true;
}

void SchedulerImpl::refuse_all(const Placement &placement, const Status &why) {
    AFMESH_LOG(AFMESH_LOG_ERROR, "scheduler: %s", why.message().c_str());
    for (auto &[peer, node] : placement) lose(peers_.at(peer), why.message(), why);
}

void SchedulerImpl::on_rejoin(Peer &p, const Frame &frame) {
    RejoinMsg m;
    if (Status s = decode(frame.payload, &m); !s) return protocol_error(p, s);
    const NodeId node{m.hello.hello.role, m.hello.hello.requested_rank};
    Status admitted = adoptable();
    if (admitted) admitted = rendezvous_.check_node(m.hello);
    if (admitted && !adoption_) {
        const auto window = std::chrono::duration_cast<milliseconds>(options_.heartbeat_timeout + kRejoinRetries);
        adoption_.emplace(options_);
        adoption_deadline_ = Clock::now() + window;
        AFMESH_LOG(AFMESH_LOG_INFO, "scheduler: a running cluster is rejoining; waiting up to %lld ms for its nodes",
                   static_cast<long long>(window.count()));
    }
    if (admitted) admitted = adoption_->admit(p.id, m, p.host);
    if (!admitted) {
        AFMESH_LOG(AFMESH_LOG_WARN, "scheduler: refusing %s's rejoin from %s: %s", node_name(node).c_str(),
                   p.endpoint.c_str(), admitted.to_string().c_str());
        return lose(p, admitted.message(), admitted);
    }
    p.phase = PeerPhase::kJoined;
    p.role = node.role;
    AFMESH_LOG(AFMESH_LOG_DEBUG, "scheduler: %s rejoined from %s", node_name(node).c_str(), p.endpoint.c_str());
    if (adoption_->complete()) finish_adoption();
}

Status SchedulerImpl::adoptable() const {
    if (members_)
        return {Code::kInvalidArgument, "this scheduler's cluster is formed: a node rejoins only a scheduler "
                                        "restarted under its cluster, before the others have rejoined"};
    if (rendezvous_.workers_missing() < static_cast<uint32_t>(options_.num_workers) ||
        rendezvous_.servers_missing() < static_cast<uint32_t>(options_.num_servers))
        return {Code::kInvalidArgument, "this scheduler is forming a new cluster: nodes have joined it with HELLO"};
    return Status::ok();
}

void SchedulerImpl::finish_adoption() {
    Adoption::Result adopted;
    const Status finished = adoption_->finish(&adopted);
    adoption_.reset();
    if (!finished) return refuse_all(adopted.placement, finished);
    if (!seat_members({-1, std::move(adopted.roster), false, adopted.barriers_entered, adopted.missing},
                      adopted.placement))
        return;
    for (NodeId node : adopted.missing) members_->mark_failed(node, "it did not rejoin the restarted scheduler");
    for (auto &[peer, node] : adopted.placement) barriers_.resume(node, adopted.barriers_entered);
    state_changed_ = true;
    AFMESH_LOG(AFMESH_LOG_INFO, "scheduler: adopted the running cluster: %zu of %d node(s) rejoined%s%s",
               adopted.placement.size(), options_.num_workers + options_.num_servers,
               adopted.missing.empty() ? "" : "; down: ", list_nodes(adopted.missing).c_str());
    for (auto &[id, hello] : std::exchange(held_hellos_, {})) {
        Peer &p = peers_.at(id);
        p.phase = PeerPhase::kGreeting;
        admit_replacement(p, hello);
    }
}

// After the roster, a node can only take the place of a failed one: same
// role, that node's rank, a new incarnation. The others hear PEER_UP and
// connect to it; nothing of the failed incarnation passes their handshake.
void SchedulerImpl::admit_replacement(Peer &p, const HelloMsg &m) {
    NodeId node;
    Status admitted = rendezvous_.check_node(m);
    if (admitted) admitted = replaceable(m.hello, &node);
    RosterEntry entry{node.role, node.rank, p.host, m.hello.transport, m.hello.address, m.hello.device, 0};
    if (admitted) admitted = draw_incarnation(&entry.incarnation);
    if (admitted) {
        RosterMsg msg{node.rank, roster_, true, {}};
        msg.roster.of(node.role).at(static_cast<size_t>(node.rank)) =
            entry;
        admitted = roster_fits(encode(msg));
    }
    if (!admitted) {
        AFMESH_LOG(AFMESH_LOG_WARN, "scheduler: refusing %s from %s: %s", role_name(m.hello.role), p.endpoint.c_str(),
                   admitted.to_string().c_str());
        return lose(p, admitted.message(), admitted);
    }
    members_->mark_replaced(node);
    roster_.of(node.role).at(static_cast<size_t>(node.rank)) = entry;
    p.phase = PeerPhase::kMember;
    p.role = node.role;
    p.node = node;
    p.roster_held = true;
    p.barriers_done = barriers_.adopt(node);
    member_peers_[node] = p.id;
    // A member whose own roster is still held learns of this one from that roster.
    const PeerUpMsg up{entry};
    for (auto &[id, other] : peers_) {
        if (id == p.id || other.closed || other.phase != PeerPhase::kMember || other.roster_held) continue;
        queue_message(other.writer, up);
        p.awaiting_acks.insert(id);
    }
    release_roster(p);
    state_changed_ = true;
    AFMESH_LOG(AFMESH_LOG_INFO, "scheduler: %s replaced by a new incarnation from %s", p.name().c_str(),
               p.endpoint.c_str());
}

Status SchedulerImpl::replaceable(const Hello &hello, NodeId *node) const {
    const char *role = role_name(hello.role);
    if (members_->stopping())
        return {Code::kInvalidArgument, "the cluster is stopping: it takes no replacement for a failed node"};
    const int32_t n = options_.nodes_of(hello.role);
    if (hello.requested_rank < -1 || hello.requested_rank >= n)
        return {Code::kInvalidArgument, std::string("requested ") + role + " rank " +
                                            std::to_string(hello.requested_rank) + " is out of range: the cluster has " +
                                            std::to_string(n) + " " + role + "(s)"};
    const int32_t rank = hello.requested_rank >= 0 ? hello.requested_rank : members_->first_failed(hello.role);
    if (rank < 0)
        return {Code::kInvalidArgument, std::string("the cluster is complete and no ") + role +
                                            " has failed: a node can join after the roster only to replace a "
                                            "failed one"};
    *node = {hello.role, rank};
    if (members_->state(*node) != MemberState::kFailed)
        return {Code::kInvalidArgument, node_name(*node) +
                                            " is alive: a node can join after the roster only to replace a failed "
                                            "one"};
    return Status::ok();
}

void SchedulerImpl::on_peer_up_ack(Peer &p, const Frame &frame) {
    PeerUpAckMsg m;
    if (Status s = decode(frame.payload, &m); !s) return protocol_error(p, s);
    const NodeId node{m.role, m.rank};
    const auto &entries = roster_.of(m.role);
    // An ack for an incarnation replaced again since is old news.
    if (m.rank < 0 || static_cast<size_t>(m.rank) >= entries.size() ||
        entries[static_cast<size_t>(m.rank)].incarnation != m.incarnation)
        return;
    ack_replacements(p.id, node);
}

void SchedulerImpl::ack_replacements(PeerId acked, std::optional<NodeId> of) {
    for (auto &[id, p] : peers_) {
        if (!p.roster_held || p.closed || (of && p.node != *of)) continue;
        if (p.awaiting_acks.erase(acked)) release_roster(p);
    }
}

void SchedulerImpl::release_roster(Peer &p) {
    if (!p.roster_held || !p.awaiting_acks.empty()) return;
    p.roster_held = false;
    // Encoded now, not at admission: it carries replacements admitted, and
    // nodes lost, meanwhile.
    RosterMsg msg{p.node.rank, roster_, true, p.barriers_done, {}};
    for (Role role : {Role::kWorker, Role::kServer}) {
        const int32_t n = options_.nodes_of(role);
        for (int32_t rank = 0; rank < n; ++rank)
            if (members_->state({role, rank}) == MemberState::kFailed) msg.down.push_back({role, rank});
    }
    p.writer.queue(MessageType::kRoster, encode(msg));
}

void SchedulerImpl::on_barrier(Peer &p, const Frame &frame) {
    BarrierMsg m;
    if (Status s = decode(frame.payload, &m); !s) return protocol_error(p, s);
    if (!group_contains(m.group, p.node.role)) {
        return protocol_error(p, {Code::kInvalidArgument, p.name() + " entered a barrier over " +
                                                              group_name(m.group) + ", which it is not part of"});
    }
    if (m.group == BarrierGroup::kAll && m.seq == kStartupBarrier) timeline_.connected(p.name(), Clock::now());
    std::optional<BarrierRelease> released;
    if (Status s = barriers_.arrive(p.node, m.group, m.seq, members_->unavailable(m.group), &released); !s) {
        return protocol_error(p, s);
    }
    if (released) send_release(*released);
}

void SchedulerImpl::on_stop(Peer &p) {
    if (!members_->mark_stopped(p.node)) return;  // a repeated STOP changes nothing
    AFMESH_LOG(AFMESH_LOG_DEBUG, "scheduler: %s is stopping", p.name().c_str());
    member_unavailable(p.node, p.name() + " has stopped");
    state_changed_ = true;
    progress_due_.push_back(p.id);
}

void SchedulerImpl::lose(Peer &p, const std::string &reason, std::optional<Status> tell) {
    switch (p.phase) {
    case PeerPhase::kGreeting:
    case PeerPhase::kClosing: break;
    case PeerPhase::kJoined:
        rendezvous_.withdraw(p.id);
        if (adoption_) adoption_->withdraw(p.id);
        held_hellos_.erase(p.id);
        AFMESH_LOG(AFMESH_LOG_WARN, "scheduler: %s left before the roster was complete: %s", p.name().c_str(),
                   reason.c_str());
        state_changed_ = true;
        break;
    case PeerPhase::kMember:
        if (members_->mark_failed(p.node, reason)) {
            AFMESH_LOG(AFMESH_LOG_WARN, "scheduler: %s is down: %s", p.name().c_str(), reason.c_str());
            PeerDownMsg down{p.node.role, p.node.rank, reason};
            for (auto &[id, other] : peers_) {
                if (id != p.id && !other.closed && other.phase == PeerPhase::kMember) queue_message(other.writer, down);
            }
            member_unavailable(p.node, p.name() + " failed (" + reason + ")");
            state_changed_ = true;
        } else {
            AFMESH_LOG(AFMESH_LOG_DEBUG, "scheduler: %s left after stopping: %s", p.name().c_str(), reason.c_str());
        }
        member_peers_.erase(p.node);
        ack_replacements(p.id);  // a replacement waits for no ack from a node that is gone
        break;
    }
    if (tell && p.phase != PeerPhase::kClosing) {
        queue_message(p.writer, ErrorMsg{*tell});
        begin_closing(p);
    } else {
        close_now(p);
    }
}

void SchedulerImpl::protocol_error(Peer &p, const Status &error) {
    AFMESH_LOG(AFMESH_LOG_WARN, "scheduler: %s: %s; closing it", p.name().c_str(), error.to_string().c_str());
    lose(p, "protocol error: " + error.message(), error);
}

void SchedulerImpl::begin_closing(Peer &p) {
    p.phase = PeerPhase::kClosing;
    p.close_by = Clock::now() + kCloseLinger;
}

void SchedulerImpl::close_now(Peer &p) {
    if (p.phase == PeerPhase::kMember) member_peers_.erase(p.node);
    p.closed = true;
    p.fd.reset();
}

void SchedulerImpl::flush(Peer &p) {
    if (Status s = p.writer.flush(p.fd.get()); !s) {
        if (p.phase == PeerPhase::kClosing) return close_now(p);
        return lose(p, s.message(), std::nullopt);
    }
    if (p.writer.queued_bytes() > kMaxQueuedBytes) {
        return lose(p, "not reading its control connection (" + std::to_string(p.writer.queued_bytes()) +
                           " bytes queued)", std::nullopt);
    }
    if (p.phase == PeerPhase::kClosing && p.writer.empty() && !p.write_shut) {
        // FIN after the last frame; closing only once the peer closes too avoids a reset that could discard it.
        shutdown(p.fd.get(), SHUT_WR);
        p.write_shut = true;
    }
}

void SchedulerImpl::send_release(const BarrierRelease &release) {
    if (release.group == BarrierGroup::kAll && release.seq == kStartupBarrier && release.status)
        AFMESH_LOG(AFMESH_LOG_INFO, "scheduler: %s",
                   timeline_.summary(options_.num_workers, options_.num_servers, Clock::now()).c_str());
    for (NodeId node : release.nodes) {
        if (Peer *p = member_peer(node)) {
            queue_message(p->writer, BarrierDoneMsg{release.group, release.seq, release.status});
        }
    }
}

void SchedulerImpl::member_unavailable(NodeId node, const std::string &why) {
    for (const BarrierRelease &release : barriers_.fail_member(node, why)) send_release(release);
}

Peer *SchedulerImpl::member_peer(NodeId node) {
    auto it = member_peers_.find(node);
    if (it == member_peers_.end()) return nullptr;
    Peer &p = peers_.at(it->second);
    return p.closed || p.phase != PeerPhase::kMember ? nullptr : &p;
}

void SchedulerImpl::tick(Clock::time_point now) {
    if (adoption_ && now >= adoption_deadline_) finish_adoption();
    if (!members_ && !adoption_ && !finishing_ && now >= join_deadline_) return give_up_joining();
    for (auto &[id, p] : peers_) {
        if (p.closed || p.phase == PeerPhase::kClosing) continue;
        auto silent = std::chrono::duration_cast<milliseconds>(now - p.last_heard);
        if (silent > options_.heartbeat_timeout) {
            if (p.phase == PeerPhase::kGreeting) {
                AFMESH_LOG(AFMESH_LOG_WARN, "scheduler: %s sent no HELLO within %lld ms; closing it",
                           p.name().c_str(), static_cast<long long>(options_.heartbeat_timeout.count()));
                close_now(p);
                continue;
            }
            std::string reason = "no heartbeat for " + std::to_string(silent.count()) + " ms";
            lose(p, reason, Status(Code::kPeerFailed, "this node was declared dead: " + reason));
            continue;
        }
        if (p.phase == PeerPhase::kGreeting) continue;
        queue_message(p.writer, HeartbeatMsg{});
        bool waiting = p.phase == PeerPhase::kJoined ||
                       (p.phase == PeerPhase::kMember && members_->state(p.node) == MemberState::kStopped);
        if (waiting && p.progress_sent != progress_) progress_due_.push_back(id);
    }
}

void SchedulerImpl::finish_iteration() {
    if (state_changed_) {
        state_changed_ = false;
        progress_ = members_ ? members_->stop_progress()
                             : ProgressMsg{ProgressPhase::kJoin, rendezvous_.workers_missing(),
                                           rendezvous_.servers_missing(), ""};
        MutexLock lock(&mu_);
        summary_ = members_ ? "waiting for " + progress_.detail + " to stop" : join_summary();
    }
    for (PeerId id : progress_due_) {
        auto it = peers_.find(id);
        if (it == peers_.end() || it->second.closed || it->second.phase == PeerPhase::kClosing) continue;
        queue_message(it->second.writer, progress_);
        it->second.progress_sent = progress_;
    }
    progress_due_.clear();
    maybe_finish();
    for (auto &[id, p] : peers_) {
        if (!p.closed && !p.writer.empty()) flush(p);
    }
    std::erase_if(peers_, [](const auto &entry) { return entry.second.closed; });
}

void SchedulerImpl::maybe_finish() {
    if (finishing_ || !members_ || !members_->settled()) return;
    finishing_ = true;
    outcome_ = members_->outcome();
    listener_.reset();
    AFMESH_LOG(AFMESH_LOG_INFO, "scheduler: every node has stopped: %s", outcome_.to_string().c_str());
    end_sessions(PeerPhase::kMember, StopDoneMsg{outcome_});
}

// Sends `last` to every peer in `phase` and closes it after a linger; other
// peers are closed at once.
template <class Message>
void SchedulerImpl::end_sessions(PeerPhase phase, const Message &last) {
    for (auto &[id, p] : peers_) {
        if (p.closed || p.phase == PeerPhase::kClosing) continue;
        if (p.phase == phase) {
            queue_message(p.writer, last);
            begin_closing(p);
        } else {
            close_now(p);
        }
    }
}

// The cluster never formed: tell the nodes that came, and end, so a missing
// node cannot keep the others (or this process) waiting forever.
void SchedulerImpl::give_up_joining() {
    finishing_ = true;
    outcome_ = Status(Code::kTimeout, "no complete cluster after " +
                                          std::to_string(2 * options_.connect_timeout.count()) + " ms: " + join_summary());
    AFMESH_LOG(AFMESH_LOG_ERROR, "scheduler: %s", outcome_.message().c_str());
    listener_.reset();
    end_sessions(PeerPhase::kJoined, ErrorMsg{outcome_});
}

std::string SchedulerImpl::join_summary() const {
    return "waiting for " + std::to_string(rendezvous_.workers_missing()) + " of " +
           std::to_string(options_.num_workers) + " worker(s) and " + std::to_string(rendezvous_.servers_missing()) +
           " of " + std::to_string(options_.num_servers) + " server(s) to join";
}

void SchedulerImpl::set_finished(Status status) {
    {
        MutexLock lock(&mu_);
        finished_ = true;
        final_status_ = std::move(status);
        summary_ = "finished";
    }
    cv_.notify_all();
}

}  // namespace
}  // namespace control

Status Scheduler::start(const ControlOptions &options, const std::string &listen_address,
                        std::unique_ptr<Scheduler> *out) {
    using namespace control;
    if (Status s = check_options(options); !s) return s;
    UniqueFd listener;
    std::string bound;
    if (Status s = listen_tcp(listen_address, &listener, &bound); !s) return s;
    Waker waker;
    if (Status s = waker.open(); !s) return s;
    crypto::Key cluster_key;
    if (Status s = crypto::random_bytes(cluster_key); !s) return s;
    AFMESH_LOG(AFMESH_LOG_INFO, "scheduler: listening on %s for %d worker(s) and %d server(s)", bound.c_str(),
               options.num_workers, options.num_servers);
    *out = std::make_unique<SchedulerImpl>(options, std::move(listener), std::move(bound), std::move(waker),
                                           cluster_key);
    return Status::ok();
}

}  // namespace afmesh
