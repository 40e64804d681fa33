// SPDX-License-Identifier: Apache-2.0
#include "address.h"

#include <cstring>

#include "byte_codec.h"

namespace afmesh::fabric {
namespace {

constexpr uint32_t kAddressMagic = 0x41464641;  // "AFFA"
constexpr uint8_t kAddressVersion = 1;

}  // namespace

bool encode_address(uint32_t format, const std::vector<uint8_t> &raw, std::vector<uint8_t> *blob) {
    if (raw.empty() || raw.size() > kMaxRawAddress) return false;
    blob->assign(kAddressHeaderSize + raw.size(), 0);
    uint8_t *p = blob->data();
    store_le32(p, kAddressMagic);
    p[4] = kAddressVersion;
    store_le16(p + 6, static_cast<uint16_t>(raw.size()));
    store_le32(p + 8, format);
    memcpy(p + kAddressHeaderSize, raw.data(), raw.size());
    return true;
}

bool decode_address(const void *blob, size_t len, uint32_t expected_format, std::vector<uint8_t> *raw, Reason *why) {
    const auto *p = static_cast<const uint8_t *>(blob);
    if (!p || len < kAddressHeaderSize) {
        why->format("a fabric address has at least %zu bytes, this one %zu", kAddressHeaderSize, len);
        return false;
    }
    if (load_le32(p) != kAddressMagic || p[4] != kAddressVersion) {
        why->format("not a fabric transport address (version 1)");
        return false;
    }
    const size_t raw_len = load_le16(p + 6);
    if (raw_len == 0 || raw_len > kMaxRawAddress || kAddressHeaderSize + raw_len != len) {
        why->format("the address claims %zu raw bytes in a %zu-byte blob", raw_len, len);
        return false;
    }
    const uint32_t format = load_le32(p + 8);
    if (format != expected_format) {
        why->format("the address has libfabric format %u, this context's provider uses %u: set "
                    "AFMESH_FABRIC_PROVIDER alike on every node",
                    format, expected_format);
        return false;
    }
    raw->assign(p + kAddressHeaderSize, p + len);
    return true;
}

}  // namespace afmesh::fabric
