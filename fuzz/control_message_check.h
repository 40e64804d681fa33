// SPDX-License-Identifier: Apache-2.0
// One control-protocol payload of a given type through its decoder, and the
// properties every accepted payload has. Shared by the target that feeds
// payloads directly (control_messages_fuzz) and the one that takes them out
// of a byte stream, as the scheduler and the nodes do (control_frame_fuzz).
#pragma once

#include <span>
#include <vector>

#include "control/messages.h"
#include "fuzz_support.h"

namespace afmesh::fuzz {

/**
 * Decodes `payload` into `*m`; when accepted, checks that it re-encodes to
 * the same bytes. The control encodings are canonical (fixed-width integers,
 * length-prefixed strings, no trailing bytes accepted), so any difference is
 * a field the decoder dropped or misread. Decoding is deterministic, so this
 * also makes the re-encoding decode to an equal message.
 */
template <class Message>
bool control_round_trip(std::span<const uint8_t> payload, Message *m) {
    if (!control::decode(payload, m)) return false;
    check(same_bytes(payload, control::encode(*m)), "accepted control payload re-encodes differently",
          control::message_type_name(Message::kType));
    return true;
}

/** A message with no property beyond the round trip. */
template <class Message>
void control_round_trip_only(std::span<const uint8_t> payload) {
    Message m;
    control_round_trip(payload, &m);
}

/** Checks a payload the scheduler patches per node (with_your_rank). */
inline void check_roster_patch(std::span<const uint8_t> payload, const control::RosterMsg &m) {
    const int32_t other_rank = ~m.your_rank;
    std::vector<uint8_t> patched = control::with_your_rank({payload.begin(), payload.end()}, other_rank);
    control::RosterMsg again;
    check(control::decode(patched, &again).is_ok() && again.your_rank == other_rank,
          "a ROSTER patched with with_your_rank does not decode to the new rank");
    // your_rank is the payload's first field: nothing else may change.
    check(same_bytes(payload, patched, {{0, sizeof(int32_t)}}), "with_your_rank changed more than your_rank");
}

/** Feeds `payload` to the decoder for `type`; a type outside the protocol is ignored, as receivers refuse it. */
inline void check_control_payload(control::MessageType type, std::span<const uint8_t> payload) {
    using namespace control;
    // No default: a message type added to frame.h fails this build (-Wswitch)
    // until its decoder is fuzzed here too.
    switch (type) {
    case MessageType::kHello: {
        HelloMsg m;
        // The scheduler's limits are the node's: what one accepts, the other could have sent.
        if (control_round_trip(payload, &m)) {
            Status s = check_hello(m);
            check(s.is_ok(), "a decoded HELLO fails check_hello", s.message().c_str());
        }
        return;
    }
    case MessageType::kProgress: return control_round_trip_only<ProgressMsg>(payload);
    case MessageType::kRoster: {
        RosterMsg m;
        if (control_round_trip(payload, &m)) check_roster_patch(payload, m);
        return;
    }
    case MessageType::kError: return control_round_trip_only<ErrorMsg>(payload);
    case MessageType::kBarrier: return control_round_trip_only<BarrierMsg>(payload);
    case MessageType::kBarrierDone: return control_round_trip_only<BarrierDoneMsg>(payload);
    case MessageType::kHeartbeat: return control_round_trip_only<HeartbeatMsg>(payload);
    case MessageType::kPeerDown: return control_round_trip_only<PeerDownMsg>(payload);
    case MessageType::kPeerUp: return control_round_trip_only<PeerUpMsg>(payload);
    case MessageType::kPeerUpAck: return control_round_trip_only<PeerUpAckMsg>(payload);
    case MessageType::kRejoin: {
        RejoinMsg m;
        // A REJOIN is a HELLO and more: within the same limits.
        if (control_round_trip(payload, &m)) {
            Status s = check_hello(m.hello);
            check(s.is_ok(), "a decoded REJOIN fails check_hello", s.message().c_str());
        }
        return;
    }
    case MessageType::kStop: return control_round_trip_only<StopMsg>(payload);
    case MessageType::kStopDone: return control_round_trip_only<StopDoneMsg>(payload);
    }
}

}  // namespace afmesh::fuzz
