// SPDX-License-Identifier: Apache-2.0
// The listen-address blob peers exchange (what listen() returns and
// connect() takes), and the socket-address helpers around it. Layout, in
// network byte order:
//
//   offset size field
//        0    4 magic     kAddressMagic
//        4    1 version   kAddressVersion
//        5    1 family    4 or 6
//        6    2 port
//        8    4 scope id  IPv6 link-local scope; zero for IPv4
//       12   16 address   IPv4 uses the first 4 bytes, the rest are zero
#pragma once

#include <sys/socket.h>

#include <cstddef>
#include <cstdint>

#include "failure_reason.h"

namespace afmesh::tcp {

/** The tree's failure reason (common/failure_reason.h), which the decoders fill in. */
using afmesh::Reason;

inline constexpr uint32_t kAddressMagic = 0x41465441;  // "AFTA"
inline constexpr uint8_t kAddressVersion = 1;
inline constexpr size_t kAddressBlobSize = 28;

/** A socket address of either family, with its length. */
struct SocketAddress {
    sockaddr_storage storage{};
    socklen_t length = 0;

    const sockaddr *get() const { return reinterpret_cast<const sockaddr *>(&storage); }
    sockaddr *get() { return reinterpret_cast<sockaddr *>(&storage); }
};

/** Writes the blob for an AF_INET or AF_INET6 address; false for another family. */
bool encode_address(const SocketAddress &address, uint8_t *blob);

/** Parses and checks a blob of `size` bytes; false with the reason for a malformed one. */
bool decode_address(const void *blob, size_t size, SocketAddress *out, Reason *why);

/** Whether the address is 0.0.0.0 or ::, which only the local host can connect to. */
bool is_wildcard(const SocketAddress &address);

/** "192.0.2.1:5000" or "[2001:db8::1]:5000", for messages. */
struct AddressText {
    char text[64];
};
AddressText format_address(const SocketAddress &address);

}  // namespace afmesh::tcp
