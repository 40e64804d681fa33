// SPDX-License-Identifier: Apache-2.0
#include "address.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "byte_codec.h"

namespace afmesh::tcp {
namespace {

constexpr size_t kMagicAt = 0, kVersionAt = 4, kFamilyAt = 5, kPortAt = 6, kScopeAt = 8, kAddrAt = 12;
static_assert(kAddrAt + 16 == kAddressBlobSize);

}  // namespace

bool encode_address(const SocketAddress &address, uint8_t *blob) {
    memset(blob, 0, kAddressBlobSize);
    store_be32(blob + kMagicAt, kAddressMagic);
    blob[kVersionAt] = kAddressVersion;
    if (address.storage.ss_family == AF_INET) {
        const auto *in = reinterpret_cast<const sockaddr_in *>(&address.storage);
        blob[kFamilyAt] = 4;
        memcpy(blob + kPortAt, &in->sin_port, sizeof in->sin_port);  // already network order
        memcpy(blob + kAddrAt, &in->sin_addr, sizeof in->sin_addr);
        return true;
    }
    if (address.storage.ss_family == AF_INET6) {
        const auto *in6 = reinterpret_cast<const sockaddr_in6 *>(&address.storage);
        blob[kFamilyAt] = 6;
        memcpy(blob + kPortAt, &in6->sin6_port, sizeof in6->sin6_port);
        store_be32(blob + kScopeAt, in6->sin6_scope_id);
        memcpy(blob + kAddrAt, &in6->sin6_addr, sizeof in6->sin6_addr);
        return true;
    }
    return false;
}

bool decode_address(const void *blob_ptr, size_t size, SocketAddress *out, Reason *why) {
    const auto *blob = static_cast<const uint8_t *>(blob_ptr);
    if (!blob || size != kAddressBlobSize) {
        why->format("a tcp address is %zu bytes, got %zu", kAddressBlobSize, blob ? size : 0);
        return false;
    }
    const uint32_t magic = load_be32(blob + kMagicAt), scope = load_be32(blob + kScopeAt);
    uint16_t port;
    memcpy(&port, blob + kPortAt, sizeof port);  // stays in network order
    if (magic != kAddressMagic) {
        why->format("not a tcp transport address (magic 0x%08" PRIx32 ")", magic);
        return false;
    }
    if (blob[kVersionAt] != kAddressVersion) {
        why->format("tcp address of version %u, this module reads version %u", blob[kVersionAt], kAddressVersion);
        return false;
    }
    if (port == 0) {
        why->format("tcp address with port 0");
        return false;
    }
    *out = SocketAddress{};
    if (blob[kFamilyAt] == 4) {
        static constexpr uint8_t kZero[12] = {};
        if (scope != 0 || memcmp(blob + kAddrAt + 4, kZero, sizeof kZero) != 0) {
            why->format("IPv4 tcp address with non-zero padding");
            return false;
        }
        auto *in = reinterpret_cast<sockaddr_in *>(&out->storage);
        in->sin_family = AF_INET;
        in->sin_port = port;
        memcpy(&in->sin_addr, blob + kAddrAt, sizeof in->sin_addr);
        out->length = sizeof *in;
        return true;
    }
    if (blob[kFamilyAt] == 6) {
        auto *in6 = reinterpret_cast<sockaddr_in6 *>(&out->storage);
        in6->sin6_family = AF_INET6;
        in6->sin6_port = port;
        in6->sin6_scope_id = scope;
        memcpy(&in6->sin6_addr, blob + kAddrAt, sizeof in6->sin6_addr);
        out->length = sizeof *in6;
        return true;
    }
    why->format("tcp address of unknown family %u", blob[kFamilyAt]);
    return false;
}

bool is_wildcard(const SocketAddress &address) {
    if (address.storage.ss_family == AF_INET)
        return reinterpret_cast<const sockaddr_in *>(&address.storage)->sin_addr.s_addr == htonl(INADDR_ANY);
    if (address.storage.ss_family == AF_INET6)
        return IN6_IS_ADDR_UNSPECIFIED(&reinterpret_cast<const sockaddr_in6 *>(&address.storage)->sin6_addr);
    return false;
}

AddressText format_address(const SocketAddress &address) {
    AddressText out{};
    char host[INET6_ADDRSTRLEN] = "?";
    if (address.storage.ss_family == AF_INET) {
        const auto *in = reinterpret_cast<const sockaddr_in *>(&address.storage);
        inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
        snprintf(out.text, sizeof out.text, "%s:%u", host, ntohs(in->sin_port));
    } else if (address.storage.ss_family == AF_INET6) {
        const auto *in6 = reinterpret_cast<const sockaddr_in6 *>(&address.storage);
        inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
        snprintf(out.text, sizeof out.text, "[%s]:%u", host, ntohs(in6->sin6_port));
    } else {
        snprintf(out.text, sizeof out.text, "(family %d)", address.storage.ss_family);
    }
    return out;
}

}  // namespace afmesh::tcp
