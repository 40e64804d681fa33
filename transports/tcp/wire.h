// SPDX-License-Identifier: Apache-2.0
// The tcp transport's wire format. Every operation travels on the
// connection's byte stream as one or more frames, each a fixed-size header
// followed by its payload. All header fields are in network byte order:
//
//   offset size field
//        0    4 magic     kFrameMagic
//        4    1 version   kProtocolVersion
//        5    1 type      FrameType
//        6    2 reserved  zero
//        8    4 imm       WRITE_IMM: the immediate; WRITE, SEND: zero
//       12    4 reserved  zero
//       16    8 key       WRITE_IMM, WRITE: the destination region id; SEND: zero
//       24    8 offset    WRITE_IMM, WRITE: byte offset in that region; SEND: zero
//       32    8 length    payload bytes that follow the header
//
// A WRITE places its payload exactly as a WRITE_IMM does, under the same
// bounds checks, and reports nothing. write_imm_v sends its segments as
// WRITE frames followed by one WRITE_IMM for the last: the stream keeps
// them in order, so every segment has landed when the immediate is
// delivered, and a refused segment fails the connection before it is.
//
// Every field is checked on arrival; reserved fields must be zero so a later
// protocol revision can give them a meaning without being misread.
#pragma once

#include <cstddef>
#include <cstdint>

#include "failure_reason.h"

namespace afmesh::tcp {

/** The tree's failure reason (common/failure_reason.h), which the decoders fill in. */
using afmesh::Reason;

inline constexpr uint32_t kFrameMagic = 0x41464d54;  // "AFMT"
/** 2: the WRITE frame (write_imm_v). A peer of another version is refused at its first frame. */
inline constexpr uint8_t kProtocolVersion = 2;
inline constexpr size_t kFrameHeaderSize = 40;

/** Largest two-sided message; the receiver holds one whole message per connection. */
inline constexpr uint32_t kMaxSendSize = 64 * 1024;
/**
 * caps.eager_send_size. A message costs the receiver one copy out of its
 * message buffer that a write, read straight into the registered region,
 * does not; below this size the one frame saved is worth more. Measured
 * on loopback (afmesh bench, AFMESH_EAGER_BYTES 0 against 60000, p50):
 * eager 0.64-0.9x of writes at 6-8 KiB, even at 12 KiB, 1.1x at 16 KiB.
 */
inline constexpr uint32_t kEagerSendSize = 12 * 1024;

enum class FrameType : uint8_t {
    kWriteImm = 1,  // payload lands in a registered region, then EV_IMM
    kSend = 2,      // payload is a message delivered as EV_RECV
    kWrite = 3,     // payload lands in a registered region; the next WRITE_IMM announces it
};

/** A header's meaningful fields, in host byte order. */
struct FrameHeader {
    FrameType type = FrameType::kWriteImm;
    uint32_t imm = 0;
    uint64_t key = 0;
    uint64_t offset = 0;
    uint64_t length = 0;
};

/** Writes `header` as kFrameHeaderSize bytes at `out`. */
void encode_frame_header(const FrameHeader &header, uint8_t *out);

/**
 * Reads kFrameHeaderSize bytes at `in` into `*out`, checking every rule the
 * wire format states (magic, version, type, reserved fields, WRITE and SEND
 * field use, SEND size). Region bounds are the receiver's to check. On a
 * violation, returns false and says why in `*why`.
 */
bool decode_frame_header(const uint8_t *in, FrameHeader *out, Reason *why);

}  // namespace afmesh::tcp
