// SPDX-License-Identifier: Apache-2.0
// What the fabric module counts per context: its libfabric calls on the data
// path and the system calls it makes itself. The provider's own system calls
// (tcp;ofi_rxm's sendmsg, shm's none) happen inside libfabric, out of sight:
// "syscalls" here is this module's alone.
#pragma once

#include "../common/module_counters.h"

namespace afmesh::fabric {

enum Counter : size_t {
    kWritePosts,
    kSendPosts,
    kRecvPosts,
    kPostsRefused,
    kCqReads,
    kCqErrors,
    kTrywaits,
    kEventfdCalls,
    kCounterCount
};

inline constexpr std::array<net_module::CounterSpec, kCounterCount> kCounterSpecs = {{
    {"fi_writemsg_posts", "fi_writemsg calls the provider took: writes with remote CQ data", false},
    {"fi_send_posts", "fi_send calls the provider took: messages", false},
    {"fi_recv_posts", "fi_recv calls: receive buffers posted and reposted", false},
    {"posts_refused", "posts the provider refused with -FI_EAGAIN (queue full; retried)", false},
    {"fi_cq_read_calls", "fi_cq_read calls", false},
    {"cq_error_entries", "completion queue error entries read (fi_cq_readerr)", false},
    {"fi_trywait_calls", "fi_trywait calls before the core sleeps on the wait fd", false},
    {"eventfd_calls", "reads and writes of the wake-up eventfd and timer fd", true},
}};

using Counters = net_module::ModuleCounters<kCounterCount>;

}  // namespace afmesh::fabric
