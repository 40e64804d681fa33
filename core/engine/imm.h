// The 32-bit immediate that accompanies every tensor write. Completion is
// counted per (connection, slot): writes may land in any order, so nothing
// here relies on ordering between writes. Transports carry it in network
// byte order on the wire and hand it back in host order.
#pragma once

#include <cstdint>

namespace afmesh::imm {

/** bit 31: direction; bits 30..16: generation (15 bits); bits 15..0: slot. */
enum class Direction : uint32_t { kPush = 0, kResponse = 1 };

constexpr uint32_t kGenerationMask = 0x7fff;

constexpr uint32_t encode(Direction d, uint16_t slot, uint16_t generation) {
    return (static_cast<uint32_t>(d) << 31) | ((generation & kGenerationMask) << 16) | slot;
}
constexpr Direction direction(uint32_t imm) { return static_cast<Direction>(imm >> 31); }
constexpr uint16_t generation(uint32_t imm) { return static_cast<uint16_t>((imm >> 16) & kGenerationMask); }
constexpr uint16_t slot(uint32_t imm) { return static_cast<uint16_t>(imm & 0xffff); }

}  // namespace afmesh::imm
