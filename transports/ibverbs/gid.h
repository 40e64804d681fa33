// SPDX-License-Identifier: Apache-2.0
// GIDs as the module reasons about them: classification for RoCE GID
// selection and printing for describe() and errors.
#pragma once

#include <infiniband/verbs.h>

#include <string>

namespace afmesh::ibverbs {

/** What a GID table entry is, from the verbs GID type and the address it holds. */
enum class GidKind {
    kEmpty,          ///< all zero: an unused table slot
    kIb,             ///< an InfiniBand port's GID
    kRoceV1,         ///< RoCE v1 (Ethernet frames, not routable)
    kRoceV2LinkLocal,///< RoCE v2, fe80::/10: routable only on the local link and needs a scope
    kRoceV2Ipv6,     ///< RoCE v2, a global IPv6 address
    kRoceV2Ipv4,     ///< RoCE v2, an IPv4-mapped address: what RoCE fabrics are usually routed on
};

GidKind classify_gid(const ibv_gid &gid, uint32_t gid_type);

/** Preference among RoCE GIDs: higher is better, 0 is unusable. */
int gid_preference(GidKind kind);

const char *gid_kind_name(GidKind kind);

/** The GID as an IPv6 literal (IPv4-mapped ones print as ::ffff:a.b.c.d). */
std::string format_gid(const ibv_gid &gid);

bool is_ipv4_mapped(const ibv_gid &gid);

}  // namespace afmesh::ibverbs
