#include "wire.h"

#include "byte_order.h"

namespace afmesh::fabric {
namespace {

constexpr uint32_t kMessageMagic = 0x4d464641;  // "AFFM"
// 2: IMM messages (zero-byte writes). A peer of another version is not heard.
constexpr uint8_t kMessageVersion = 2;

}  // namespace

void encode_header(const Header &header, uint8_t *out) {
    store_le32(out, kMessageMagic);
    out[4] = kMessageVersion;
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
    if (load_le32(data) != kMessageMagic || data[4] != kMessageVersion) {
        why->format("a message without the fabric transport's magic and version %u", unsigned{kMessageVersion});
        return false;
    }
    const uint8_t type = data[5];
    if (type < static_cast<uint8_t>(MessageType::kHello) || type > static_cast<uint8_t>(MessageType::kImm)) {
        why->format("a message of unknown type %u", type);
        return false;
    }
    header->type = static_cast<MessageType>(type);
    header->dst_conn = load_le32(data + 8);
    header->src_conn = load_le32(data + 12);
    // BYE may leave dst at 0: a connection closed before ACCEPT arrived
    // does not know the peer's id; the endpoint it arrives on names it.
    const bool needs_dst = header->type != MessageType::kHello && header->type != MessageType::kBye;
    if (header->src_conn == 0 || (needs_dst && header->dst_conn == 0)) {
        why->format("a type %u message without its connection ids", type);
        return false;
    }
    if (header->type == MessageType::kBye && len != kHeaderSize) {
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
