// SPDX-License-Identifier: Apache-2.0
#include "ibverbs/wire.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstring>

#include "byte_codec.h"

namespace afmesh::ibverbs {
namespace {

constexpr uint8_t kAddressMagic[4] = {'A', 'F', 'I', 'B'};
constexpr uint8_t kHandshakeMagic[4] = {'A', 'F', 'I', 'Q'};
constexpr uint32_t kMaxQpn = (1u << 24) - 1;  // QP numbers and PSNs are 24-bit on the wire

bool valid_link(uint8_t link) { return link == kLinkInfiniBand || link == kLinkEthernet; }

}  // namespace

void encode_address(const EndpointAddress &address, uint8_t out[kAddressSize]) {
    memset(out, 0, kAddressSize);
    memcpy(out, kAddressMagic, 4);
    out[4] = kWireVersion;
    out[5] = address.link;
    if (address.side_channel.ss_family == AF_INET) {
        const auto &v4 = reinterpret_cast<const sockaddr_in &>(address.side_channel);
        out[6] = 4;
        store_be16(out + 8, ntohs(v4.sin_port));
        memcpy(out + 12, &v4.sin_addr, 4);
    } else {
        const auto &v6 = reinterpret_cast<const sockaddr_in6 &>(address.side_channel);
        out[6] = 6;
        store_be16(out + 8, ntohs(v6.sin6_port));
        memcpy(out + 12, &v6.sin6_addr, 16);
    }
    store_be16(out + 10, address.lid);
    memcpy(out + 28, address.gid.raw, 16);
}

bool decode_address(const void *blob, size_t size, EndpointAddress *out, std::string *why) {
    const auto *in = static_cast<const uint8_t *>(blob);
    if (!blob || size != kAddressSize) {
        *why = "an ibverbs address is " + std::to_string(kAddressSize) + " bytes, not " + std::to_string(size);
        return false;
    }
    if (memcmp(in, kAddressMagic, 4) != 0) {
        *why = "not an ibverbs address (bad magic)";
        return false;
    }
    if (in[4] != kWireVersion) {
        *why = "ibverbs address version " + std::to_string(in[4]) + ", this module speaks " +
               std::to_string(kWireVersion);
        return false;
    }
    if (!valid_link(in[5]) || (in[6] != 4 && in[6] != 6) || load_be16(in + 8) == 0) {
        *why = "malformed ibverbs address (link layer, address family or port)";
        return false;
    }
    *out = EndpointAddress{};
    out->link = in[5];
    if (in[6] == 4) {
        auto &v4 = reinterpret_cast<sockaddr_in &>(out->side_channel);
        v4.sin_family = AF_INET;
        v4.sin_port = htons(load_be16(in + 8));
        memcpy(&v4.sin_addr, in + 12, 4);
    } else {
        auto &v6 = reinterpret_cast<sockaddr_in6 &>(out->side_channel);
        v6.sin6_family = AF_INET6;
        v6.sin6_port = htons(load_be16(in + 8));
        memcpy(&v6.sin6_addr, in + 12, 16);
    }
    out->lid = load_be16(in + 10);
    memcpy(out->gid.raw, in + 28, 16);
    return true;
}

void encode_handshake(HandshakeType type, const QpInfo &info, uint8_t out[kHandshakeSize]) {
    memset(out, 0, kHandshakeSize);
    memcpy(out, kHandshakeMagic, 4);
    out[4] = kWireVersion;
    out[5] = static_cast<uint8_t>(type);
    out[6] = info.link;
    out[7] = info.mtu;
    store_be32(out + 8, info.qpn);
    store_be32(out + 12, info.psn);
    store_be16(out + 16, info.lid);
    memcpy(out + 20, info.gid.raw, 16);
}

bool decode_handshake(const uint8_t in[kHandshakeSize], HandshakeType expected, QpInfo *out, std::string *why) {
    if (memcmp(in, kHandshakeMagic, 4) != 0 || in[4] != kWireVersion) {
        *why = "not an ibverbs handshake of version " + std::to_string(kWireVersion);
        return false;
    }
    if (in[5] != static_cast<uint8_t>(expected)) {
        *why = "handshake message type " + std::to_string(in[5]) + " where " +
               std::to_string(static_cast<int>(expected)) + " was expected";
        return false;
    }
    QpInfo info;
    info.link = in[6];
    info.mtu = in[7];
    info.qpn = load_be32(in + 8);
    info.psn = load_be32(in + 12);
    info.lid = load_be16(in + 16);
    memcpy(info.gid.raw, in + 20, 16);
    if (!valid_link(info.link) || info.mtu < IBV_MTU_256 || info.mtu > IBV_MTU_4096 || info.qpn == 0 ||
        info.qpn > kMaxQpn || info.psn > kMaxQpn) {
        *why = "malformed handshake (link layer, MTU, QP number or PSN out of range)";
        return false;
    }
    *out = info;
    return true;
}

std::string format_sockaddr(const sockaddr_storage &address) {
    char host[INET6_ADDRSTRLEN] = "?";
    if (address.ss_family == AF_INET) {
        const auto &v4 = reinterpret_cast<const sockaddr_in &>(address);
        inet_ntop(AF_INET, &v4.sin_addr, host, sizeof host);
        return std::string(host) + ":" + std::to_string(ntohs(v4.sin_port));
    }
    const auto &v6 = reinterpret_cast<const sockaddr_in6 &>(address);
    inet_ntop(AF_INET6, &v6.sin6_addr, host, sizeof host);
    return "[" + std::string(host) + "]:" + std::to_string(ntohs(v6.sin6_port));
}

}  // namespace afmesh::ibverbs
