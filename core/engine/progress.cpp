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

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
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

Progress::~Progress() { stop(); }

Status Progress::start(int cpu) {
    wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (wake_fd_ < 0) return {Code::kError, "eventfd failed"};
    thread_ = std::thread([this] { run(); });
    if (cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        if (pthread_setaffinity_np(thread_.native_handle(), sizeof set, &set) != 0)
            AFMESH_LOG(AFMESH_LOG_WARN, "could not pin the NetRecv thread to core %d", cpu);
    }
    return Status::ok();
}

void Progress::stop() {
    if (!thread_.joinable()) return;
    stopping_.store(true);
    uint64_t one = 1;
    ssize_t ignored = write(wake_fd_, &one, sizeof one);
    (void)ignored;
    thread_.join();
    close(wake_fd_);
    wake_fd_ = -1;
}

int Progress::try_progress(bool *polled) {
    std::unique_lock lock(poll_mu_, std::try_to_lock);
    if (!lock.owns_lock()) return 0;
    if (polled) *polled = true;
    int n = transport_.net().poll(transport_.ctx(), events_.data(), kMaxEventsPerPoll);
    if (n > 0) {
        // Whoever polled: a waiter's completions keep the NetRecv thread's window open too.
        last_activity_.store(Clock::now().time_since_epoch().count(), std::memory_order_relaxed);
        dispatch_(events_.data(), n);
    }
    run_background();
    return n;
}

bool Progress::run_background() {
    const bool pending = background_ && background_();
    background_pending_.store(pending, std::memory_order_relaxed);
    return pending;
}

int Progress::poll_once() {
    bool polled = false;
    int n = try_progress(&polled);
    if (polled) hand_back_to_netrecv();
    return n;
}

// Any poll may leave work inside the transport (a paused receive, a
// completion) with its fd not readable, and the NetRecv thread may have
// armed before that poll: so a thread that polled wakes it to look again.
// The same goes for new background work.
void Progress::wake_netrecv() {
    if (!netrecv_asleep_.load()) return;
    uint64_t one = 1;
    ssize_t ignored = write(wake_fd_, &one, sizeof one);
    (void)ignored;
}

void Progress::notify_waiters() {
    // A read-modify-write, not a load: RMWs on sleepers_ are totally ordered,
    // so either we see the waiter's increment, or its increment reads ours
    // and the waiter then sees the state our caller just made ready.
    if (sleepers_.fetch_add(0, std::memory_order_acq_rel) == 0) return;
    std::lock_guard lock(wait_mu_);
    wait_cv_.notify_all();
}

void Progress::set_mode(PollMode mode) {
    mode_.store(mode, std::memory_order_relaxed);
    // A NetRecv thread asleep in blocking mode must notice it should spin now.
    uint64_t one = 1;
    if (wake_fd_ >= 0) {
        ssize_t ignored = write(wake_fd_, &one, sizeof one);
        (void)ignored;
    }
}

Status Progress::wait_until(const std::function<bool()> &ready, Clock::time_point deadline) {
    const PollMode mode = this->mode();
    const auto spin_until = mode == PollMode::kBusy       ? deadline
                            : mode == PollMode::kAdaptive ? Clock::now() + adaptive_spin_
                                                          : Clock::now();
    spinners_.fetch_add(1);
    bool timed_out = false, polled = false;
    while (!ready()) {
        auto now = Clock::now();
        if (now >= deadline) {
            timed_out = true;
            break;
        }
        if (now >= spin_until) break;
        if (try_progress(&polled) == 0) cpu_relax();
    }
    spinners_.fetch_sub(1);
    if (polled) hand_back_to_netrecv();
    if (ready()) return Status::ok();
    if (timed_out) return {Code::kTimeout, "timed out"};
    // Sleep; the NetRecv thread makes progress and notifies.
    sleepers_.fetch_add(1);
    std::unique_lock lock(wait_mu_);
    bool done = wait_cv_.wait_until(lock, deadline, ready);
    sleepers_.fetch_sub(1);
    return done ? Status::ok() : Status(Code::kTimeout, "timed out");
}

bool Progress::sleep_on_transport() {
    const afmesh_net_ops &ops = transport_.net();
    int fd = -1;
    if (!(transport_.net_caps().flags & AFMESH_NET_CAP_WAIT_FD) || ops.get_wait_fd(transport_.ctx(), &fd) != 0) {
        std::this_thread::sleep_for(kNapWithoutFd);
        return false;
    }
    // Announced before arming: a poll by another thread after arm() sees it
    // and wakes us (wake_netrecv); one before arm() is seen by arm(). Work
    // handed to the background before the announcement is seen here.
    netrecv_asleep_.store(true);
    {
        // arm() and poll() must not run concurrently; a waiter may be polling.
        std::lock_guard lock(poll_mu_);
        if (run_background() || ops.arm(transport_.ctx()) != AFMESH_HAL_OK) {  // work pending: poll again first
            netrecv_asleep_.store(false);
            return true;
        }
    }
    pollfd fds[2] = {{fd, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    ::poll(fds, 2, -1);
    netrecv_asleep_.store(false);
    if (fds[1].revents & POLLIN) {
        uint64_t count;
        ssize_t ignored = read(wake_fd_, &count, sizeof count);
        (void)ignored;
    }
    return true;
}

void Progress::run() {
    last_activity_.store(Clock::now().time_since_epoch().count(), std::memory_order_relaxed);
    while (!stopping_.load(std::memory_order_relaxed)) {
        int n = try_progress();
        if (n < 0) {
            AFMESH_LOG(AFMESH_LOG_ERROR, "transport poll failed (%d); progress thread stops", n);
            break;
        }
        if (n > 0) continue;
        const PollMode mode = this->mode();
        const bool caller_spins = spinners_.load(std::memory_order_relaxed) > 0;
        const Clock::time_point last_activity(Clock::duration(last_activity_.load(std::memory_order_relaxed)));
        if (!caller_spins &&
            (mode == PollMode::kBusy || (mode == PollMode::kAdaptive && Clock::now() - last_activity < adaptive_spin_))) {
            cpu_relax();
            continue;
        }
        if (background_pending_.load(std::memory_order_relaxed)) {
            // Device events have no fd to sleep on: look again shortly.
            std::this_thread::sleep_for(kNapWithoutFd);
            continue;
        }
        // A nap without a wait fd is no sign of activity: the window is not reopened.
        if (sleep_on_transport()) last_activity_.store(Clock::now().time_since_epoch().count(), std::memory_order_relaxed);
    }
}

}  // namespace afmesh
