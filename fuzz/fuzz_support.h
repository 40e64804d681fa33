// SPDX-License-Identifier: Apache-2.0
// What every fuzz target shares: how a broken property is reported, how one
// input selects among several decoders, and the round-trip comparison.
//
// A decoder that returns "malformed" is fine; a decoder that accepts bytes
// whose re-encoding says something else is a logic bug (a field dropped,
// truncated or misread), which memory checking alone never finds. So every
// target re-encodes what it decoded and compares.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <span>

namespace afmesh::fuzz {

/**
 * Reports a broken property and aborts: libFuzzer treats the abort as a
 * crash and saves the input that caused it.
 */
[[noreturn]] inline void fail(const char *what, const char *detail = nullptr) {
    fprintf(stderr, "afmesh fuzz: property violated: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    abort();
}

inline void check(bool ok, const char *what, const char *detail = nullptr) {
    if (!ok) fail(what, detail);
}

/**
 * An input whose first byte chooses what the rest is fed to, so that one
 * target (one binary, one corpus, one CI slot) covers a family of decoders.
 * The seed corpora start each file with that byte.
 */
struct Selected {
    uint8_t selector = 0;
    std::span<const uint8_t> rest;
};

/** False for an empty input, which selects nothing. */
inline bool split_selector(const uint8_t *data, size_t size, Selected *out) {
    if (size == 0) return false;
    out->selector = data[0];
    out->rest = std::span<const uint8_t>(data + 1, size - 1);
    return true;
}

/** Bytes [offset, offset + length) of an encoding. */
struct ByteRange {
    size_t offset, length;
};

/**
 * Whether `again` (the re-encoding of what was decoded from `input`) has
 * `input`'s length and bytes, except in `ignored`: bytes the format reserves
 * and its decoder does not read, which an encoder writes as zero whatever
 * the peer sent.
 */
inline bool same_bytes(std::span<const uint8_t> input, std::span<const uint8_t> again,
                       std::initializer_list<ByteRange> ignored = {}) {
    if (input.size() != again.size()) return false;
    for (size_t i = 0; i < input.size(); ++i) {
        bool skip = false;
        for (ByteRange r : ignored) skip = skip || (i >= r.offset && i - r.offset < r.length);
        if (!skip && input[i] != again[i]) return false;
    }
    return true;
}

}  // namespace afmesh::fuzz
