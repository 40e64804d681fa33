// SPDX-License-Identifier: Apache-2.0
#include "gid.h"

#include <arpa/inet.h>

#include <cstring>

namespace afmesh::ibverbs {

bool is_ipv4_mapped(const ibv_gid &gid) {
    static constexpr uint8_t kPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    return memcmp(gid.raw, kPrefix, sizeof kPrefix) == 0;
}

GidKind classify_gid(const ibv_gid &gid, uint32_t gid_type) {
    static constexpr uint8_t kZero[16] = {};
    if (memcmp(gid.raw, kZero, sizeof kZero) == 0) return GidKind::kEmpty;
    switch (gid_type) {
    case IBV_GID_TYPE_IB: return GidKind::kIb;
    case IBV_GID_TYPE_ROCE_V1: return GidKind::kRoceV1;
    default: break;
    }
    if (is_ipv4_mapped(gid)) return GidKind::kRoceV2Ipv4;
    if (gid.raw[0] == 0xfe && (gid.raw[1] & 0xc0) == 0x80) return GidKind::kRoceV2LinkLocal;
    return GidKind::kRoceV2Ipv6;
}

// RoCE v2 is UDP/IP and routes across subnets; IPv4 first, as NCCL's default
// NCCL_IB_ADDR_FAMILY=AF_INET, since RoCE fabrics are almost always routed on
// IPv4. v1 works only inside one L2 domain: the last resort.
int gid_preference(GidKind kind) {
    switch (kind) {
    case GidKind::kRoceV2Ipv4: return 4;
    case GidKind::kRoceV2Ipv6: return 3;
    case GidKind::kRoceV2LinkLocal: return 2;
    case GidKind::kRoceV1: return 1;
    case GidKind::kEmpty:
    case GidKind::kIb: return 0;
    }
    return 0;
}

const char *gid_kind_name(GidKind kind) {
    switch (kind) {
    case GidKind::kEmpty: return "empty";
    case GidKind::kIb: return "IB";
    case GidKind::kRoceV1: return "RoCE v1";
    case GidKind::kRoceV2LinkLocal: return "RoCE v2 link-local";
    case GidKind::kRoceV2Ipv6: return "RoCE v2 IPv6";
    case GidKind::kRoceV2Ipv4: return "RoCE v2 IPv4";
    }
    return "?";
}

std::string format_gid(const ibv_gid &gid) {
    char text[INET6_ADDRSTRLEN] = "?";
    inet_ntop(AF_INET6, gid.raw, text, sizeof text);
    return text;
}

}  // namespace afmesh::ibverbs
