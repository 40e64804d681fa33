// SPDX-License-Identifier: Apache-2.0
#include "control/messages.h"

#include <algorithm>
#include <cstring>

#include "control/wire_codec.h"

namespace afmesh::control {
namespace {

std::string_view clip(const std::string &text, size_t max_bytes) {
    return std::string_view(text).substr(0, max_bytes);
}

Role read_node_role(WireReader &in, const char *field) {
    uint8_t raw = in.u8(field);
    if (in.ok() && raw != static_cast<uint8_t>(Role::kWorker) && raw != static_cast<uint8_t>(Role::kServer)) {
        in.fail(field, "is " + std::to_string(raw) + ", not a worker (1) or server (2)");
    }
    return static_cast<Role>(raw);
}

BarrierGroup read_group(WireReader &in) {
    uint8_t raw = in.u8("group");
    if (in.ok() && (raw < static_cast<uint8_t>(BarrierGroup::kWorkers) || raw > static_cast<uint8_t>(BarrierGroup::kAll))) {
        in.fail("group", "is " + std::to_string(raw) + ", not 1..3");
    }
    return static_cast<BarrierGroup>(raw);
}

void write_status(ByteWriter &out, const Status &s) {
    out.i32(static_cast<int32_t>(s.code()));
    out.str(clip(s.message(), kMaxTextBytes));
}

Status read_status(WireReader &in) {
    auto code = static_cast<Code>(in.i32("code"));
    std::string message = in.str("message", kMaxTextBytes);
    // code_name() knows every code; anything else came from a confused or hostile peer.
    if (in.ok() && strcmp(code_name(code), "UNKNOWN") == 0) {
        in.fail("code", "is " + std::to_string(static_cast<int>(code)) + ", not a known status code");
    }
    return {code, std::move(message)};
}

void write_entry(ByteWriter &out, const RosterEntry &e) {
    out.u8(static_cast<uint8_t>(e.role));
    out.i32(e.rank);
    out.str(e.host);
    out.str(e.transport);
    out.bytes(e.address.data(), e.address.size());
    out.str(e.device);
    out.u64(e.incarnation);
}

// role u8 + rank i32 + four empty length-prefixed fields + incarnation u64
constexpr size_t kMinEntryBytes = 1 + 4 + 4 * 4 + 8;

RosterEntry read_entry(WireReader &in) {
    RosterEntry e;
    e.role = read_node_role(in, "entry role");
    e.rank = in.i32("entry rank");
    e.host = in.str("entry host", kMaxNameBytes);
    e.transport = in.str("entry transport", kMaxNameBytes);
    e.address = in.bytes("entry address", kMaxAddressBytes);
    e.device = in.str("entry device", kMaxNameBytes);
    e.incarnation = in.u64("entry incarnation");
    if (in.ok() && e.incarnation == 0) in.fail("entry incarnation", "is 0, which no scheduler issues");
    return e;
}

void read_entries(WireReader &in, Role role, const char *field, std::vector<RosterEntry> *out) {
    uint32_t n = in.count(field, kMinEntryBytes);
    out->reserve(n);
    for (uint32_t i = 0; i < n && in.ok(); ++i) {
        RosterEntry e = read_entry(in);
        // The roster is indexed by rank: anything else would misroute data.
        if (in.ok() && (e.role != role || e.rank != static_cast<int32_t>(i))) {
            in.fail(field, std::string("entry ") + std::to_string(i) + " is " + role_name(e.role) + " rank " +
                               std::to_string(e.rank));
        }
        out->push_back(std::move(e));
    }
}

bool read_flag(WireReader &in, const char *field) {
    uint8_t flag = in.u8(field);
    if (in.ok() && flag > 1) in.fail(field, "is " + std::to_string(flag) + ", not 0 or 1");
    return flag == 1;
}

void write_hello(ByteWriter &out, const HelloMsg &m) {
    out.u8(static_cast<uint8_t>(m.hello.role));
    out.i32(m.hello.requested_rank);
    out.i32(m.num_workers);
    out.i32(m.num_servers);
    out.u32(m.heartbeat_interval_ms);
    out.u32(m.heartbeat_timeout_ms);
    out.str(m.auth_token);
    out.str(m.hello.transport);
    out.bytes(m.hello.address.data(), m.hello.address.size());
    out.str(m.hello.device);
}

void read_hello(WireReader &in, HelloMsg *out) {
    out->hello.role = read_node_role(in, "role");
    out->hello.requested_rank = in.i32("requested_rank");
    out->num_workers = in.i32("num_workers");
    out->num_servers = in.i32("num_servers");
    out->heartbeat_interval_ms = in.u32("heartbeat_interval_ms");
    out->heartbeat_timeout_ms = in.u32("heartbeat_timeout_ms");
    out->auth_token = in.str("auth_token", kMaxTokenBytes);
    out->hello.transport = in.str("transport", kMaxNameBytes);
    out->hello.address = in.bytes("address", kMaxAddressBytes);
    out->hello.device = in.str("device", kMaxNameBytes);
}

template <class Message>
Status decode_empty(std::span<const uint8_t> payload) {
    return WireReader(payload, message_type_name(Message::kType)).finish();
}

}  // namespace

std::vector<uint8_t> encode(const HelloMsg &m) {
    std::vector<uint8_t> payload;
    ByteWriter out(payload);
    write_hello(out, m);
    return payload;
}

Status decode(std::span<const uint8_t> payload, HelloMsg *out) {
    WireReader in(payload, "HELLO");
    read_hello(in, out);
    return in.finish();
}

std::vector<uint8_t> encode(const ProgressMsg &m) {
    std::vector<uint8_t> payload;
    ByteWriter out(payload);
    out.u8(static_cast<uint8_t>(m.phase));
    out.u32(m.workers_missing);
    out.u32(m.servers_missing);
    out.str(clip(m.detail, kMaxTextBytes));
    return payload;
}

Status decode(std::span<const uint8_t> payload, ProgressMsg *out) {
    WireReader in(payload, "PROGRESS");
    uint8_t phase = in.u8("phase");
    if (in.ok() && phase != static_cast<uint8_t>(ProgressPhase::kJoin) &&
        phase != static_cast<uint8_t>(ProgressPhase::kStop)) {
        in.fail("phase", "is " + std::to_string(phase) + ", not join (1) or stop (2)");
    }
    out->phase = static_cast<ProgressPhase>(phase);
    out->workers_missing = in.u32("workers_missing");
    out->servers_missing = in.u32("servers_missing");
    out->detail = in.str("detail", kMaxTextBytes);
    return in.finish();
}

std::vector<uint8_t> encode(const RosterMsg &m) {
    std::vector<uint8_t> payload;
    ByteWriter out(payload);
    out.i32(m.your_rank);
    out.u8(m.replacement ? 1 : 0);
    for (uint64_t seq : m.barriers_done) out.u64(seq);
    out.u32(static_cast<uint32_t>(m.down.size()));
    for (const NodeId &node : m.down) {
        out.u8(static_cast<uint8_t>(node.role));
        out.i32(node.rank);
    }
    out.raw(m.roster.cluster_key.data(), m.roster.cluster_key.size());
    out.u32(static_cast<uint32_t>(m.roster.workers.size()));
    for (const RosterEntry &e : m.roster.workers) write_entry(out, e);
    out.u32(static_cast<uint32_t>(m.roster.servers.size()));
    for (const RosterEntry &e : m.roster.servers) write_entry(out, e);
    return payload;
}

std::vector<uint8_t> with_your_rank(const std::vector<uint8_t> &roster_payload, int32_t your_rank) {
    std::vector<uint8_t> rank_bytes;
    ByteWriter(rank_bytes).i32(your_rank);  // your_rank is the first field of the encoding above
    std::vector<uint8_t> out = roster_payload;
    std::copy(rank_bytes.begin(), rank_bytes.end(), out.begin());
    return out;
}

Status decode(std::span<const uint8_t> payload, RosterMsg *out) {
    WireReader in(payload, "ROSTER");
    out->your_rank = in.i32("your_rank");
    out->replacement = read_flag(in, "replacement");
    for (uint64_t &seq : out->barriers_done) seq = in.u64("barriers_done");
    const uint32_t down = in.count("down", 1 + 4);
    for (uint32_t i = 0; i < down && in.ok(); ++i) {
        const Role role = read_node_role(in, "down role");
        out->down.push_back({role, in.i32("down rank")});
    }
    in.raw("cluster_key", out->roster.cluster_key);
    read_entries(in, Role::kWorker, "workers", &out->roster.workers);
    read_entries(in, Role::kServer, "servers", &out->roster.servers);
    // Every node named down is one of the roster's.
    for (const NodeId &node : out->down) {
        const size_t n = node.role == Role::kWorker ? out->roster.workers.size() : out->roster.servers.size();
        if (in.ok() && (node.rank < 0 || static_cast<size_t>(node.rank) >= n))
            in.fail("down", node_name(node) + " is not in the roster");
    }
    return in.finish();
}

std::vector<uint8_t> encode(const ErrorMsg &m) {
    std::vector<uint8_t> payload;
    ByteWriter out(payload);
    write_status(out, m.status);
    return payload;
}

Status decode(std::span<const uint8_t> payload, ErrorMsg *out) {
    WireReader in(payload, "ERROR");
    out->status = read_status(in);
    return in.finish();
}

std::vector<uint8_t> encode(const BarrierMsg &m) {
    std::vector<uint8_t> payload;
    ByteWriter out(payload);
    out.u8(static_cast<uint8_t>(m.group));
    out.u64(m.seq);
    return payload;
}

Status decode(std::span<const uint8_t> payload, BarrierMsg *out) {
    WireReader in(payload, "BARRIER");
    out->group = read_group(in);
    out->seq = in.u64("seq");
    return in.finish();
}

std::vector<uint8_t> encode(const BarrierDoneMsg &m) {
    std::vector<uint8_t> payload;
    ByteWriter out(payload);
    out.u8(static_cast<uint8_t>(m.group));
    out.u64(m.seq);
    write_status(out, m.status);
    return payload;
}

Status decode(std::span<const uint8_t> payload, BarrierDoneMsg *out) {
    WireReader in(payload, "BARRIER_DONE");
    out->group = read_group(in);
    out->seq = in.u64("seq");
    out->status = read_status(in);
    return in.finish();
}

std::vector<uint8_t> encode(const HeartbeatMsg &) { return {}; }
Status decode(std::span<const uint8_t> payload, HeartbeatMsg *) { return decode_empty<HeartbeatMsg>(payload); }

std::vector<uint8_t> encode(const PeerDownMsg &m) {
    std::vector<uint8_t> payload;
    ByteWriter out(payload);
    out.u8(static_cast<uint8_t>(m.role));
    out.i32(m.rank);
    out.str(clip(m.reason, kMaxTextBytes));
    return payload;
}

Status decode(std::span<const uint8_t> payload, PeerDownMsg *out) {
    WireReader in(payload, "PEER_DOWN");
    out->role = read_node_role(in, "role");
    out->rank = in.i32("rank");
    out->reason = in.str("reason", kMaxTextBytes);
    return in.finish();
}

std::vector<uint8_t> encode(const PeerUpMsg &m) {
    std::vector<uint8_t> payload;
    ByteWriter out(payload);
    write_entry(out, m.entry);
    return payload;
}

Status decode(std::span<const uint8_t> payload, PeerUpMsg *out) {
    WireReader in(payload, "PEER_UP");
    out->entry = read_entry(in);
    return in.finish();
}

std::vector<uint8_t> encode(const PeerUpAckMsg &m) {
    std::vector<uint8_t> payload;
    ByteWriter out(payload);
    out.u8(static_cast<uint8_t>(m.role));
    out.i32(m.rank);
    out.u64(m.incarnation);
    return payload;
}

Status decode(std::span<const uint8_t> payload, PeerUpAckMsg *out) {
    WireReader in(payload, "PEER_UP_ACK");
    out->role = read_node_role(in, "role");
    out->rank = in.i32("rank");
    out->incarnation = in.u64("incarnation");
    return in.finish();
}

std::vector<uint8_t> encode(const RejoinMsg &m) {
    std::vector<uint8_t> payload;
    ByteWriter out(payload);
    write_hello(out, m.hello);
    out.u64(m.incarnation);
    out.raw(m.cluster_key.data(), m.cluster_key.size());
    for (uint64_t seq : m.barriers_entered) out.u64(seq);
    return payload;
}

Status decode(std::span<const uint8_t> payload, RejoinMsg *out) {
    WireReader in(payload, "REJOIN");
    read_hello(in, &out->hello);
    if (in.ok() && out->hello.hello.requested_rank < 0)
        in.fail("requested_rank", "is " + std::to_string(out->hello.hello.requested_rank) + ": a rejoining node has a rank");
    out->incarnation = in.u64("incarnation");
    if (in.ok() && out->incarnation == 0) in.fail("incarnation", "is 0, which no scheduler issues");
    in.raw("cluster_key", out->cluster_key);
    for (uint64_t &seq : out->barriers_entered) seq = in.u64("barriers_entered");
    return in.finish();
}

std::vector<uint8_t> encode(const StopMsg &) { return {}; }
Status decode(std::span<const uint8_t> payload, StopMsg *) { return decode_empty<StopMsg>(payload); }

std::vector<uint8_t> encode(const StopDoneMsg &m) {
    std::vector<uint8_t> payload;
    ByteWriter out(payload);
    write_status(out, m.status);
    return payload;
}

Status decode(std::span<const uint8_t> payload, StopDoneMsg *out) {
    WireReader in(payload, "STOP_DONE");
    out->status = read_status(in);
    return in.finish();
}

Status check_hello(const HelloMsg &m) {
    auto too_long = [](const char *field, size_t bytes, size_t limit) {
        return Status(Code::kInvalidArgument, std::string(field) + " is " + std::to_string(bytes) +
                                                  " bytes, above the control protocol's limit of " +
                                                  std::to_string(limit));
    };
    if (m.hello.transport.size() > kMaxNameBytes) return too_long("transport name", m.hello.transport.size(), kMaxNameBytes);
    if (m.hello.device.size() > kMaxNameBytes) return too_long("device name", m.hello.device.size(), kMaxNameBytes);
    if (m.hello.address.size() > kMaxAddressBytes) return too_long("address blob", m.hello.address.size(), kMaxAddressBytes);
    if (m.auth_token.size() > kMaxTokenBytes) return too_long("auth token", m.auth_token.size(), kMaxTokenBytes);
    return Status::ok();
}

bool group_contains(BarrierGroup group, Role role) {
    switch (group) {
    case BarrierGroup::kWorkers: return role == Role::kWorker;
    case BarrierGroup::kServers: return role == Role::kServer;
    case BarrierGroup::kAll: return role == Role::kWorker || role == Role::kServer;
    }
    return false;
}

const char *group_name(BarrierGroup group) {
    switch (group) {
    case BarrierGroup::kWorkers: return "workers";
    case BarrierGroup::kServers: return "servers";
    case BarrierGroup::kAll: return "all";
    }
    return "unknown";
}

}  // namespace afmesh::control
