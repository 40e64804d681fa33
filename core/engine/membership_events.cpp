// SPDX-License-Identifier: Apache-2.0
#include "membership_events.h"

namespace afmesh {

void MembershipEvents::peer_down(Role role, int32_t rank, uint64_t incarnation, const Status &why) {
    {
        MutexLock lock(&mu_);
        if (closed_ || !reported_down_.emplace(role, rank, incarnation).second) return;
        queue_.push_back({MembershipEvent::Type::kPeerDown, role, rank, incarnation, why});
    }
    cv_.notify_all();
}

void MembershipEvents::peer_up(Role role, int32_t rank, uint64_t incarnation) {
    {
        MutexLock lock(&mu_);
        if (closed_) return;
        // The same incarnation can go down again: the scheduler, which has none, after a restart.
        reported_down_.erase({role, rank, incarnation});
        queue_.push_back({MembershipEvent::Type::kPeerUp, role, rank, incarnation, Status::ok()});
    }
    cv_.notify_all();
}

Status MembershipEvents::next(std::chrono::milliseconds timeout, MembershipEvent *out) {
    MutexLock lock(&mu_);
    auto have_one = [this]() AFMESH_REQUIRES(mu_) { return !queue_.empty() || closed_; };
    // "No limit" is a year: long enough, and no overflow in the clock's arithmetic.
    const auto limit = timeout.count() < 0 ? std::chrono::hours(24 * 365) : timeout;
    if (!lock.wait_for(cv_, limit, have_one))
        return {Code::kTimeout, "no membership event within " + std::to_string(timeout.count()) + " ms"};
    if (queue_.empty()) return {Code::kClosed, "the node is stopping"};
    *out = std::move(queue_.front());
    queue_.pop_front();
    return Status::ok();
}

void MembershipEvents::close() {
    {
        MutexLock lock(&mu_);
        closed_ = true;
    }
    cv_.notify_all();
}

}  // namespace afmesh
