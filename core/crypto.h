// SPDX-License-Identifier: Apache-2.0
// The few cryptographic primitives afmesh needs, from OpenSSL's libcrypto:
// random secrets and nonces, HMAC-SHA256, and comparison in constant time.
// Nothing here is hand-written cryptography; this file only adapts the calls.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <span>

#include "status.h"

namespace afmesh::crypto {

inline constexpr size_t kKeyBytes = 32;    // the cluster key: HMAC-SHA256's block-size-safe key length
inline constexpr size_t kMacBytes = 32;    // HMAC-SHA256
inline constexpr size_t kNonceBytes = 16;  // per handshake and side: never repeats in practice

using Key = std::array<uint8_t, kKeyBytes>;
using Mac = std::array<uint8_t, kMacBytes>;
using Nonce = std::array<uint8_t, kNonceBytes>;

/** Fills `out` from the operating system's CSPRNG (through RAND_bytes): ERROR if it has none. */
Status random_bytes(std::span<uint8_t> out);

/** HMAC-SHA256 under `key` of the concatenation of `parts`: ERROR when libcrypto cannot compute it. */
Status hmac(const Key &key, std::initializer_list<std::span<const uint8_t>> parts, Mac *out);

/** Whether two MACs are equal, in time that does not depend on where they differ. */
bool equal(const Mac &a, const Mac &b);

/** "HMAC-SHA256 (OpenSSL 3.0.19 ...)", for `afmesh info`. */
const char *describe();

}  // namespace afmesh::crypto
