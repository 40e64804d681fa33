// SPDX-License-Identifier: Apache-2.0
// Field reading for control-protocol payloads, on top of the core's
// bounds-checked byte codec (byte_codec.h: little-endian integers, u32
// length-prefixed strings; payloads are written with its ByteWriter).
// This layer adds what a network-facing decoder needs: the first failure
// names the message and field that did not fit, list counts are checked
// against the bytes left before anyone reserves memory for them, and
// finish() refuses trailing bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "byte_codec.h"
#include "status.h"

namespace afmesh::control {

class WireReader {
public:
    /** `what` names the message in errors, e.g. "HELLO". */
    WireReader(std::span<const uint8_t> in, const char *what) : in_(in.data(), in.size()), what_(what) {}

    uint8_t u8(const char *field) { return check(in_.u8(), field); }
    uint16_t u16(const char *field) { return check(in_.u16(), field); }
    uint32_t u32(const char *field) { return check(in_.u32(), field); }
    uint64_t u64(const char *field) { return check(in_.u64(), field); }
    int32_t i32(const char *field) { return check(in_.i32(), field); }
    /** A length-prefixed byte string of at most `max_bytes`. */
    std::vector<uint8_t> bytes(const char *field, size_t max_bytes);
    std::string str(const char *field, size_t max_bytes);
    /** Exactly out.size() bytes, without a length prefix. */
    void raw(const char *field, std::span<uint8_t> out) {
        in_.raw(out.data(), out.size());
        check(0, field);
    }
    /**
     * A u32 element count for a list whose elements take at least
     * `min_element_bytes` each; a count the remaining bytes cannot hold fails
     * here, so callers may reserve() it without trusting the sender.
     */
    uint32_t count(const char *field, size_t min_element_bytes);
    /** Fails the read with a reason found by the caller (e.g. an enum out of range). */
    void fail(const char *field, const std::string &reason);

    bool ok() const { return error_.empty(); }
    /** OK when every read fit and nothing is left over; otherwise INVALID_ARGUMENT naming the field. */
    Status finish() const;

private:
    template <class T>
    T check(T value, const char *field) {
        if (!in_.ok()) fail(field, "is truncated");
        return value;
    }

    ByteReader in_;
    const char *what_;
    std::string error_;
};

}  // namespace afmesh::control
