// SPDX-License-Identifier: Apache-2.0
// The tree's one byte codec: unsigned integers to and from bytes in a stated
// byte order, whatever the host's, and the bounds-checked message writer and
// reader built on them.
//
// Every wire format has its order, frozen with the format:
//   little-endian  the core's engine and control messages (ByteWriter and
//                  ByteReader), the fabric module's message header and address
//   big-endian     the tcp module's frame header and address, the ibverbs
//                  module's address and handshake
//
// store_*/load_* write and read at a fixed place and check nothing: the
// caller has checked the buffer's size. ByteReader cannot read past its
// buffer: every get reports failure instead, and a failed reader stays
// failed, so a decoder checks ok() once at the end.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace afmesh {
namespace byte_codec_detail {

static_assert(std::endian::native == std::endian::little || std::endian::native == std::endian::big);

constexpr uint8_t swap(uint8_t v) { return v; }
constexpr uint16_t swap(uint16_t v) { return __builtin_bswap16(v); }
constexpr uint32_t swap(uint32_t v) { return __builtin_bswap32(v); }
constexpr uint64_t swap(uint64_t v) { return __builtin_bswap64(v); }

// Through memcpy and a byte swap where the host's order differs: one load or
// store and one instruction, at any alignment.
template <class T>
void store(uint8_t *p, T v, std::endian order) {
    if (order != std::endian::native) v = swap(v);
    memcpy(p, &v, sizeof v);
}
template <class T>
T load(const uint8_t *p, std::endian order) {
    T v;
    memcpy(&v, p, sizeof v);
    return order == std::endian::native ? v : swap(v);
}

}  // namespace byte_codec_detail

inline void store_le16(uint8_t *p, uint16_t v) { byte_codec_detail::store(p, v, std::endian::little); }
inline void store_le32(uint8_t *p, uint32_t v) { byte_codec_detail::store(p, v, std::endian::little); }
inline void store_le64(uint8_t *p, uint64_t v) { byte_codec_detail::store(p, v, std::endian::little); }
inline void store_be16(uint8_t *p, uint16_t v) { byte_codec_detail::store(p, v, std::endian::big); }
inline void store_be32(uint8_t *p, uint32_t v) { byte_codec_detail::store(p, v, std::endian::big); }
inline void store_be64(uint8_t *p, uint64_t v) { byte_codec_detail::store(p, v, std::endian::big); }

inline uint16_t load_le16(const uint8_t *p) { return byte_codec_detail::load<uint16_t>(p, std::endian::little); }
inline uint32_t load_le32(const uint8_t *p) { return byte_codec_detail::load<uint32_t>(p, std::endian::little); }
inline uint64_t load_le64(const uint8_t *p) { return byte_codec_detail::load<uint64_t>(p, std::endian::little); }
inline uint16_t load_be16(const uint8_t *p) { return byte_codec_detail::load<uint16_t>(p, std::endian::big); }
inline uint32_t load_be32(const uint8_t *p) { return byte_codec_detail::load<uint32_t>(p, std::endian::big); }
inline uint64_t load_be64(const uint8_t *p) { return byte_codec_detail::load<uint64_t>(p, std::endian::big); }

namespace byte_codec_detail {

/** The integer fields every writer writes the same way, through Writer::put. */
template <class Writer>
class IntegerWriter {
public:
    void u8(uint8_t v) { writer().put(v); }
    void u16(uint16_t v) { writer().put(v); }
    void u32(uint32_t v) { writer().put(v); }
    void u64(uint64_t v) { writer().put(v); }
    void i32(int32_t v) { u32(static_cast<uint32_t>(v)); }
    void i64(int64_t v) { u64(static_cast<uint64_t>(v)); }

private:
    Writer &writer() { return static_cast<Writer &>(*this); }
};

}  // namespace byte_codec_detail

/** Appends a message to `out`, integers little-endian. */
class ByteWriter : public byte_codec_detail::IntegerWriter<ByteWriter> {
public:
    explicit ByteWriter(std::vector<uint8_t> &out) : out_(out) {}

    /** A length-prefixed (u32) byte string. */
    void bytes(const void *data, size_t len) {
        u32(static_cast<uint32_t>(len));
        raw(data, len);
    }
    void str(std::string_view s) { bytes(s.data(), s.size()); }
    /** Bytes as they are, without a length: the reader knows how many come. */
    void raw(const void *data, size_t len) {
        const auto *p = static_cast<const uint8_t *>(data);
        out_.insert(out_.end(), p, p + len);
    }

private:
    friend IntegerWriter<ByteWriter>;
    template <class T>
    void put(T v) {
        const size_t at = out_.size();
        out_.resize(at + sizeof v);
        byte_codec_detail::store(out_.data() + at, v, std::endian::little);
    }
    std::vector<uint8_t> &out_;
};

/**
 * Writes a message in ByteWriter's layout into `size` bytes the caller has
 * made room for: for the hot path's messages, whose size is known before
 * they are written, without growing a vector field by field. A write that
 * does not fit writes nothing and makes ok() false.
 */
class ByteSpanWriter : public byte_codec_detail::IntegerWriter<ByteSpanWriter> {
public:
    ByteSpanWriter(uint8_t *data, size_t size) : p_(data), end_(data + size) {}

    void raw(const void *data, size_t len) {
        if (!fits(len)) return;
        if (len > 0) memcpy(p_, data, len);
        p_ += len;
    }
    /** Every write fitted and the room is filled exactly. */
    bool done() const { return ok_ && p_ == end_; }

private:
    friend IntegerWriter<ByteSpanWriter>;
    bool fits(size_t len) {
        ok_ = ok_ && static_cast<size_t>(end_ - p_) >= len;
        return ok_;
    }
    template <class T>
    void put(T v) {
        if (!fits(sizeof v)) return;
        byte_codec_detail::store(p_, v, std::endian::little);
        p_ += sizeof v;
    }
    uint8_t *p_;
    uint8_t *const end_;
    bool ok_ = true;
};

/** Reads a message that ByteWriter wrote, never past its end. */
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

    uint8_t u8() { return get<uint8_t>(); }
    uint16_t u16() { return get<uint16_t>(); }
    uint32_t u32() { return get<uint32_t>(); }
    uint64_t u64() { return get<uint64_t>(); }
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
    template <class T>
    T get() {
        if (!ok_ || remaining() < sizeof(T)) return fail<T>();
        const T v = byte_codec_detail::load<T>(p_, std::endian::little);
        p_ += sizeof(T);
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
