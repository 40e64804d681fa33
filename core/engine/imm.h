// SPDX-License-Identifier: Apache-2.0
// The 32-bit immediate that accompanies every write. Completion is counted
// per (connection, slot): writes may land in any order, so nothing here
// relies on ordering between writes. Each transport carries it in its own
// wire format (tcp and ibverbs big-endian, fabric as remote CQ data or
// little-endian in its own messages) and hands it back in host order.
//
//   bit 31      direction (push or response)
//   bit 30      0: a tensor write of the op in `slot`, of this generation
//               1: a carrier: the write put a REQUEST or RESPONSE into the
//                  receiver's mailbox entry `entry` (mailbox.h); the message
//                  names its op, and the carrier is not among the writes it
//                  counts
//   bits 29..16 generation (14 bits; zero in a carrier)
//   bits 15..0  slot, or a carrier's mailbox entry
#pragma once

#include <cstdint>

namespace afmesh::imm {

enum class Direction : uint32_t { kPush = 0, kResponse = 1 };

constexpr uint32_t kCarrierBit = uint32_t{1} << 30;
constexpr uint32_t kGenerationMask = 0x3fff;

constexpr uint32_t encode(Direction d, uint16_t slot, uint16_t generation) {
    return (static_cast<uint32_t>(d) << 31) | ((generation & kGenerationMask) << 16) | slot;
}
constexpr uint32_t encode_carrier(Direction d, uint16_t entry) {
    return (static_cast<uint32_t>(d) << 31) | kCarrierBit | entry;
}
constexpr Direction direction(uint32_t imm) { return static_cast<Direction>(imm >> 31); }
constexpr bool is_carrier(uint32_t imm) { return (imm & kCarrierBit) != 0; }
constexpr uint16_t generation(uint32_t imm) { return static_cast<uint16_t>((imm >> 16) & kGenerationMask); }
constexpr uint16_t slot(uint32_t imm) { return static_cast<uint16_t>(imm & 0xffff); }
constexpr uint16_t entry(uint32_t imm) { return slot(imm); }

}  // namespace afmesh::imm
