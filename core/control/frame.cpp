// SPDX-License-Identifier: Apache-2.0
#include "control/frame.h"

#include <cstdio>
#include <string>
#include <vector>

#include "control/wire_codec.h"

namespace afmesh::control {

const char *message_type_name(MessageType type) {
    switch (type) {
    case MessageType::kHello: return "HELLO";
    case MessageType::kProgress: return "PROGRESS";
    case MessageType::kRoster: return "ROSTER";
    case MessageType::kError: return "ERROR";
    case MessageType::kBarrier: return "BARRIER";
    case MessageType::kBarrierDone: return "BARRIER_DONE";
    case MessageType::kHeartbeat: return "HEARTBEAT";
    case MessageType::kPeerDown: return "PEER_DOWN";
    case MessageType::kStop: return "STOP";
    case MessageType::kStopDone: return "STOP_DONE";
    case MessageType::kPeerUp: return "PEER_UP";
    case MessageType::kPeerUpAck: return "PEER_UP_ACK";
    case MessageType::kRejoin: return "REJOIN";
    }
    return "UNKNOWN";
}

void append_frame(MessageType type, std::span<const uint8_t> payload, std::vector<uint8_t> *out) {
    ByteWriter header(*out);
    header.u32(kFrameMagic);
    header.u16(kProtocolVersion);
    header.u16(static_cast<uint16_t>(type));
    header.u32(static_cast<uint32_t>(payload.size()));
    out->insert(out->end(), payload.begin(), payload.end());
}

Status decode_frame_header(std::span<const uint8_t, kFrameHeaderBytes> bytes, FrameHeader *out) {
    WireReader in(bytes, "frame header");
    uint32_t magic = in.u32("magic");
    uint16_t version = in.u16("version");
    uint16_t type = in.u16("type");
    uint32_t length = in.u32("length");
    if (Status s = in.finish(); !s) return s;
    if (magic != kFrameMagic) {
        char text[96];
        snprintf(text, sizeof text, "bad frame magic 0x%08x (expected 0x%08x): not an afmesh control peer", magic,
                 kFrameMagic);
        return {Code::kInvalidArgument, text};
    }
    if (version != kProtocolVersion) {
        return {Code::kUnsupportedVersion, "peer speaks control protocol version " + std::to_string(version) +
                                               ", this build speaks version " + std::to_string(kProtocolVersion)};
    }
    if (length > kMaxFramePayload) {
        return {Code::kInvalidArgument, "frame payload of " + std::to_string(length) + " bytes exceeds the " +
                                            std::to_string(kMaxFramePayload) + "-byte control frame limit"};
    }
    out->type = static_cast<MessageType>(type);
    out->payload_bytes = length;
    return Status::ok();
}

}  // namespace afmesh::control
