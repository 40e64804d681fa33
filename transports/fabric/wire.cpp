// SPDX-License-Identifier: Apache-2.0
#include "fabric/wire.h"

#include "byte_codec.h"

namespace afmesh::fabric {
namespace {

constexpr uint32_t kMessageMagic = 0x4d464641;  // "AFFM"

}  // namespace

void encode_header(const Header &header, uint8_t *out) {
    store_le32(out, kMessageMagic);
    out[4] = kWireVersion;
    out[5] = static_cast<uint8_t>(header.type);
    store_le16(out + 6, 0);
    store_le32(out + 8, header.dst_conn);
    store_le32(out + 12, header.src_conn);
}

bool decode_header(const uint8_t *data, size_t len, Header *header, Reason *why) {
    if (len < kHeaderSize) {
        why->format("a %zu-byte message is shorter than the %zu-byte header", len, kHeaderSize);
        return false;
    }
    if (load_le32(data) != kMessageMagic) {
        why->format("a message without the fabric transport's magic");
        return false;
    }
    const uint8_t version = data[4], type = data[5];
    const bool any_version = type == static_cast<uint8_t>(MessageType::kHello) ||
                             type == static_cast<uint8_t>(MessageType::kReject);
    if (version != kWireVersion && !any_version) {
        why->format("a type %u message of fabric wire protocol %u (this module speaks %u)", type, version,
                    unsigned{kWireVersion});
        return false;
    }
    if (type < static_cast<uint8_t>(MessageType::kHello) || type > static_cast<uint8_t>(MessageType::kReject)) {
        why->format("a message of unknown type %u", type);
        return false;
    }
    header->type = static_cast<MessageType>(type);
    header->version = version;
    header->dst_conn = load_le32(data + 8);
    header->src_conn = load_le32(data + 12);
    // BYE may leave dst at 0: a connection closed before ACCEPT arrived
    // does not know the peer's id; the endpoint it arrives on names it.
    // REJECT comes from the listener, which has no connection id.
    const bool needs_dst = header->type != MessageType::kHello && header->type != MessageType::kBye;
    const bool needs_src = header->type != MessageType::kReject;
    if ((needs_src && header->src_conn == 0) || (needs_dst && header->dst_conn == 0)) {
        why->format("a type %u message without its connection ids", type);
        return false;
    }
    if ((header->type == MessageType::kBye || header->type == MessageType::kReject) && len != kHeaderSize) {
        why->format("a type %u control message with %zu bytes of payload", type, len - kHeaderSize);
        return false;
    }
    if (header->type == MessageType::kImm && len != kHeaderSize + kImmPayloadSize) {
        why->format("an immediate message with %zu bytes of payload, not %zu", len - kHeaderSize, kImmPayloadSize);
        return false;
    }
    return true;
}

}  // namespace afmesh::fabric
