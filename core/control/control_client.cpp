// SPDX-License-Identifier: Apache-2.0
// ControlClient: one background thread owns the scheduler connection. It reads
// and dispatches frames, sends heartbeats and writes whatever the API calls
// queued; the API calls only queue a message, wake it and wait on a condition
// variable with a deadline. All socket I/O is non-blocking, so the thread is
// never stuck and the destructor joins it promptly.
//
// With ControlOptions::scheduler_reconnect, a member that loses the scheduler
// keeps trying to reach one restarted at the same address, and REJOINs it:
// its in-flight barriers fail, later ones wait, and the restarted
// scheduler's roster tells it which nodes did not come back.
#include <poll.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <condition_variable>
#include <iterator>
#include <map>
#include <optional>
#include <thread>
#include <utility>
#include <variant>

#include "control/control_client.h"
#include "control/frame_reader.h"
#include "control/frame_writer.h"
#include "control/messages.h"
#include "control/node_id.h"
#include "control/options_check.h"
#include "control/socket_util.h"
#include "control/waker.h"
#include "log.h"
#include "thread_annotations.h"

namespace afmesh {

const char *role_name(Role role) {
    switch (role) {
    case Role::kScheduler: return "scheduler";
    case Role::kWorker: return "worker";
    case Role::kServer: return "server";
    }
    return "unknown";
}

namespace control {
namespace {

using std::chrono::milliseconds;

/** First and largest pause between attempts to reach a scheduler that is not listening yet. */
constexpr auto kFirstRetry = milliseconds(20);
constexpr auto kMaxRetry = milliseconds(1000);

std::string ms_text(milliseconds ms) { return std::to_string(ms.count()) + " ms"; }

class ClientImpl final : public ControlClient {
public:
    ClientImpl(const ControlOptions &options, const Hello &hello, MembershipCallbacks callbacks)
        : options_(options), hello_(hello), callbacks_(std::move(callbacks)),
          delivering_(!callbacks_.held_until_delivered) {}

    ~ClientImpl() override {
        {
            MutexLock lock(&mu_);
            exit_requested_ = true;
        }
        waker_.wake();
        if (io_.joinable()) io_.join();
    }

    /** Reaches the scheduler, sends HELLO and waits for the roster; called once, by connect(). */
    Status join();

    const Roster &roster() const override { return roster_; }
    int32_t rank() const override { return rank_; }
    bool replacement() const override { return replacement_; }
    const std::vector<std::pair<Role, int32_t>> &down_at_join() const override { return down_at_join_; }
    void deliver_notices() override {
        {
            MutexLock lock(&mu_);
            delivering_ = true;
        }
        waker_.wake();  // the I/O thread delivers them, as it does every notice
    }
    Status barrier(BarrierGroup group, milliseconds timeout) override;
    Status stop(milliseconds timeout) override;
    bool scheduler_gone() const override {
        MutexLock lock(&mu_);
        return (phase_ == Phase::kLost || phase_ == Phase::kReconnecting) && joined_ && !evicted_;
    }

private:
    enum class Phase {
        kJoining,       // HELLO sent, no roster yet
        kMember,        // roster received
        kReconnecting,  // lost the scheduler; REJOINing until a restarted one sends its roster
        kFinished,      // STOP_DONE received
        kLost,          // refused, evicted, or the scheduler is gone for good
    };
    struct BarrierState {
        uint64_t sent = 0;  // number of the last barrier entered
        uint64_t done = 0;  // number of the last barrier released
        Status status;      // the release of `done`
        bool busy = false;  // a thread is waiting in barrier() on this group
    };

    Status reach_scheduler(Clock::time_point deadline);
    void io_loop();
    /**
     * Connects again to a lost scheduler's address and queues a REJOIN;
     * false when the node gives up (its window passed, or it is exiting).
     */
    bool reconnect(Clock::time_point *last_heard, Clock::time_point *next_heartbeat);
    /** What this node says of itself: the HELLO, and the REJOIN built on it. */
    HelloMsg hello_message() const;
    RejoinMsg rejoin_message() const AFMESH_REQUIRES(mu_);
    /** Why barrier()/stop() gave up while the scheduler is still being rejoined. */
    Status not_rejoined_locked(const char *call, milliseconds waited) const AFMESH_REQUIRES(mu_);
    /** One round: write what is queued, wait for input or a timer, handle both. False once the connection is over. */
    bool serve_once(Clock::time_point *last_heard, Clock::time_point *next_heartbeat);
    /** Reads and dispatches what arrived; false when the connection is over. */
    bool receive(Clock::time_point now, Clock::time_point *last_heard);
    /** A restarted scheduler has taken this node back. */
    struct SchedulerBack {};
    /** A PEER_DOWN or PEER_UP, told to the callbacks once the frames at hand are applied. */
    using Notice = std::variant<PeerDownMsg, PeerUpMsg, SchedulerBack>;
    /** Applies one frame; false when it ends the connection. Membership notices go to `notices`. */
    bool dispatch(const Frame &frame, std::vector<Notice> *notices);
    /** A restarted scheduler's roster: this node is a member again, and hears what changed meanwhile. */
    bool readopted(RosterMsg m, std::vector<Notice> *notices);
    /** Records what a notice says of a peer, in known_. */
    void note(const Notice &notice);
    /** Whether a PEER_UP names a node of this cluster other than this one. */
    bool plausible(const RosterEntry &entry) const;
    /** Tells the callbacks the notices held so far, unless they are held until deliver_notices(). I/O thread. */
    void deliver_held();
    /** The connection ended unexpectedly: fail the waiters and, once a member, tell the user. */
    void lose(Status why) AFMESH_EXCLUDES(mu_);
    /** The connection broke or went silent: rejoin a restarted scheduler if allowed, else lose(). */
    void broken(Status why) AFMESH_EXCLUDES(mu_);
    /** Queues a message for the I/O thread. */
    template <class Message>
    void post_locked(const Message &message) AFMESH_REQUIRES(mu_) {
        queue_message(writer_, message);
        waker_.wake();
    }
    /** Why barrier()/stop() cannot run now, or OK. */
    Status usable_locked(const char *call) const AFMESH_REQUIRES(mu_);
    std::string join_timeout_text(milliseconds waited) const AFMESH_REQUIRES(mu_);

    const ControlOptions options_;
    const Hello hello_;
    const MembershipCallbacks callbacks_;
    UniqueFd fd_;
    Waker waker_;
    FrameReader reader_;  // I/O thread only
    std::thread io_;

    mutable Mutex mu_;
    std::condition_variable cv_;
    FrameWriter writer_ AFMESH_GUARDED_BY(mu_);
    bool exit_requested_ AFMESH_GUARDED_BY(mu_) = false;
    Phase phase_ AFMESH_GUARDED_BY(mu_) = Phase::kJoining;
    Status lost_ AFMESH_GUARDED_BY(mu_);  // why, in kLost
    bool joined_ AFMESH_GUARDED_BY(mu_) = false;   // the roster arrived
    // kLost because the scheduler said so (ERROR), not because it went away.
    bool evicted_ AFMESH_GUARDED_BY(mu_) = false;
    std::optional<ProgressMsg> join_progress_ AFMESH_GUARDED_BY(mu_), stop_progress_ AFMESH_GUARDED_BY(mu_);
    std::array<BarrierState, 3> barriers_ AFMESH_GUARDED_BY(mu_);  // indexed by BarrierGroup - 1
    bool stop_sent_ AFMESH_GUARDED_BY(mu_) = false;
    Status stop_result_ AFMESH_GUARDED_BY(mu_);  // in kFinished
    // Written by the I/O thread before join() returns, read-only afterwards:
    Roster roster_;
    int32_t rank_ = -1;
    bool replacement_ = false;
    std::vector<std::pair<Role, int32_t>> down_at_join_;
    std::vector<Notice> held_notices_;  // I/O thread only
    // I/O thread only: each other node's incarnation as last heard (0: down),
    // to tell what a restarted scheduler's roster changes.
    std::map<NodeId, uint64_t> known_;
    Clock::time_point reconnect_deadline_ AFMESH_GUARDED_BY(mu_);
    bool delivering_ AFMESH_GUARDED_BY(mu_) = false;  // deliver_notices() was called, or nothing is held
};

Status ClientImpl::reach_scheduler(Clock::time_point deadline) {
    // The scheduler may still be starting: retry with backoff until the deadline.
    auto pause = kFirstRetry;
    for (;;) {
        Status s = connect_tcp(options_.scheduler, deadline, &fd_);
        if (s) return s;
        if (Clock::now() + pause >= deadline) {
            return {Code::kTimeout, "could not reach the scheduler at " + options_.scheduler + " within " +
                                        ms_text(options_.connect_timeout) + ": " + s.message()};
        }
        AFMESH_LOG(AFMESH_LOG_DEBUG, "control: scheduler not reachable yet (%s); retrying", s.message().c_str());
        std::this_thread::sleep_for(pause);
        pause = std::min(pause * 2, kMaxRetry);
    }
}

Status ClientImpl::join() {
    auto start = Clock::now();
    auto deadline = start + options_.connect_timeout;
    if (Status s = waker_.open(); !s) return s;
    if (Status s = reach_scheduler(deadline); !s) return s;

    MutexLock lock(&mu_);
    queue_message(writer_, hello_message());
    io_ = std::thread([this] { io_loop(); });
    if (!lock.wait_until(cv_, deadline, [&]() AFMESH_REQUIRES(mu_) { return phase_ != Phase::kJoining; })) {
        return {Code::kTimeout,
                join_timeout_text(std::chrono::duration_cast<milliseconds>(Clock::now() - start))};
    }
    if (phase_ == Phase::kLost) return lost_;
    AFMESH_LOG(AFMESH_LOG_INFO, "control: joined as %s %d of %zu worker(s) and %zu server(s)", role_name(hello_.role),
               rank_, roster_.workers.size(), roster_.servers.size());
    return Status::ok();
}

std::string ClientImpl::join_timeout_text(milliseconds waited) const {
    std::string text = "no roster from the scheduler at " + options_.scheduler + " after " + ms_text(waited);
    if (!join_progress_) return text + ": the scheduler never answered";
    return text + ": it was still waiting for " + std::to_string(join_progress_->workers_missing) + " of " +
           std::to_string(options_.num_workers) + " worker(s) and " + std::to_string(join_progress_->servers_missing) +
           " of " + std::to_string(options_.num_servers) + " server(s)";
}

void ClientImpl::io_loop() {
    Clock::time_point last_heard = Clock::now();
    Clock::time_point next_heartbeat = last_heard + options_.heartbeat_interval;
    do {
        while (serve_once(&last_heard, &next_heartbeat)) {
        }
        // Closing promptly tells the scheduler this node is done (after STOP_DONE) or gone.
        fd_.reset();
    } while (reconnect(&last_heard, &next_heartbeat));
}

bool ClientImpl::reconnect(Clock::time_point *last_heard, Clock::time_point *next_heartbeat) {
    Status last_try;
    for (auto pause = kFirstRetry;; pause = std::min(pause * 2, kMaxRetry)) {
        Clock::time_point give_up;
        {
            MutexLock lock(&mu_);
            if (exit_requested_ || phase_ != Phase::kReconnecting) return false;
            give_up = reconnect_deadline_;
        }
        deliver_held();  // deliver_notices() may have been called meanwhile
        const Clock::time_point now = Clock::now();
        if (now >= give_up) {
            lose({Code::kPeerFailed, "the scheduler at " + options_.scheduler + " did not come back within " +
                                         ms_text(options_.scheduler_reconnect) +
                                         (last_try ? "" : " (last try: " + last_try.message() + ")")});
            return false;
        }
        // Bounded by one retry, so that the destructor never waits long on a connect.
        last_try = connect_tcp(options_.scheduler, std::min(give_up, now + kMaxRetry), &fd_);
        if (last_try) {
            reader_.clear();
            MutexLock lock(&mu_);
            writer_ = FrameWriter();  // what was queued was for the lost scheduler
            queue_message(writer_, rejoin_message());
            *last_heard = Clock::now();
            *next_heartbeat = *last_heard + options_.heartbeat_interval;
            return true;
        }
        // The pause ends early when the waker rings (the destructor, deliver_notices()).
        pollfd waker{waker_.fd(), POLLIN, 0};
        if (poll(&waker, 1, poll_timeout_ms(std::min(give_up, Clock::now() + pause))) > 0) waker_.drain();
    }
}

HelloMsg ClientImpl::hello_message() const {
    return {hello_,
            options_.num_workers,
            options_.num_servers,
            static_cast<uint32_t>(options_.heartbeat_interval.count()),
            static_cast<uint32_t>(options_.heartbeat_timeout.count()),
            options_.auth_token};
}

RejoinMsg ClientImpl::rejoin_message() const {
    RejoinMsg m{hello_message(), 0, roster_.cluster_key, {}};
    m.hello.hello.requested_rank = rank_;
    m.incarnation = roster_.of(hello_.role).at(static_cast<size_t>(rank_))
                        .incarnation;
    for (size_t g = 0; g < barriers_.size(); ++g) m.barriers_entered[g] = barriers_[g].sent;
    return m;
}

bool ClientImpl::serve_once(Clock::time_point *last_heard, Clock::time_point *next_heartbeat) {
    Status flushed;
    bool want_write;
    {
        MutexLock lock(&mu_);
        if (exit_requested_ || phase_ == Phase::kFinished || phase_ == Phase::kLost) return false;
        flushed = writer_.flush(fd_.get());
        want_write = !writer_.empty();
    }
    if (!flushed) {
        broken({Code::kPeerFailed, "lost the connection to the scheduler at " + options_.scheduler + ": " +
                                       flushed.message()});
        return false;
    }
    pollfd fds[2] = {{fd_.get(), static_cast<short>(POLLIN | (want_write ? POLLOUT : 0)), 0},
                     {waker_.fd(), POLLIN, 0}};
    Clock::time_point silence_deadline = *last_heard + options_.heartbeat_timeout;
    if (poll(fds, 2, poll_timeout_ms(std::min(*next_heartbeat, silence_deadline))) < 0 && errno != EINTR) {
        lose({Code::kError, "poll: " + errno_text(errno)});
        return false;
    }
    Clock::time_point now = Clock::now();
    if (fds[1].revents) waker_.drain();
    deliver_held();  // deliver_notices() may have been called
    if ((fds[0].revents & (POLLIN | POLLHUP | POLLERR)) && !receive(now, last_heard)) return false;
    if (now >= *last_heard + options_.heartbeat_timeout) {
        broken({Code::kPeerFailed, "no heartbeat from the scheduler at " + options_.scheduler + " for " +
                                     ms_text(std::chrono::duration_cast<milliseconds>(now - *last_heard))});
        return false;
    }
    if (now >= *next_heartbeat) {
        MutexLock lock(&mu_);
        queue_message(writer_, HeartbeatMsg{});
        *next_heartbeat = now + options_.heartbeat_interval;
    }
    return true;
}

bool ClientImpl::receive(Clock::time_point now, Clock::time_point *last_heard) {
    Status read = reader_.fill(fd_.get());
    std::vector<Notice> notices;
    bool open = true;
    for (;;) {
        std::optional<Frame> frame;
        if (Status s = reader_.next(&frame); !s) {
            Code code = s.code() == Code::kUnsupportedVersion ? s.code() : Code::kPeerFailed;
            lose({code, "bad frame from the scheduler at " + options_.scheduler + ": " + s.message()});
            open = false;
            break;
        }
        if (!frame) break;
        *last_heard = now;
        if (!dispatch(*frame, &notices)) {
            open = false;
            break;
        }
    }
    for (const Notice &notice : notices) note(notice);
    held_notices_.insert(held_notices_.end(), std::make_move_iterator(notices.begin()),
                         std::make_move_iterator(notices.end()));
    deliver_held();
    if (open && !read) {
        broken({Code::kPeerFailed, "the scheduler at " + options_.scheduler + " went away: " + read.message()});
        open = false;
    }
    return open;
}

void ClientImpl::deliver_held() {
    {
        MutexLock lock(&mu_);
        if (!delivering_ || held_notices_.empty()) return;
    }
    for (const Notice &notice : std::exchange(held_notices_, {})) {
        if (std::holds_alternative<SchedulerBack>(notice) && callbacks_.peer_up)
            callbacks_.peer_up(RosterEntry{Role::kScheduler, 0, "", "", {}, "", 0});
        if (const auto *down = std::get_if<PeerDownMsg>(&notice); down && callbacks_.peer_down)
            callbacks_.peer_down(down->role, down->rank, down->reason);
        if (const auto *up = std::get_if<PeerUpMsg>(&notice)) {
            if (callbacks_.peer_up) callbacks_.peer_up(up->entry);
            // Taken in: the scheduler may now hand the replacement its roster.
            MutexLock lock(&mu_);
            queue_message(writer_, PeerUpAckMsg{up->entry.role, up->entry.rank, up->entry.incarnation});
        }
    }
}

void ClientImpl::note(const Notice &notice) {
    if (const auto *down = std::get_if<PeerDownMsg>(&notice)) known_[{down->role, down->rank}] = 0;
    if (const auto *up = std::get_if<PeerUpMsg>(&notice))
        known_[{up->entry.role, up->entry.rank}] = up->entry.incarnation;
}

bool ClientImpl::readopted(RosterMsg m, std::vector<Notice> *notices) {
    const auto me = static_cast<size_t>(rank_);
    if (m.roster.workers.size() != roster_.workers.size() || m.roster.servers.size() != roster_.servers.size() ||
        m.your_rank != rank_ || m.roster.of(hello_.role).at(me).incarnation != roster_.of(hello_.role).at(me).incarnation ||
        !crypto::equal(m.roster.cluster_key, roster_.cluster_key)) {
        lose({Code::kPeerFailed, "the restarted scheduler at " + options_.scheduler +
                                     " sent the roster of another cluster, or of another node"});
        return false;
    }
    notices->push_back(SchedulerBack{});
    for (const NodeId &node : m.down)
        if (known_[node] != 0)
            notices->push_back(PeerDownMsg{node.role, node.rank, "it did not rejoin the restarted scheduler"});
    // A replacement the old scheduler admitted whose PEER_UP never reached this node.
    for (const auto *entries : {&m.roster.workers, &m.roster.servers})
        for (const RosterEntry &e : *entries) {
            const NodeId node{e.role, e.rank};
            const bool down = std::find(m.down.begin(), m.down.end(), node) != m.down.end();
            if (!down && e.incarnation != known_[node] && !(e.role == hello_.role && e.rank == rank_))
                notices->push_back(PeerUpMsg{e});
        }
    {
        MutexLock lock(&mu_);
        // Barriers that failed with the old scheduler are skipped: every node numbers on from the same place.
        for (size_t g = 0; g < barriers_.size(); ++g) barriers_[g].sent = barriers_[g].done = m.barriers_done[g];
        phase_ = Phase::kMember;
        if (stop_sent_) queue_message(writer_, StopMsg{});
    }
    cv_.notify_all();
    AFMESH_LOG(AFMESH_LOG_INFO, "control: rejoined the restarted scheduler at %s", options_.scheduler.c_str());
    return true;
}

bool ClientImpl::plausible(const RosterEntry &entry) const {
    const int32_t n = options_.nodes_of(entry.role);
    const bool me = entry.role == hello_.role && entry.rank == rank_;
    return (entry.role == Role::kWorker || entry.role == Role::kServer) && entry.rank >= 0 && entry.rank < n && !me;
}

bool ClientImpl::dispatch(const Frame &frame, std::vector<Notice> *notices) {
    auto malformed = [&](const Status &s) {
        lose({Code::kPeerFailed, "bad " + std::string(message_type_name(frame.type)) + " from the scheduler at " +
                                     options_.scheduler + ": " + s.message()});
        return false;
    };
    switch (frame.type) {
    case MessageType::kHeartbeat: {
        HeartbeatMsg m;
        if (Status s = decode(frame.payload, &m); !s) return malformed(s);
        return true;
    }
    case MessageType::kProgress: {
        ProgressMsg m;
        if (Status s = decode(frame.payload, &m); !s) return malformed(s);
        MutexLock lock(&mu_);
        (m.phase == ProgressPhase::kJoin ? join_progress_ : stop_progress_) = std::move(m);
        return true;
    }
    case MessageType::kRoster: {
        RosterMsg m;
        if (Status s = decode(frame.payload, &m); !s) return malformed(s);
        bool rejoining;
        {
            MutexLock lock(&mu_);
            rejoining = phase_ == Phase::kReconnecting;
        }
        if (rejoining) return readopted(std::move(m), notices);
        const auto &mine = m.roster.of(hello_.role);
        if (static_cast<int32_t>(m.roster.workers.size()) != options_.num_workers ||
            static_cast<int32_t>(m.roster.servers.size()) != options_.num_servers || m.your_rank < 0 ||
            m.your_rank >= static_cast<int32_t>(mine.size()) ||
            (hello_.requested_rank >= 0 && m.your_rank != hello_.requested_rank)) {
            return malformed({Code::kInvalidArgument, "it does not match this node's topology or requested rank"});
        }
        {
            MutexLock lock(&mu_);
            if (phase_ != Phase::kJoining) return malformed({Code::kInvalidArgument, "a second roster"});
            roster_ = std::move(m.roster);
            rank_ = m.your_rank;
            replacement_ = m.replacement;
            for (const NodeId &node : m.down) down_at_join_.emplace_back(node.role, node.rank);
            for (const auto *entries : {&roster_.workers, &roster_.servers})
                for (const RosterEntry &e : *entries) known_[{e.role, e.rank}] = e.incarnation;
            for (const NodeId &node : m.down) known_[node] = 0;
            // A replacement numbers its barriers on from the running cluster's.
            for (size_t g = 0; g < barriers_.size(); ++g) barriers_[g].sent = barriers_[g].done = m.barriers_done[g];
            phase_ = Phase::kMember;
            joined_ = true;
        }
        cv_.notify_all();
        return true;
    }
    case MessageType::kError: {
        ErrorMsg m;
        if (Status s = decode(frame.payload, &m); !s) return malformed(s);
        const char *verb;
        {
            MutexLock lock(&mu_);
            verb = phase_ == Phase::kJoining        ? " refused this node"
                   : phase_ == Phase::kReconnecting ? " refused this node's rejoin"
                                                    : " evicted this node";
            evicted_ = true;
        }
        lose({m.status.code(), "the scheduler at " + options_.scheduler + verb + ": " + m.status.message()});
        return false;
    }
    case MessageType::kBarrierDone: {
        BarrierDoneMsg m;
        if (Status s = decode(frame.payload, &m); !s) return malformed(s);
        {
            MutexLock lock(&mu_);
            BarrierState &b = barriers_[static_cast<size_t>(m.group) - 1];
            if (m.seq > b.sent) return malformed({Code::kInvalidArgument, "release of a barrier never entered"});
            // A late release of a barrier this node gave up on is old news.
            if (m.seq > b.done) {
                b.done = m.seq;
                b.status = std::move(m.status);
            }
        }
        cv_.notify_all();
        return true;
    }
    case MessageType::kPeerDown: {
        PeerDownMsg m;
        if (Status s = decode(frame.payload, &m); !s) return malformed(s);
        AFMESH_LOG(AFMESH_LOG_WARN, "control: %s %d is down: %s", role_name(m.role), m.rank, m.reason.c_str());
        notices->push_back(std::move(m));
        return true;
    }
    case MessageType::kPeerUp: {
        PeerUpMsg m;
        if (Status s = decode(frame.payload, &m); !s) return malformed(s);
        if (rank_ < 0 || !plausible(m.entry))  // rank_ is set with the roster
            return malformed({Code::kInvalidArgument, std::string("PEER_UP for ") + role_name(m.entry.role) + " " +
                                                          std::to_string(m.entry.rank) +
                                                          ", which is not another node of this cluster"});
        AFMESH_LOG(AFMESH_LOG_INFO, "control: %s %d is back (a new incarnation from %s)", role_name(m.entry.role),
                   m.entry.rank, m.entry.host.c_str());
        notices->push_back(std::move(m));
        return true;
    }
    case MessageType::kStopDone: {
        StopDoneMsg m;
        if (Status s = decode(frame.payload, &m); !s) return malformed(s);
        {
            MutexLock lock(&mu_);
            if (!stop_sent_) return malformed({Code::kInvalidArgument, "STOP_DONE before this node stopped"});
            stop_result_ = std::move(m.status);
            phase_ = Phase::kFinished;
        }
        cv_.notify_all();
        return false;
    }
    case MessageType::kHello:
    case MessageType::kBarrier:
    case MessageType::kPeerUpAck:
    case MessageType::kRejoin:
    case MessageType::kStop: break;
    }
    return malformed({Code::kInvalidArgument, "a message type (" +
                                                  std::to_string(static_cast<unsigned>(frame.type)) +
                                                  ") the scheduler never sends"});
}

void ClientImpl::lose(Status why) {
    bool tell_user;
    {
        MutexLock lock(&mu_);
        if (exit_requested_ || phase_ == Phase::kFinished || phase_ == Phase::kLost) return;
        tell_user = phase_ == Phase::kMember;
        phase_ = Phase::kLost;
        lost_ = why;
    }
    cv_.notify_all();
    if (tell_user) {
        AFMESH_LOG(AFMESH_LOG_WARN, "control: lost the scheduler: %s", why.message().c_str());
        if (callbacks_.peer_down) callbacks_.peer_down(Role::kScheduler, 0, why.message());
    }
}

void ClientImpl::broken(Status why) {
    {
        MutexLock lock(&mu_);
        if (phase_ == Phase::kReconnecting) return;  // a rejoin's connection broke: reconnect() tries again
        if (phase_ != Phase::kMember || options_.scheduler_reconnect.count() == 0 || exit_requested_) {
            lock.unlock();
            return lose(std::move(why));
        }
        phase_ = Phase::kReconnecting;
        lost_ = why;
        reconnect_deadline_ = Clock::now() + options_.scheduler_reconnect;
        // The lost scheduler took the barriers waiting on it along.
        for (BarrierState &b : barriers_) {
            if (b.done >= b.sent) continue;
            b.done = b.sent;
            b.status = {Code::kPeerFailed, "barrier: lost the scheduler while waiting (" + why.message() + ")"};
        }
    }
    cv_.notify_all();
    AFMESH_LOG(AFMESH_LOG_WARN, "control: lost the scheduler (%s); trying to rejoin it for up to %s",
               why.message().c_str(), ms_text(options_.scheduler_reconnect).c_str());
    if (callbacks_.peer_down) callbacks_.peer_down(Role::kScheduler, 0, why.message());
}

Status ClientImpl::not_rejoined_locked(const char *call, milliseconds waited) const {
    return {Code::kPeerFailed, std::string(call) + ": the scheduler is lost (" + lost_.message() +
                                   ") and not rejoined within " + ms_text(waited)};
}

Status ClientImpl::usable_locked(const char *call) const {
    if (phase_ == Phase::kLost) return {Code::kPeerFailed, std::string(call) + ": " + lost_.message()};
    if (stop_sent_) return {Code::kInvalidArgument, std::string(call) + " after stop()"};
    return Status::ok();
}

Status ClientImpl::barrier(BarrierGroup group, milliseconds timeout) {
    if (group != BarrierGroup::kWorkers && group != BarrierGroup::kServers && group != BarrierGroup::kAll) {
        return {Code::kInvalidArgument, "barrier: unknown group " + std::to_string(static_cast<int>(group))};
    }
    if (!group_contains(group, hello_.role)) {
        return {Code::kInvalidArgument, std::string("barrier: a ") + role_name(hello_.role) +
                                            " is not part of the barrier group '" + group_name(group) + "'"};
    }
    if (std::this_thread::get_id() == io_.get_id()) {
        return {Code::kInvalidArgument, "barrier: called from a membership callback, whose thread delivers the answer"};
    }
    const auto deadline = Clock::now() + timeout;
    MutexLock lock(&mu_);
    // Entered while the scheduler is being rejoined: it goes to the restarted one.
    lock.wait_until(cv_, deadline, [&]() AFMESH_REQUIRES(mu_) { return phase_ != Phase::kReconnecting; });
    if (phase_ == Phase::kReconnecting) return not_rejoined_locked("barrier", timeout);
    if (Status s = usable_locked("barrier"); !s) return s;
    BarrierState &b = barriers_[static_cast<size_t>(group) - 1];
    if (b.busy) {
        return {Code::kInvalidArgument,
                std::string("barrier: another barrier over '") + group_name(group) + "' is in progress on this node"};
    }
    uint64_t seq = ++b.sent;
    b.busy = true;
    post_locked(BarrierMsg{group, seq});
    bool released =
        lock.wait_until(cv_, deadline, [&]() AFMESH_REQUIRES(mu_) { return b.done >= seq || phase_ == Phase::kLost; });
    b.busy = false;
    if (b.done >= seq) return b.status;
    if (released) return {Code::kPeerFailed, "barrier: " + lost_.message()};
    return {Code::kTimeout, std::string("barrier over '") + group_name(group) + "' (number " + std::to_string(seq) +
                                ") not released within " + ms_text(timeout)};
}

Status ClientImpl::stop(milliseconds timeout) {
    if (std::this_thread::get_id() == io_.get_id()) {
        return {Code::kInvalidArgument, "stop: called from a membership callback, whose thread delivers the answer"};
    }
    MutexLock lock(&mu_);
    if (phase_ == Phase::kFinished) return stop_result_;
    if (phase_ == Phase::kLost) return {Code::kPeerFailed, "stop: " + lost_.message()};
    if (!stop_sent_) {
        stop_sent_ = true;
        if (phase_ != Phase::kReconnecting) post_locked(StopMsg{});  // else readopted() sends it
    }
    lock.wait_for(cv_, timeout,
                  [&]() AFMESH_REQUIRES(mu_) { return phase_ == Phase::kFinished || phase_ == Phase::kLost; });
    if (phase_ == Phase::kFinished) return stop_result_;
    if (phase_ == Phase::kLost) return {Code::kPeerFailed, "stop: " + lost_.message()};
    if (phase_ == Phase::kReconnecting) return not_rejoined_locked("stop", timeout);
    std::string missing = stop_progress_ ? stop_progress_->detail : "the scheduler has not said";
    return {Code::kTimeout, "stop: not every node stopped within " + ms_text(timeout) + "; still waiting for " + missing};
}

}  // namespace
}  // namespace control

Status ControlClient::connect(const ControlOptions &options, const Hello &hello, MembershipCallbacks callbacks,
                              std::unique_ptr<ControlClient> *out) {
    using namespace control;
    if (Status s = check_options(options); !s) return s;
    if (hello.role != Role::kWorker && hello.role != Role::kServer) {
        return {Code::kInvalidArgument, std::string("a node joins as a worker or a server, not as ") +
                                            role_name(hello.role)};
    }
    int32_t n = options.nodes_of(hello.role);
    if (hello.requested_rank < -1 || hello.requested_rank >= n) {
        return {Code::kInvalidArgument, std::string("requested ") + role_name(hello.role) + " rank " +
                                            std::to_string(hello.requested_rank) + " is not -1 (any) or 0.." +
                                            std::to_string(n - 1)};
    }
    HostPort scheduler;
    if (Status s = parse_host_port(options.scheduler, &scheduler); !s) return s;
    if (Status s = check_hello({hello, 0, 0, 0, 0, options.auth_token}); !s) return s;
    auto client = std::make_unique<ClientImpl>(options, hello, std::move(callbacks));
    if (Status s = client->join(); !s) return s;
    *out = std::move(client);
    return Status::ok();
}

}  // namespace afmesh
