// SPDX-License-Identifier: Apache-2.0
// Progress: the NetRecv thread that polls the transport and dispatches its
// completions, and the waiting strategy shared by every blocking call.
//
// Whoever waits also drives progress: a caller blocked in wait() polls the
// transport itself while it spins, so a completion reaches it without a
// thread hand-off (which costs a VM wake-up, ~100 us, when the other thread
// sleeps). When its spin window closes, one waiter goes on to sleep on the
// transport's wait fd itself, and the NetRecv thread stands aside: an
// arrival then wakes the thread that wants it, once, instead of waking
// NetRecv to wake the waiter. The NetRecv thread covers the time nobody
// waits; a waiter that leaves wakes it only for other waiters asleep on
// the condition variable (the leaver is back in microseconds more often than
// not), and the parked thread looks again every millisecond.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <thread>
#include <vector>

#include "config.h"
#include "counters.h"
#include "module_loader.h"
#include "status.h"
#include "thread_annotations.h"

namespace afmesh {

enum class PollMode {
    kBusy,      // spin forever: lowest latency, burns a core
    kAdaptive,  // spin briefly after activity, then sleep on the transport's fd
    kBlocking,  // sleep as soon as there is nothing to do
};
/** Parses "busy|adaptive|blocking". */
bool parse_poll_mode(const std::string &name, PollMode *mode);
/** AFMESH_POLL_SPIN_US: adaptive mode's spin window; unset, longer for a transport without a wait fd. */
std::chrono::microseconds adaptive_spin(const Config &config, const Module &transport);

using Clock = std::chrono::steady_clock;

class Progress {
public:
    /** Called with a batch of completions, with progress serialised (one caller at a time). */
    using Dispatch = std::function<void(const afmesh_net_event *events, int count)>;
    /**
     * Work outside the transport (device events to watch), run after every
     * poll, with progress serialised; returns true while some remains, which
     * keeps the NetRecv thread from sleeping on the transport alone. Cheap
     * when there is none: it also runs just before the thread sleeps.
     */
    using Background = std::function<bool()>;

    /**
     * `adaptive_spin`: in adaptive mode, how long waiters and the NetRecv
     * thread keep spinning after the last completion before they sleep.
     */
    Progress(const Module &transport, PollMode mode, std::chrono::microseconds adaptive_spin, Dispatch dispatch);
    ~Progress();
    Progress(const Progress &) = delete;
    Progress &operator=(const Progress &) = delete;

    /** Sets the background work; before start(). */
    void set_background(Background background) { background_ = std::move(background); }
    /** Starts the NetRecv thread, allowed onto `cpus` only (empty: anywhere). */
    Status start(const std::vector<int> &cpus);
    /** Stops and joins the thread; idempotent. */
    void stop();

    /**
     * Polls once unless another thread is polling. Returns the events
     * handled, or a negative status. For callers outside wait_until().
     */
    int poll_once();

    /**
     * Waits until ready() holds or the deadline passes, driving progress
     * while it spins, and while it sleeps when it is the one waiter on the
     * transport. ready() must be cheap and thread-safe (read atomics).
     * @return OK, TIMEOUT, or ERROR when the transport itself has failed.
     */
    Status wait_until(const std::function<bool()> &ready, Clock::time_point deadline);

    /** Wakes sleeping waiters; call after making some ready() true. */
    void notify_waiters() AFMESH_EXCLUDES(wait_mu_);

    /** Wakes the NetRecv thread if it sleeps: there is background work for it. */
    void wake_netrecv();

    /** Polls, sleeps, wake-ups and yields so far (readable from any thread). */
    const ProgressCounters &counters() const { return counters_; }

    PollMode mode() const { return mode_.load(std::memory_order_relaxed); }
    /** Changes the polling mode; takes effect at the next wait or idle period. */
    void set_mode(PollMode mode);

private:
    /** Polls and dispatches unless another thread is polling; *polled says whether it did. */
    int try_progress(bool *polled = nullptr) AFMESH_EXCLUDES(poll_mu_);
    /**
     * After a poll, whoever sleeps on the transport (NetRecv or a waiter)
     * looks again: the poll may have left completions in memory with the fd
     * not readable.
     */
    void hand_back();
    /** Wakes the waiter asleep on the transport, if one is armed. */
    void wake_transport_waiter();
    /**
     * wait_until() for the one waiter that sleeps on the transport's fd,
     * polling and dispatching itself at each wake-up.
     */
    Status wait_on_transport(const std::function<bool()> &ready, Clock::time_point deadline, int fd)
        AFMESH_EXCLUDES(poll_mu_);
    /** A waiter that drove progress leaves: NetRecv takes over now if others sleep on the condition variable. */
    void stop_driving();
    /** Polls and dispatches, with poll_mu_ held; returns what poll() did. */
    int poll_locked() AFMESH_REQUIRES(poll_mu_);
    /** Runs the background work (with poll_mu_ held); true while some remains. */
    bool run_background() AFMESH_REQUIRES(poll_mu_);
    void run();
    enum class Slept { kOnTransport, kNapped, kNapWoken };
    /**
     * Sleeps until the transport or another thread wakes it, or, without a
     * wait fd, naps for `nap` (nap_netrecv).
     */
    Slept sleep_on_transport(std::chrono::microseconds nap) AFMESH_EXCLUDES(poll_mu_);
    /**
     * The NetRecv thread sleeps on its wake fd alone for `nap`: naps without
     * a transport wait fd, and (`only_while_callers_drive`) parks while a
     * waiter spins or sleeps on the transport, not at all if none does any
     * more. True when wake_netrecv() cut it short.
     */
    bool nap_netrecv(std::chrono::microseconds nap, bool only_while_callers_drive);

    const Module &transport_;
    ProgressCounters counters_;
    std::atomic<PollMode> mode_;
    const std::chrono::microseconds adaptive_spin_;
    const Dispatch dispatch_;
    Background background_;
    std::atomic<bool> background_pending_{false};
    // Serialises progress: poll() and arm() on the transport, dispatch, and
    // the background work (run_background() requires it).
    Mutex poll_mu_;
    std::vector<afmesh_net_event> events_ AFMESH_GUARDED_BY(poll_mu_);
    int wake_fd_ = -1;  // eventfd that interrupts the NetRecv thread's sleep
    std::atomic<bool> stopping_{false};
    std::thread thread_;

    // Guards no data (what sleepers wait for is atomic): held around the
    // sleep and the notify, so a notify cannot fall between a sleeper's last
    // look at ready() and its sleep.
    Mutex wait_mu_;
    std::condition_variable wait_cv_;
    std::atomic<int> sleepers_{0};
    // Callers spinning in wait_until() drive progress themselves; the NetRecv
    // thread then parks instead of competing for a core and the poll lock.
    std::atomic<int> spinners_{0};
    // A waiter sleeps on the transport's fd (at most one: 1 or 0); the
    // NetRecv thread parks meanwhile. It is woken through its own eventfd by
    // notify_waiters() and by other threads' polls, once per arming.
    std::atomic<int> transport_waiter_{0};
    std::atomic<bool> transport_waiter_armed_{false};
    int waiter_wake_fd_ = -1;
    // Where the NetRecv thread sleeps. On the transport's fd: a transport may
    // keep completions in memory (fd not readable) after another thread's
    // poll; that thread then wakes NetRecv, which had armed before that poll.
    // Parked (on wake_fd_ alone, looking again every kParkRecheck): while a
    // waiter drives progress.
    enum NetRecvSleep { kAwake, kOnTransport, kParked };
    std::atomic<int> netrecv_sleep_{kAwake};
};

}  // namespace afmesh
