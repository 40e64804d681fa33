// SPDX-License-Identifier: Apache-2.0
// The two formats that cross the network besides verbs traffic itself:
// the listen() address blob and the side-channel handshake messages. Both
// are fixed-size, big-endian and checked field by field when decoded; the
// tests forge them through these functions.
#pragma once

#include <infiniband/verbs.h>
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace afmesh::ibverbs {

inline constexpr uint8_t kWireVersion = 1;
inline constexpr uint8_t kLinkInfiniBand = 1, kLinkEthernet = 2;

/** What listen() publishes: the side channel's TCP address and the port's fabric address. */
struct EndpointAddress {
    sockaddr_storage side_channel{};  ///< AF_INET or AF_INET6, with the port
    uint8_t link = 0;                 ///< kLinkInfiniBand or kLinkEthernet
    uint16_t lid = 0;                 ///< InfiniBand
    ibv_gid gid{};                    ///< RoCE
};
inline constexpr size_t kAddressSize = 48;

void encode_address(const EndpointAddress &address, uint8_t out[kAddressSize]);
/** False, with the reason, for a blob that is not a well-formed address of this version. */
bool decode_address(const void *blob, size_t size, EndpointAddress *out, std::string *why);

/** Handshake message types, in the order they are exchanged. */
enum class HandshakeType : uint8_t {
    kRequest = 1,  ///< connector -> listener: here is my QP (in INIT)
    kReply = 2,    ///< listener -> connector: here is mine, already ready to receive (RTR)
    kReady = 3,    ///< connector -> listener: mine is RTS; you may send, the caller may accept()
};

/** One QP's half of the connection set-up. */
struct QpInfo {
    uint8_t link = 0;
    uint8_t mtu = 0;  ///< ibv_mtu of the sender's port
    uint32_t qpn = 0;
    uint32_t psn = 0;  ///< first packet sequence number the sender will send
    uint16_t lid = 0;
    ibv_gid gid{};
};
inline constexpr size_t kHandshakeSize = 64;

void encode_handshake(HandshakeType type, const QpInfo &info, uint8_t out[kHandshakeSize]);
/** False, with the reason, unless `in` is a well-formed message of type `expected`. */
bool decode_handshake(const uint8_t in[kHandshakeSize], HandshakeType expected, QpInfo *out, std::string *why);

/** "a.b.c.d:port" or "[v6]:port". */
std::string format_sockaddr(const sockaddr_storage &address);

}  // namespace afmesh::ibverbs
