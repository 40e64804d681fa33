// SPDX-License-Identifier: Apache-2.0
#include "tcp/wire.h"

#include <cinttypes>

#include "byte_codec.h"

namespace afmesh::tcp {
namespace {

// Field offsets; see the table in wire.h.
constexpr size_t kMagicAt = 0, kVersionAt = 4, kTypeAt = 5, kReserved16At = 6, kImmAt = 8, kReserved32At = 12,
                 kKeyAt = 16, kOffsetAt = 24, kLengthAt = 32;
static_assert(kLengthAt + sizeof(uint64_t) == kFrameHeaderSize);

}  // namespace

void encode_frame_header(const FrameHeader &header, uint8_t *out) {
    store_be32(out + kMagicAt, kFrameMagic);
    out[kVersionAt] = kProtocolVersion;
    out[kTypeAt] = static_cast<uint8_t>(header.type);
    store_be16(out + kReserved16At, 0);
    store_be32(out + kImmAt, header.imm);
    store_be32(out + kReserved32At, 0);
    store_be64(out + kKeyAt, header.key);
    store_be64(out + kOffsetAt, header.offset);
    store_be64(out + kLengthAt, header.length);
}

bool decode_frame_header(const uint8_t *in, FrameHeader *out, Reason *why) {
    if (uint32_t magic = load_be32(in + kMagicAt); magic != kFrameMagic) {
        why->format("bad frame magic 0x%08" PRIx32 " (expected 0x%08" PRIx32
                    "): not an afmesh tcp peer, or the stream lost its framing",
                    magic, kFrameMagic);
        return false;
    }
    if (in[kVersionAt] != kProtocolVersion) {
        why->format("frame of protocol version %u, this module speaks version %u", in[kVersionAt], kProtocolVersion);
        return false;
    }
    if (load_be16(in + kReserved16At) != 0 || load_be32(in + kReserved32At) != 0) {
        why->format("frame header has non-zero reserved fields");
        return false;
    }
    out->imm = load_be32(in + kImmAt);
    out->key = load_be64(in + kKeyAt);
    out->offset = load_be64(in + kOffsetAt);
    out->length = load_be64(in + kLengthAt);
    switch (const uint8_t type = in[kTypeAt]) {
    case static_cast<uint8_t>(FrameType::kWriteImm): out->type = FrameType::kWriteImm; return true;
    case static_cast<uint8_t>(FrameType::kWrite):
        out->type = FrameType::kWrite;
        if (out->imm != 0) {
            why->format("write frame carries an immediate (%" PRIu32 "): only a WRITE_IMM delivers one", out->imm);
            return false;
        }
        return true;
    case static_cast<uint8_t>(FrameType::kSend):
        out->type = FrameType::kSend;
        if (out->imm != 0 || out->key != 0 || out->offset != 0) {
            why->format("send frame carries write fields (imm %" PRIu32 ", key %" PRIu64 ", offset %" PRIu64 ")",
                        out->imm, out->key, out->offset);
            return false;
        }
        if (out->length > kMaxSendSize) {
            why->format("send frame of %" PRIu64 " bytes exceeds the %" PRIu32 "-byte message limit", out->length,
                        kMaxSendSize);
            return false;
        }
        return true;
    default: why->format("unknown frame type %u", type); return false;
    }
}

}  // namespace afmesh::tcp
