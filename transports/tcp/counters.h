// SPDX-License-Identifier: Apache-2.0
// What the tcp module counts per context: each kind of system call it makes
// on the data path, so `afmesh bench` can say what a push-pull costs.
#pragma once

#include "../common/module_counters.h"

namespace afmesh::tcp {

enum Counter : size_t {
    kSendmsgCalls,
    kRecvmsgCalls,
    kEpollWaitCalls,
    kEpollCtlCalls,
    kEventfdCalls,
    kAcceptCalls,
    kConnectCalls,
    kCounterCount
};

inline constexpr std::array<net_module::CounterSpec, kCounterCount> kCounterSpecs = {{
    {"sendmsg_calls", "sendmsg(2) calls: gathered sends of frames", true},
    {"recvmsg_calls", "recvmsg(2) calls: scattered receives of frames", true},
    {"epoll_wait_calls", "epoll_wait(2) calls of poll()", true},
    {"epoll_ctl_calls", "epoll_ctl(2) calls: watching a socket for room to send, and back", true},
    {"eventfd_calls", "reads and writes of the wake-up eventfd", true},
    {"accept_calls", "accept4(2) calls", true},
    {"connect_calls", "connect(2) calls", true},
}};

using Counters = net_module::ModuleCounters<kCounterCount>;

}  // namespace afmesh::tcp
