// SPDX-License-Identifier: Apache-2.0
// What the ibverbs module counts per context: work requests and doorbells
// (user space on a real NIC), CQ polls, and the system calls it makes itself
// (epoll over its fds, the completion channel, the wake-up eventfd).
#pragma once

#include "../common/module_counters.h"

namespace afmesh::ibverbs {

enum Counter : size_t {
    kSendRequests,
    kPostSendCalls,
    kRecvRequests,
    kPollCqCalls,
    kReqNotifyCalls,
    kEpollWaitCalls,
    kCqEventReads,
    kEventfdCalls,
    kCounterCount
};

inline constexpr std::array<net_module::CounterSpec, kCounterCount> kCounterSpecs = {{
    {"send_work_requests", "send work requests posted (RDMA writes with immediate, sends)", false},
    {"post_send_calls", "ibv_post_send calls: doorbells, a chain of work requests each", false},
    {"recv_work_requests", "receive work requests posted and reposted", false},
    {"poll_cq_calls", "ibv_poll_cq calls", false},
    {"req_notify_calls", "ibv_req_notify_cq calls: arming the CQ before the core sleeps", false},
    {"epoll_wait_calls", "epoll_wait(2) calls of poll()", true},
    {"cq_event_reads", "ibv_get_cq_event calls: reads of the completion channel", true},
    {"eventfd_calls", "reads and writes of the wake-up eventfd", true},
}};

using Counters = net_module::ModuleCounters<kCounterCount>;

}  // namespace afmesh::ibverbs
