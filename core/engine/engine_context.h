// SPDX-License-Identifier: Apache-2.0
// What the worker and server engines share with the node that owns them.
#pragma once

#include <functional>

#include "counters.h"
#include "eager_policy.h"
#include "memory_registry.h"
#include "module_loader.h"
#include "progress.h"
#include "staging.h"
#include "thread_annotations.h"

namespace afmesh {

struct EngineContext {
    const Module &transport;
    const Module &device;
    MemoryRegistry &registry;
    /** Pinned host copies of device memory the transport cannot register. */
    Staging &staging;
    Progress &progress;
    NodeCounters &counters;
    /**
     * Guards all engine state (AFMESH_GUARDED_BY(ctx_.mu) in the engines);
     * never held while waiting or polling. The node's own lock (Node::mu_)
     * under the engines' name.
     */
    Mutex &mu;
    int device_id = 0;
    /** Which tensors travel inside the REQUEST or RESPONSE (eager_policy.h). */
    EagerPolicy eager;
    /** Entries of each peer's mailbox (mailbox.h); 0 without one (AFMESH_MAILBOX_ENTRIES, or no gathered write). */
    uint32_t mailbox_entries = 0;
    /**
     * Closes a peer's connection after it broke the protocol, with mu held.
     * The node closes it, not the engine: the node still tracks the
     * connection (heartbeats, BYE, its final close) and would use it after
     * the transport freed it.
     */
    std::function<void(afmesh_net_conn *)> drop_connection;
    /**
     * Told, with mu held, the first time a peer fails (its operations have
     * failed with `why`): the node reports it to the application.
     */
    std::function<void(int32_t peer, const Status &why)> peer_failed;
};

/** A status for the C API from a failed transport call. */
inline Status peer_failure(const std::string &who, const Status &why) {
    return {Code::kPeerFailed, who + " failed: " + why.message()};
}

}  // namespace afmesh
