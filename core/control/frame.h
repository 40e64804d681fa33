// SPDX-License-Identifier: Apache-2.0
// The control protocol's framing: every message travels as a 12-byte header
// {magic, protocol version, type, payload length} and a payload of at most
// kMaxFramePayload bytes; integers are little-endian, as in every afmesh wire
// format (byte_codec.h).
//
// Compatibility rule: the header layout and the ERROR payload never change, so
// peers of different protocol versions can always tell each other why they
// disagree. Any other change to a payload bumps kProtocolVersion; a peer
// speaking another version is refused (UNSUPPORTED_VERSION), never guessed at.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "status.h"

namespace afmesh::control {

inline constexpr uint32_t kFrameMagic = 0x434d4641;  // "AFMC" on the wire
// 2: the roster carries the cluster key and each node's incarnation.
// 3: PEER_UP and its ACK, and the roster says whether it admits a replacement.
// 4: REJOIN, with which the nodes of a running cluster report to a restarted scheduler.
inline constexpr uint16_t kProtocolVersion = 4;
inline constexpr size_t kFrameHeaderBytes = 12;
/** Large enough for the roster of thousands of nodes; small enough that a stranger cannot make us allocate much. */
inline constexpr uint32_t kMaxFramePayload = 1u << 20;

enum class MessageType : uint16_t {
    kHello = 1,        // node -> scheduler: who I am
    kProgress = 2,     // scheduler -> node: who is still missing (join or stop)
    kRoster = 3,       // scheduler -> node: every node, and the receiver's rank
    kError = 4,        // scheduler -> node: refusal or eviction; the connection closes after it
    kBarrier = 5,      // node -> scheduler: entering a barrier
    kBarrierDone = 6,  // scheduler -> node: barrier released (or failed)
    kHeartbeat = 7,    // both ways
    kPeerDown = 8,     // scheduler -> node: a node was declared dead
    kStop = 9,         // node -> scheduler: this node is stopping
    kStopDone = 10,    // scheduler -> node: every node has stopped (or failed)
    kPeerUp = 11,      // scheduler -> node: a failed node's replacement was admitted
    kPeerUpAck = 12,   // node -> scheduler: ready for that replacement (its handshake expects it)
    kRejoin = 13,      // node -> restarted scheduler: who I am in the running cluster, and its key
};

/** "HELLO", "ROSTER"...; "UNKNOWN" for a value outside the enum. */
const char *message_type_name(MessageType type);

struct FrameHeader {
    MessageType type;
    uint32_t payload_bytes;
};

/** Appends header + payload to `out`. The caller keeps payloads within kMaxFramePayload. */
void append_frame(MessageType type, std::span<const uint8_t> payload, std::vector<uint8_t> *out);

/**
 * Validates a received header: INVALID_ARGUMENT for a wrong magic or a
 * payload over the limit, UNSUPPORTED_VERSION for another protocol version.
 * The type is not checked here: the receiver decides which types it accepts.
 */
Status decode_frame_header(std::span<const uint8_t, kFrameHeaderBytes> bytes, FrameHeader *out);

}  // namespace afmesh::control
