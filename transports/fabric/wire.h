// SPDX-License-Identifier: Apache-2.0
// The fabric module's messages. Every two-sided message starts with a
// 16-byte header; connections are emulated over connectionless RDM
// endpoints with a handshake:
//
//   client endpoint C                       listener L
//     HELLO(src=client id, blob=C's addr) ->  L inserts C into its AV, picks the
//                                             endpoint S that serves the
//                                             connection (L itself when the
//                                             endpoint is shared, else a new
//                                             one) and queues it for accept()
//     <- ACCEPT(dst, src=server id, blob=S's addr)   sent from S
//   C inserts S; EV_CONNECTED; from here on C and S talk only to each other
//     DATA(dst, src, payload) <->                 EV_RECV
//     BYE(dst, src)            ->                 EV_CONN_ERROR (peer closed)
//     IMM(dst, src, u32 imm)   ->                 EV_IMM (a zero-byte write)
//
// Peers of another version do not talk, but they say so: a listener answers
// a HELLO of another version with REJECT(dst=client id, src=0), which fails
// the connect at once with both versions named instead of at the handshake
// deadline. So that this works between any two versions, the header layout,
// HELLO (type 1, payload: the client endpoint's address) and REJECT (type 6,
// no payload) never change; the header's version byte is the sender's.
//
// One-sided writes carry no header: the 32-bit immediate travels as remote
// CQ data. Where the provider delivers 8 bytes of it, the high word names
// the target's connection id (the receiver's, as in dst), which attributes
// the write at a shared endpoint and is checked at a connection's own; with
// 4 bytes the target attributes the write to the connection its endpoint
// serves (no sharing). The write's source address is never relied on:
// libfabric 1.17's tcp;ofi_rxm reports 0 for every remote write.
// A zero-byte write touches no memory, so it travels as an IMM message
// instead: libfabric 1.17's shm provider reports no remote CQ data for a
// zero-length fi_writedata.
//
// Header (little-endian): magic u32 | version u8 | type u8 | reserved u16 |
// dst connection id u32 | src connection id u32.
#pragma once

#include <cstddef>
#include <cstdint>

#include "errors.h"

namespace afmesh::fabric {

/** 2: IMM messages (zero-byte writes); REJECT. 3: writes tagged with the target connection. */
inline constexpr uint8_t kWireVersion = 3;
inline constexpr size_t kHeaderSize = 16;
/** Every receive buffer holds one message of this size, header included. */
inline constexpr size_t kMessageBufferSize = 8192;
/** caps.max_send_size: what a DATA message's payload may hold. */
inline constexpr uint32_t kMaxSendSize = kMessageBufferSize - kHeaderSize;

enum class MessageType : uint8_t { kHello = 1, kAccept = 2, kData = 3, kBye = 4, kImm = 5, kReject = 6 };

/** An IMM message's payload: the immediate, little-endian. */
inline constexpr size_t kImmPayloadSize = 4;

/** A write's remote CQ data: the immediate, tagged with the target connection when 8 bytes travel. */
inline uint64_t write_data(uint32_t imm, uint32_t dst_conn, bool tagged) {
    return tagged ? (uint64_t{dst_conn} << 32) | imm : imm;
}
/** The connection id a tagged write's CQ data names. */
inline uint32_t write_target(uint64_t data) { return static_cast<uint32_t>(data >> 32); }

struct Header {
    MessageType type = MessageType::kData;
    uint32_t dst_conn = 0;  // the receiver's connection id (0 in HELLO)
    uint32_t src_conn = 0;  // the sender's connection id (0 in REJECT)
    uint8_t version = kWireVersion;  // decoded: the sender's (another only in HELLO and REJECT)
};

void encode_header(const Header &header, uint8_t *out);

/**
 * Validates a received message: length, magic, version (any for HELLO and
 * REJECT, else this module's), a known type and the ids the type needs.
 * Fills `header` or says why the message is refused.
 */
bool decode_header(const uint8_t *data, size_t len, Header *header, Reason *why);

}  // namespace afmesh::fabric
