// Posts writes and messages on one connection in order. What the transport
// refuses with AGAIN (its send queue is full) waits here, in order, and is
// retried after the next poll, so callers never spin on a full queue.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "module_loader.h"
#include "status.h"

namespace afmesh {

class Outbox {
public:
    Outbox(const Module &transport, afmesh_net_conn *conn)
        : transport_(&transport), conn_(conn), more_(transport.abi_minor() >= 1 ? AFMESH_NET_MORE : 0) {}

    afmesh_net_conn *conn() const { return conn_; }

    /**
     * Writes with an immediate. `flags` may hold AFMESH_NET_SIGNAL and
     * AFMESH_NET_MORE: callers always end a burst with send(), and MORE is
     * dropped for modules older than ABI 1.1.
     */
    Status write(const void *src, uint64_t bytes, afmesh_net_mr *mr, const afmesh_net_rkey &dst, uint64_t offset,
                 uint32_t imm, uint32_t flags, uint64_t cookie);
    /** Sends `message` (the transport copies it; so does the queue when it must wait). */
    Status send(const std::vector<uint8_t> &message);
    /** Retries queued entries; an error means the connection is unusable. */
    Status flush();
    bool empty() const { return queue_.empty(); }

private:
    struct Entry {
        bool is_write = false;
        const void *src = nullptr;
        uint64_t bytes = 0;
        afmesh_net_mr *mr = nullptr;
        afmesh_net_rkey dst{};
        uint64_t offset = 0;
        uint32_t imm = 0, flags = 0;
        uint64_t cookie = 0;
        std::vector<uint8_t> message;
    };
    int post(const Entry &e);
    Status enqueue_or_post(Entry &&e);

    const Module *transport_;
    afmesh_net_conn *conn_;
    const uint32_t more_;  // AFMESH_NET_MORE where the module understands it, else 0
    std::deque<Entry> queue_;
};

}  // namespace afmesh
