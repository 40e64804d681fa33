// SPDX-License-Identifier: Apache-2.0
// One emulated connection end: its own local endpoint, the peer endpoint's
// address in the AV, and the ids both ends gave the connection in the
// handshake. Owned by the context; its address is the afmesh_net_conn handle.
#pragma once

#include <rdma/fabric.h>

#include <atomic>
#include <cstdint>
#include <vector>

#include "afmesh/hal/transport.h"
#include "errors.h"

namespace afmesh::fabric {

class Endpoint;

/** An event copied for later delivery (e.g. held until accept()). */
struct HeldEvent {
    afmesh_net_event event{};
    std::vector<uint8_t> data;  // EV_RECV payload
};

struct Connection {
    enum class State : uint8_t {
        kConnecting,   // HELLO sent, waiting for ACCEPT
        kIncoming,     // HELLO received, waiting for the caller's accept()
        kEstablished,  // usable
        kFailed,       // EV_CONN_ERROR queued; nothing else is reported
        kClosed,       // close() called; freed once no operation refers to it
    };

    Connection(Endpoint *endpoint, fi_addr_t peer, uint32_t id) : endpoint(endpoint), peer(peer), id(id) {}

    afmesh_net_conn *handle() { return reinterpret_cast<afmesh_net_conn *>(this); }
    static Connection *from(afmesh_net_conn *handle) { return reinterpret_cast<Connection *>(handle); }

    Endpoint *const endpoint;
    // The peer endpoint in the context's AV: the listener until ACCEPT names
    // the peer's connection endpoint (set before the state's release store).
    fi_addr_t peer;
    const uint32_t id;     // this end's id, unique in the context
    uint32_t remote_id = 0;  // the peer end's id, from HELLO or ACCEPT
    std::atomic<State> state{State::kConnecting};
    uint64_t deadline_ns = 0;  // kConnecting: when the handshake gives up

    // Set once, by whoever moves the state to kFailed (published by that store).
    Failure failure;
    // Events that arrive before the caller may see them (an incoming
    // connection before accept(), an outgoing one before ACCEPT): held.
    std::vector<HeldEvent> held;
    // Transmit operations in flight that point at this connection.
    std::atomic<uint32_t> outstanding{0};
    // Its operations in the endpoint's backlog; guarded by the endpoint's transmit lock.
    size_t backlogged = 0;
};

}  // namespace afmesh::fabric
