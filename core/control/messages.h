// SPDX-License-Identifier: Apache-2.0
// The control protocol's messages: one struct per message type with its wire
// encoding. Decoders validate every field (lengths, enum ranges, roster
// shape) so the scheduler and client only ever see well-formed messages.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "control/control_client.h"
#include "control/frame.h"
#include "control/frame_writer.h"
#include "control/node_id.h"
#include "status.h"

namespace afmesh::control {

/** Per-field limits, checked on decode. Free text longer than its limit is truncated on encode. */
inline constexpr size_t kMaxNameBytes = 256;       // transport, device, host
inline constexpr size_t kMaxTokenBytes = 1024;     // auth token
inline constexpr size_t kMaxAddressBytes = 65536;  // a transport's address blob
inline constexpr size_t kMaxTextBytes = 16384;     // error messages, reasons, progress details
/**
 * The largest payload a node ever sends (a REJOIN, which is a HELLO and 64
 * bytes more, with every field at its limit). The scheduler reads nothing
 * bigger, so a stranger cannot make it buffer a full control frame per
 * connection.
 */
inline constexpr uint32_t kMaxNodePayload =
    1 + 4 * 5 + (4 + kMaxTokenBytes) + 2 * (4 + kMaxNameBytes) + (4 + kMaxAddressBytes) + 8 + 32 + 3 * 8;
static_assert(kMaxNodePayload <= kMaxFramePayload);

struct HelloMsg {
    static constexpr MessageType kType = MessageType::kHello;
    Hello hello;
    // The node's view of the topology and timing, so a misconfigured node is
    // refused at the door instead of failing later in confusing ways.
    int32_t num_workers = 0, num_servers = 0;
    uint32_t heartbeat_interval_ms = 0, heartbeat_timeout_ms = 0;
    std::string auth_token;
};

enum class ProgressPhase : uint8_t { kJoin = 1, kStop = 2 };

struct ProgressMsg {
    static constexpr MessageType kType = MessageType::kProgress;
    ProgressPhase phase = ProgressPhase::kJoin;
    uint32_t workers_missing = 0, servers_missing = 0;
    std::string detail;  // stop: the missing nodes by name, e.g. "worker 1, server 0"

    bool operator==(const ProgressMsg &) const = default;
};

struct RosterMsg {
    static constexpr MessageType kType = MessageType::kRoster;
    int32_t your_rank = -1;  // first on the wire: with_your_rank() patches it
    Roster roster;
    /**
     * The receiver replaces a failed node of a running cluster: there is no
     * start-up barrier to enter, and its barriers are numbered on from the
     * cluster's, whose last numbers are `barriers_done` (by BarrierGroup - 1).
     */
    bool replacement = false;
    std::array<uint64_t, 3> barriers_done{};
    /** A replacement's roster: the other nodes that are down (failed, not yet replaced) as it joins. */
    std::vector<NodeId> down{};
};

/** Refusal or eviction. Frozen layout (see frame.h): code, message. */
struct ErrorMsg {
    static constexpr MessageType kType = MessageType::kError;
    Status status;
};

struct BarrierMsg {
    static constexpr MessageType kType = MessageType::kBarrier;
    BarrierGroup group = BarrierGroup::kAll;
    uint64_t seq = 0;  // the node's n-th barrier on this group, from 1
};

struct BarrierDoneMsg {
    static constexpr MessageType kType = MessageType::kBarrierDone;
    BarrierGroup group = BarrierGroup::kAll;
    uint64_t seq = 0;
    Status status;
};

struct HeartbeatMsg {
    static constexpr MessageType kType = MessageType::kHeartbeat;
};

struct PeerDownMsg {
    static constexpr MessageType kType = MessageType::kPeerDown;
    Role role = Role::kWorker;
    int32_t rank = -1;
    std::string reason;
};

/** A failed node's replacement was admitted, under the same role and rank and a new incarnation. */
struct PeerUpMsg {
    static constexpr MessageType kType = MessageType::kPeerUp;
    RosterEntry entry;
};

/**
 * The node has taken in a PEER_UP: the replacement's roster is held back
 * until every other member has, so none of them can meet the replacement
 * with the old incarnation's key.
 */
struct PeerUpAckMsg {
    static constexpr MessageType kType = MessageType::kPeerUpAck;
    Role role = Role::kWorker;
    int32_t rank = -1;
    uint64_t incarnation = 0;

    bool operator==(const PeerUpAckMsg &) const = default;
};

/**
 * A node of a running cluster reconnecting to a restarted scheduler: who it
 * is (its HELLO, with its rank as the requested one), the incarnation and the
 * cluster key it was given, and how many barriers it has entered per group.
 * The key is the node's proof of membership, and the only way a restarted
 * scheduler can hand it to later replacements; it travels where the roster
 * first carried it, on the control connection to the scheduler's address.
 */
struct RejoinMsg {
    static constexpr MessageType kType = MessageType::kRejoin;
    HelloMsg hello;
    uint64_t incarnation = 0;
    crypto::Key cluster_key{};
    std::array<uint64_t, 3> barriers_entered{};  // by BarrierGroup - 1
};

struct StopMsg {
    static constexpr MessageType kType = MessageType::kStop;
};

struct StopDoneMsg {
    static constexpr MessageType kType = MessageType::kStopDone;
    Status status;  // OK, or PEER_FAILED naming the nodes that died instead of stopping
};

std::vector<uint8_t> encode(const HelloMsg &m);
/**
 * A copy of an encoded ROSTER with your_rank replaced: the scheduler encodes
 * the roster once and patches the one field that differs per node.
 */
std::vector<uint8_t> with_your_rank(const std::vector<uint8_t> &roster_payload, int32_t your_rank);
std::vector<uint8_t> encode(const ProgressMsg &m);
std::vector<uint8_t> encode(const RosterMsg &m);
std::vector<uint8_t> encode(const ErrorMsg &m);
std::vector<uint8_t> encode(const BarrierMsg &m);
std::vector<uint8_t> encode(const BarrierDoneMsg &m);
std::vector<uint8_t> encode(const HeartbeatMsg &m);
std::vector<uint8_t> encode(const PeerDownMsg &m);
std::vector<uint8_t> encode(const PeerUpMsg &m);
std::vector<uint8_t> encode(const PeerUpAckMsg &m);
std::vector<uint8_t> encode(const RejoinMsg &m);
std::vector<uint8_t> encode(const StopMsg &m);
std::vector<uint8_t> encode(const StopDoneMsg &m);

/** Each returns INVALID_ARGUMENT naming the offending field when the payload is malformed. */
Status decode(std::span<const uint8_t> payload, HelloMsg *out);
Status decode(std::span<const uint8_t> payload, ProgressMsg *out);
Status decode(std::span<const uint8_t> payload, RosterMsg *out);
Status decode(std::span<const uint8_t> payload, ErrorMsg *out);
Status decode(std::span<const uint8_t> payload, BarrierMsg *out);
Status decode(std::span<const uint8_t> payload, BarrierDoneMsg *out);
Status decode(std::span<const uint8_t> payload, HeartbeatMsg *out);
Status decode(std::span<const uint8_t> payload, PeerDownMsg *out);
Status decode(std::span<const uint8_t> payload, PeerUpMsg *out);
Status decode(std::span<const uint8_t> payload, PeerUpAckMsg *out);
Status decode(std::span<const uint8_t> payload, RejoinMsg *out);
Status decode(std::span<const uint8_t> payload, StopMsg *out);
Status decode(std::span<const uint8_t> payload, StopDoneMsg *out);

/**
 * Checks what a node is about to announce against the field limits (which
 * also keep every HELLO within one frame): INVALID_ARGUMENT naming the limit.
 */
Status check_hello(const HelloMsg &m);

/** Queues `message` on `writer`. */
template <class Message>
void queue_message(FrameWriter &writer, const Message &message) {
    writer.queue(Message::kType, encode(message));
}

/** Whether a node of `role` takes part in barriers over `group`. */
bool group_contains(BarrierGroup group, Role role);
/** "workers", "servers", "all". */
const char *group_name(BarrierGroup group);

}  // namespace afmesh::control
