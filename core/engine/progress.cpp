// SPDX-License-Identifier: Apache-2.0
#include "progress.h"

#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "log.h"

namespace afmesh {
namespace {

constexpr int kMaxEventsPerPoll = 64;
// Transports without a wait fd, and device events (which have none): how
// long the NetRecv thread naps between polls.
constexpr auto kNapWithoutFd = std::chrono::microseconds(50);
// Without a wait fd, each nap that found nothing doubles the next, up to
// this; a completion, or a caller that starts to wait (and relies on this
// thread to poll for it), brings it back to kNapWithoutFd. Napping 50 us for
// ever woke an idle process 5,000-20,000 times a second, and on a host with
// fewer cores than busy threads each wake-up took a core from someone's
// spin: the afmesh bench's idle side (blocking while the other is timed)
// put the fabric/shm floor's p99 at 8 B at 24-32 us; backing off to 1 ms,
// 2.3-2.5 us.
constexpr auto kLongestIdleNap = std::chrono::microseconds(1000);
// How often the parked NetRecv thread looks whether the waiters have all
// left, and takes progress back if so. Leaving wakes nobody: a server's
// loop (get_batch, respond, get_batch) or a worker's (wait, post, wait)
// leaves and re-enters wait within microseconds, and waking NetRecv at each
// exit cost two context switches and a fight for the poll lock every time
// (1x1 tcp, blocking polling, 8 B: 111-125 us p50 with the wake, 51-58 us
// without; 2x2: 301 -> 193 us). Time nobody waits for longer (the caller
// computes) is NetRecv's after at most this.
constexpr auto kParkRecheck = std::chrono::microseconds(1000);

// How a spinning thread idles between polls that found nothing. Pausing
// alone, with more threads spinning than cores (busy polling, or several
// processes on one host), a spinner would hold its core until the
// scheduler's tick (4 ms) while the thread with data to move waits for it:
// 1x1 busy at 128x7168 bf16 took 8 ms a round trip on 2 cores, 0.78 ms
// yielding. But a yield is a system call (microseconds on a VM) that may
// hand the core to anything runnable for a time slice, so a spinner yields
// only once it has idled for kYieldAfter. Where it is set is a trade
// between the two cases, measured on 2 cores over fabric/shm, busy: at
// 200 us, 1x1's p99 at 8 B fell from 21-47 us to 12-16 (0.02-0.08 yields
// per push-pull instead of 0.2-0.6), but 2x2 at 64 KiB, four spinning
// processes on two cores, took 480-690 us a round trip instead of 85-115.
// Oversubscribed hosts are this setting's reason to be: 20 us.
constexpr auto kYieldAfter = std::chrono::microseconds(20);

// A clock read costs about what an empty poll does (24 ns here, 1,000,000
// reads): a spinning waiter checks its deadline and idle time once every
// this many polls, a few microseconds apart at most.
constexpr int kPollsPerClockRead = 16;

class IdleSpin {
public:
    explicit IdleSpin(Tally &yields) : yields_(yields) {}
    /** Idles once (`now`: the caller's latest clock reading): a pause, or a yield once idle for kYieldAfter. */
    void operator()(Clock::time_point now) {
        if (idle_since_ == Clock::time_point()) idle_since_ = now;
        if (now - idle_since_ < kYieldAfter) {
#if defined(__x86_64__) || defined(__i386__)
            __builtin_ia32_pause();
#endif
        } else {
            sched_yield();
            yields_.add();
        }
    }
    /** A poll found work: the next idle starts afresh. */
    void reset() { idle_since_ = Clock::time_point(); }

private:
    Tally &yields_;
    Clock::time_point idle_since_;
};

void signal_fd(int fd, Tally &wakeups) {
    uint64_t one = 1;
    ssize_t ignored = write(fd, &one, sizeof one);
    (void)ignored;
    wakeups.add();
}

void drain_fd(int fd, Tally &drains) {
    uint64_t count;
    ssize_t ignored = read(fd, &count, sizeof count);
    (void)ignored;
    drains.add();
}

/** Sleeps until one of `fds` is readable or `until` passes. */
void sleep_on(pollfd *fds, nfds_t count, Clock::time_point until) {
    if (until == Clock::time_point::max()) {
        ::ppoll(fds, count, nullptr, nullptr);
        return;
    }
    const auto left = std::max(until - Clock::now(), Clock::duration::zero());
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
    const timespec timeout{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
    ::ppoll(fds, count, &timeout, nullptr);
}

}  // namespace

bool parse_poll_mode(const std::string &name, PollMode *mode) {
    if (name == "busy") *mode = PollMode::kBusy;
    else if (name == "adaptive") *mode = PollMode::kAdaptive;
    else if (name == "blocking") *mode = PollMode::kBlocking;
    else return false;
    return true;
}

std::chrono::microseconds adaptive_spin(const Config &config, const Module &transport) {
    // Without a wait fd, sleeping means napping blind and a completion waits
    // out the nap (plus timer slack: ~100 us on a VM) at every hop of a
    // round trip; shm over libfabric measured 458 us at 8 B with a 50 us
    // window and 12 us with 1 ms (p50, 1x1, afmesh bench).
    constexpr std::chrono::microseconds kWithoutWaitFd(1000);
    if (!config.is_set("AFMESH_POLL_SPIN_US") && !(transport.net_caps().flags & AFMESH_NET_CAP_WAIT_FD))
        return kWithoutWaitFd;
    return std::chrono::microseconds(config.get_int("AFMESH_POLL_SPIN_US"));
}

Progress::Progress(const Module &transport, PollMode mode, std::chrono::microseconds adaptive_spin, Dispatch dispatch)
    : transport_(transport),
      mode_(mode),
      adaptive_spin_(adaptive_spin),
      dispatch_(std::move(dispatch)),
      events_(kMaxEventsPerPoll) {}

Progress::~Progress() {
    stop();
    for (int fd : {wake_fd_, waiter_wake_fd_})
        if (fd >= 0) close(fd);
}

Status Progress::start(const std::vector<int> &cpus) {
    wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    waiter_wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (wake_fd_ < 0 || waiter_wake_fd_ < 0) return {Code::kError, "eventfd failed"};
    thread_ = std::thread([this] { run(); });
    if (cpus.empty()) return Status::ok();
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int cpu : cpus)
        if (cpu < CPU_SETSIZE) CPU_SET(cpu, &set);
    // Not fatal: a CPU outside this process's cgroup (a container) only costs locality.
    if (pthread_setaffinity_np(thread_.native_handle(), sizeof set, &set) != 0)
        AFMESH_LOG(AFMESH_LOG_WARN, "could not pin the NetRecv thread to CPUs %d-%d (%zu of them)", cpus.front(),
                   cpus.back(), cpus.size());
    return Status::ok();
}

void Progress::stop() {
    if (!thread_.joinable()) return;
    stopping_.store(true);
    signal_fd(wake_fd_, counters_.wakeups);
    thread_.join();
}

int Progress::poll_locked() {
    int n = transport_.net().poll(transport_.ctx(), events_.data(), kMaxEventsPerPoll);
    if (n > 0) {
        counters_.polls.add();
        counters_.completions.add(static_cast<uint64_t>(n));
        dispatch_(events_.data(), n);
    } else if (n == 0) {
        counters_.empty_polls.add();
    }
    run_background();
    return n;
}

int Progress::try_progress(bool *polled) {
    if (!poll_mu_.try_lock()) return 0;
    MutexLock lock(&poll_mu_, std::adopt_lock);
    if (polled) *polled = true;
    return poll_locked();
}

bool Progress::run_background() {
    const bool pending = background_ && background_();
    background_pending_.store(pending, std::memory_order_relaxed);
    return pending;
}

int Progress::poll_once() {
    bool polled = false;
    int n = try_progress(&polled);
    if (polled) hand_back();
    return n;
}

// Any poll may leave work inside the transport (a paused receive, a
// completion) with its fd not readable, and whoever sleeps on it may have
// armed before that poll: so a thread that polled wakes it to look again.
void Progress::hand_back() {
    if (netrecv_sleep_.load() == kOnTransport) signal_fd(wake_fd_, counters_.wakeups);
    wake_transport_waiter();
}

// Once per arming: the flag is taken by whoever signals.
void Progress::wake_transport_waiter() {
    if (transport_waiter_armed_.exchange(false)) signal_fd(waiter_wake_fd_, counters_.wakeups);
}

void Progress::wake_netrecv() {
    if (netrecv_sleep_.load() != kAwake) signal_fd(wake_fd_, counters_.wakeups);
}

void Progress::notify_waiters() {
    // An exchange, like the waiter's arming: either the waiter's reads ours
    // and sees what our caller made ready, or ours sees it armed.
    wake_transport_waiter();
    // A read-modify-write, not a load: RMWs on sleepers_ are totally ordered,
    // so either we see the waiter's increment, or its increment reads ours
    // and the waiter then sees the state our caller just made ready.
    if (sleepers_.fetch_add(0, std::memory_order_acq_rel) == 0) return;
    MutexLock lock(&wait_mu_);
    wait_cv_.notify_all();
    counters_.wakeups.add();
}

void Progress::set_mode(PollMode mode) {
    mode_.store(mode, std::memory_order_relaxed);
    // A NetRecv thread asleep in blocking mode must notice it should spin now.
    if (wake_fd_ >= 0) signal_fd(wake_fd_, counters_.wakeups);
}

Status Progress::wait_until(const std::function<bool()> &ready, Clock::time_point deadline) {
    const PollMode mode = this->mode();
    const auto spin_until = mode == PollMode::kBusy       ? deadline
                            : mode == PollMode::kAdaptive ? Clock::now() + adaptive_spin_
                                                          : Clock::now();
    spinners_.fetch_add(1);
    bool timed_out = false, polled = false;
    IdleSpin idle(counters_.yields);
    Clock::time_point now;
    for (int polls_to_clock_read = 0; !ready(); --polls_to_clock_read) {
        if (polls_to_clock_read == 0) {
            polls_to_clock_read = kPollsPerClockRead;
            now = Clock::now();
            if (now >= deadline) {
                timed_out = true;
                break;
            }
            if (now >= spin_until) break;
        }
        if (try_progress(&polled) == 0) idle(now);
        else idle.reset();
    }
    if (polled) wake_transport_waiter();  // another waiter's, armed before our polls
    int fd = -1;
    const bool can_sleep_on_transport = !ready() && !timed_out && waiter_wake_fd_ >= 0 &&
                                        (transport_.net_caps().flags & AFMESH_NET_CAP_WAIT_FD) &&
                                        transport_.net().get_wait_fd(transport_.ctx(), &fd) == 0;
    if (can_sleep_on_transport && transport_waiter_.exchange(1) == 0) {
        spinners_.fetch_sub(1);
        // NetRecv is parked while we spun, or, had it gone to sleep on the
        // transport just before, must leave it to us.
        if (netrecv_sleep_.load() == kOnTransport) signal_fd(wake_fd_, counters_.wakeups);
        Status waited = wait_on_transport(ready, deadline, fd);
        transport_waiter_.store(0);
        stop_driving();
        return waited;
    }
    spinners_.fetch_sub(1);
    if (const bool done = ready(); done || timed_out) {
        stop_driving();
        return done ? Status::ok() : Status(Code::kTimeout, "timed out");
    }
    // Sleep; whoever polls (the NetRecv thread, or the waiter on the
    // transport) dispatches and notifies. NetRecv parked while we spun: it
    // must not wait for its recheck to take progress back from us. Counted
    // before the wake: see stop_driving().
    sleepers_.fetch_add(1);
    wake_netrecv();
    MutexLock lock(&wait_mu_);
    counters_.condvar_sleeps.add();
    bool done = lock.wait_until(wait_cv_, deadline, ready);
    sleepers_.fetch_sub(1);
    return done ? Status::ok() : Status(Code::kTimeout, "timed out");
}

// A waiter that drove progress leaves. Nobody is woken for the caller's
// own sake: it re-enters wait within microseconds more often than not, and
// the parked NetRecv thread takes progress back at its recheck otherwise.
// But threads asleep on the condition variable have nobody polling for them
// now: NetRecv must take over at once. A sleeper counts itself before it
// wakes NetRecv, so either we see it here or NetRecv, woken by it, sees
// that we have stopped driving.
void Progress::stop_driving() {
    if (sleepers_.load() > 0) wake_netrecv();
}

Status Progress::wait_on_transport(const std::function<bool()> &ready, Clock::time_point deadline, int fd) {
    const afmesh_net_ops &ops = transport_.net();
    for (;;) {
        Clock::time_point wake_by = deadline;
        {
            MutexLock lock(&poll_mu_);
            if (int failed = poll_locked(); failed < 0)
                return {Code::kError, "the transport failed (poll returned " + std::to_string(failed) + ")"};
            // Done without sleeping: leave the transport unarmed, or every
            // post until the next poll would ring its wait fd (a write
            // now, a read and an epoll wakeup later) for nobody.
            if (ready()) break;
            // Armed before ready() is read, by a read-modify-write: see notify_waiters().
            transport_waiter_armed_.exchange(true);
            if (background_pending_.load(std::memory_order_relaxed)) {
                // Device events have no fd: look again shortly.
                wake_by = std::min(deadline, Clock::now() + kNapWithoutFd);
            } else if (ops.arm(transport_.ctx()) != AFMESH_HAL_OK) {
                transport_waiter_armed_.store(false);
                continue;  // events pending: poll them first
            }
        }
        if (ready()) break;
        if (Clock::now() >= deadline) {
            transport_waiter_armed_.store(false);
            return {Code::kTimeout, "timed out"};
        }
        pollfd fds[2] = {{fd, POLLIN, 0}, {waiter_wake_fd_, POLLIN, 0}};
        sleep_on(fds, 2, wake_by);
        counters_.transport_sleeps.add();
        transport_waiter_armed_.store(false);
        if (fds[1].revents & POLLIN) drain_fd(waiter_wake_fd_, counters_.drains);
    }
    transport_waiter_armed_.store(false);
    return Status::ok();
}

bool Progress::nap_netrecv(std::chrono::microseconds nap, bool only_while_callers_drive) {
    netrecv_sleep_.store(kParked);  // wake_netrecv() now cuts the nap short
    // Looked at after the announcement: callers that all left since run()
    // looked, or background work handed over since, are seen here.
    if (only_while_callers_drive && (spinners_.load() + transport_waiter_.load() == 0 ||
                                     background_pending_.load(std::memory_order_relaxed))) {
        netrecv_sleep_.store(kAwake);
        return false;
    }
    pollfd fd{wake_fd_, POLLIN, 0};
    sleep_on(&fd, 1, Clock::now() + nap);
    counters_.naps.add();
    netrecv_sleep_.store(kAwake);
    if (!(fd.revents & POLLIN)) return false;
    drain_fd(wake_fd_, counters_.drains);
    return true;
}

Progress::Slept Progress::sleep_on_transport(std::chrono::microseconds nap) {
    const afmesh_net_ops &ops = transport_.net();
    int fd = -1;
    if (!(transport_.net_caps().flags & AFMESH_NET_CAP_WAIT_FD) || ops.get_wait_fd(transport_.ctx(), &fd) != 0)
        return nap_netrecv(nap, false) ? Slept::kNapWoken : Slept::kNapped;
    // Announced before arming: a poll by another thread after arm() sees it
    // and wakes us (hand_back); one before arm() is seen by arm(). Work
    // handed to the background before the announcement is seen here.
    netrecv_sleep_.store(kOnTransport);
    {
        // arm() and poll() must not run concurrently; a waiter may be polling.
        MutexLock lock(&poll_mu_);
        if (run_background() || ops.arm(transport_.ctx()) != AFMESH_HAL_OK) {  // work pending: poll again first
            netrecv_sleep_.store(kAwake);
            return Slept::kOnTransport;
        }
    }
    pollfd fds[2] = {{fd, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    ::poll(fds, 2, -1);
    counters_.transport_sleeps.add();
    netrecv_sleep_.store(kAwake);
    if (fds[1].revents & POLLIN) drain_fd(wake_fd_, counters_.drains);
    return Slept::kOnTransport;
}

void Progress::run() {
    // Adaptive mode spins for adaptive_spin_ after the last poll that found
    // completions, by any thread: a waiter's keep the window open too. The
    // polls tally says one happened; this thread reads the clock when it
    // sees so, rather than every productive poll reading it on the hot path
    // (at most one recheck late: the window opens a little later).
    Clock::time_point last_activity = Clock::now();
    uint64_t polls_seen = counters_.polls.get();
    IdleSpin idle(counters_.yields);
    auto nap = kNapWithoutFd;  // the next idle nap without a wait fd
    while (!stopping_.load(std::memory_order_relaxed)) {
        int n = try_progress();
        if (n < 0) {
            AFMESH_LOG(AFMESH_LOG_ERROR, "transport poll failed (%d); progress thread stops", n);
            break;
        }
        if (transport_waiter_.load(std::memory_order_relaxed)) wake_transport_waiter();  // it may have armed before our poll
        if (n > 0) {
            idle.reset();
            nap = kNapWithoutFd;
            continue;
        }
        const PollMode mode = this->mode();
        const bool caller_drives = spinners_.load(std::memory_order_relaxed) + transport_waiter_.load(std::memory_order_relaxed) > 0;
        const Clock::time_point now = Clock::now();
        if (const uint64_t polls = counters_.polls.get(); polls != polls_seen) {
            polls_seen = polls;
            last_activity = now;
        }
        if (!caller_drives &&
            (mode == PollMode::kBusy || (mode == PollMode::kAdaptive && now - last_activity < adaptive_spin_))) {
            idle(now);
            continue;
        }
        if (background_pending_.load(std::memory_order_relaxed)) {
            // Device events have no fd to sleep on: look again shortly (or at once when woken).
            (void)nap_netrecv(kNapWithoutFd, false);
            continue;
        }
        // Time asleep is not time spent spinning idle: the next spin starts afresh.
        idle.reset();
        if (caller_drives) {
            (void)nap_netrecv(kParkRecheck, true);  // parked: waits out the callers' driving
            continue;
        }
        switch (sleep_on_transport(nap)) {
        case Slept::kOnTransport:
            last_activity = Clock::now();
            break;
        // A nap without a wait fd is no sign of activity: the window is not reopened.
        case Slept::kNapped: nap = std::min(nap * 2, kLongestIdleNap); break;
        case Slept::kNapWoken: nap = kNapWithoutFd; break;
        }
    }
}

}  // namespace afmesh
