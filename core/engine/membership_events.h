// SPDX-License-Identifier: Apache-2.0
// The membership changes a node reports to its application
// (afmesh_next_event): a queue that the engine fills as it finds peers gone
// and that the application drains on a thread of its own. Each peer
// incarnation goes down once, however many ways its failure was found (the
// scheduler's PEER_DOWN, a broken connection, silence, a BYE). Its lock
// ranks below the engine's: the engine reports with its own lock held, and
// a waiting application never holds the engine's.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <set>
#include <string>
#include <tuple>

#include "control/control_client.h"
#include "status.h"
#include "thread_annotations.h"

namespace afmesh {

struct MembershipEvent {
    enum class Type { kPeerDown, kPeerUp };
    Type type = Type::kPeerDown;
    Role role = Role::kWorker;
    int32_t rank = -1;
    uint64_t incarnation = 0;  // 0 for the scheduler
    Status why;                // PEER_DOWN: PEER_FAILED (failed) or CLOSED (stopped), with the reason; PEER_UP: OK
};

class MembershipEvents {
public:
    /** Queues PEER_DOWN for this incarnation, unless it was reported already. */
    void peer_down(Role role, int32_t rank, uint64_t incarnation, const Status &why) AFMESH_EXCLUDES(mu_);
    /**
     * Queues PEER_UP: a failed peer's replacement, this incarnation, is
     * connected and usable; or the scheduler (incarnation 0) was restarted
     * and has taken this node back.
     */
    void peer_up(Role role, int32_t rank, uint64_t incarnation) AFMESH_EXCLUDES(mu_);
    /**
     * Takes the oldest event, waiting up to `timeout` (negative: no limit).
     * TIMEOUT when none came; CLOSED once closed and drained.
     */
    Status next(std::chrono::milliseconds timeout, MembershipEvent *out) AFMESH_EXCLUDES(mu_);
    /** No more events: waiters get CLOSED once the queue is drained. */
    void close() AFMESH_EXCLUDES(mu_);

private:
    Mutex mu_;
    std::condition_variable cv_;
    std::deque<MembershipEvent> queue_ AFMESH_GUARDED_BY(mu_);
    std::set<std::tuple<Role, int32_t, uint64_t>> reported_down_ AFMESH_GUARDED_BY(mu_);
    bool closed_ AFMESH_GUARDED_BY(mu_) = false;
};

}  // namespace afmesh
