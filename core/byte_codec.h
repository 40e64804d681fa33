// SPDX-License-Identifier: Apache-2.0
// Little-endian encoding of wire messages, with a reader that cannot read
// past its buffer: every get reports failure instead, and a failed reader
// stays failed, so a decoder checks ok() once at the end.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace afmesh {

class ByteWriter {
public:
    explicit ByteWriter(std::vector<uint8_t> &out) : out_(out) {}

    void u8(uint8_t v) { put(v, 1); }
    void u16(uint16_t v) { put(v, 2); }
    void u32(uint32_t v) { put(v, 4); }
    void u64(uint64_t v) { put(v, 8); }
    void i32(int32_t v) { u32(static_cast<uint32_t>(v)); }
    void i64(int64_t v) { u64(static_cast<uint64_t>(v)); }
    /** A length-prefixed (u32) byte string. */
    void bytes(const void *data, size_t len) {
        u32(static_cast<uint32_t>(len));
        const auto *p = static_cast<const uint8_t *>(data);
        out_.insert(out_.end(), p, p + len);
    }
    void str(std::string_view s) { bytes(s.data(), s.size()); }
    /** Bytes as they are, without a length: the reader knows how many come. */
    void raw(const void *data, size_t len) {
        const auto *p = static_cast<const uint8_t *>(data);
        out_.insert(out_.end(), p, p + len);
    }

private:
    void put(uint64_t v, int n) {
        uint8_t bytes[8];
        for (int i = 0; i < n; ++i) bytes[i] = static_cast<uint8_t>(v >> (8 * i));
        out_.insert(out_.end(), bytes, bytes + n);
    }
    std::vector<uint8_t> &out_;
};

class ByteReader {
public:
    ByteReader(const void *data, size_t len) : p_(static_cast<const uint8_t *>(data)), end_(p_ + len) {}

    bool ok() const { return ok_; }
    /** True when every byte was consumed and nothing failed. */
    bool done() const { return ok_ && p_ == end_; }
    size_t remaining() const { return static_cast<size_t>(end_ - p_); }
    /** The next unread byte: for bytes a decoder leaves in place, remaining() of them. */
    const uint8_t *here() const { return p_; }
    /** Marks the reader failed (e.g. the message type was not the expected one). */
    void invalidate() { fail<int>(); }

    uint8_t u8() { return static_cast<uint8_t>(get(1)); }
    uint16_t u16() { return static_cast<uint16_t>(get(2)); }
    uint32_t u32() { return static_cast<uint32_t>(get(4)); }
    uint64_t u64() { return get(8); }
    int32_t i32() { return static_cast<int32_t>(u32()); }
    int64_t i64() { return static_cast<int64_t>(u64()); }
    /** A length-prefixed byte string of at most `max_len` bytes. */
    std::vector<uint8_t> bytes(size_t max_len) {
        uint32_t len = u32();
        if (!ok_ || len > max_len || len > remaining()) return fail<std::vector<uint8_t>>();
        std::vector<uint8_t> v(p_, p_ + len);
        p_ += len;
        return v;
    }
    std::string str(size_t max_len) {
        std::vector<uint8_t> v = bytes(max_len);
        return std::string(v.begin(), v.end());
    }
    /** Exactly `len` bytes without a length (ByteWriter::raw); zeros and failure when fewer are left. */
    void raw(void *out, size_t len) {
        if (!ok_ || remaining() < len) {
            memset(out, 0, len);
            fail<int>();
            return;
        }
        memcpy(out, p_, len);
        p_ += len;
    }

private:
    uint64_t get(int n) {
        if (!ok_ || remaining() < static_cast<size_t>(n)) return fail<uint64_t>();
        uint64_t v = 0;
        for (int i = 0; i < n; ++i) v |= static_cast<uint64_t>(p_[i]) << (8 * i);
        p_ += n;
        return v;
    }
    template <class T>
    T fail() {
        ok_ = false;
        p_ = end_;
        return T{};
    }

    const uint8_t *p_;
    const uint8_t *end_;
    bool ok_ = true;
};

}  // namespace afmesh
