// SPDX-License-Identifier: Apache-2.0
// Posts writes and messages on one connection in order. What the transport
// refuses with AGAIN (its send queue is full) waits here, in order, and is
// retried after the next poll, so callers never spin on a full queue.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "counters.h"
#include "module_loader.h"
#include "status.h"

namespace afmesh {

class Outbox {
public:
    /** `counters`: the peer's, which count each operation once the transport takes it. */
    Outbox(const Module &transport, afmesh_net_conn *conn, PeerCounters &counters)
        : transport_(&transport), conn_(conn), counters_(&counters),
          more_(transport.abi_minor() >= 1 ? AFMESH_NET_MORE : 0) {}

    afmesh_net_conn *conn() const { return conn_; }

    /**
     * Writes one segment, or two through the transport's gathered write
     * (Module::write_segs() >= 2), with one immediate. `flags` may hold
     * AFMESH_NET_SIGNAL and AFMESH_NET_MORE: callers always end a burst
     * without MORE, which is dropped for modules older than ABI 1.1. The
     * destinations are copied; the sources stay untouched until the
     * transport is done with them (write_imm's rule).
     */
    Status write(const afmesh_net_write_seg *segs, uint32_t count, uint32_t imm, uint32_t flags, uint64_t cookie);
    /** Sends `message` (the transport copies it; so does the queue when it must wait). */
    Status send(const std::vector<uint8_t> &message);
    /** Retries queued entries; an error means the connection is unusable. */
    Status flush();
    bool empty() const { return queue_.empty(); }

private:
    static constexpr uint32_t kMaxSegments = 2;
    struct Entry {
        uint32_t segments = 0;  // of a write; 0 for a message
        afmesh_net_write_seg seg[kMaxSegments]{};
        afmesh_net_rkey dst[kMaxSegments]{};  // what seg[i].dst points to once posted
        uint32_t imm = 0, flags = 0;
        uint64_t cookie = 0;
        std::vector<uint8_t> message;
    };
    /** Posts one entry. */
    int post(Entry &e);
    int send_now(const std::vector<uint8_t> &message);
    /** Counts a post: in `posted` when the transport took it, as queue_full when it answered AGAIN. */
    void count(int rc, Tally &posted);
    Status enqueue_or_post(Entry &&e);

    const Module *transport_;
    afmesh_net_conn *conn_;
    PeerCounters *counters_;
    const uint32_t more_;  // AFMESH_NET_MORE where the module understands it, else 0
    std::deque<Entry> queue_;
};

}  // namespace afmesh
