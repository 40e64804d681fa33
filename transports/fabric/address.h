// SPDX-License-Identifier: Apache-2.0
// The address blob listen() hands out and connect() takes: the endpoint's
// raw libfabric address (fi_getname) behind a small header naming the
// address format, so a blob from another provider is refused with a reason
// instead of being fed to fi_av_insert.
//
// Layout (little-endian): magic u32 | version u8 | reserved u8 |
// raw length u16 | fi addr_format u32 | raw address bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "errors.h"

namespace afmesh::fabric {

inline constexpr size_t kAddressHeaderSize = 12;
/** Largest raw provider address carried (FI_NAME_MAX-sized names fit with room to spare). */
inline constexpr size_t kMaxRawAddress = 244;
inline constexpr size_t kMaxAddressBlob = kAddressHeaderSize + kMaxRawAddress;

/** Wraps a raw address of `format` into a blob; false when it is too long. */
bool encode_address(uint32_t format, const std::vector<uint8_t> &raw, std::vector<uint8_t> *blob);

/**
 * Checks a blob from a peer and extracts its raw address. Refuses a wrong
 * magic or version, an inconsistent length, and a format other than
 * `expected_format`, saying why in `why`.
 */
bool decode_address(const void *blob, size_t len, uint32_t expected_format, std::vector<uint8_t> *raw, Reason *why);

}  // namespace afmesh::fabric
