// SPDX-License-Identifier: Apache-2.0
// Reassembles control frames from a non-blocking stream socket. It buffers at
// most one frame plus one read, and rejects a bad header (magic, version,
// oversized length) as soon as its 12 bytes are in, before any payload is
// buffered.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "control/frame.h"
#include "status.h"

namespace afmesh::control {

struct Frame {
    MessageType type;
    std::vector<uint8_t> payload;
};

class FrameReader {
public:
    /** Frames with a payload over `max_payload` (at most kMaxFramePayload) are refused like a bad header. */
    explicit FrameReader(uint32_t max_payload = kMaxFramePayload) : max_payload_(max_payload) {}

    /**
     * Reads once from `fd`. OK when bytes arrived or none were ready;
     * PEER_FAILED at a clean end of stream; INVALID_ARGUMENT when the stream
     * ends inside a frame (a truncated frame is a malformed one); ERROR on a
     * socket error.
     */
    Status fill(int fd);
    /**
     * Takes the next complete frame into `out`, or leaves it empty when more
     * bytes are needed. A bad header is an error for good: a byte stream
     * cannot be resynchronised after one.
     */
    Status next(std::optional<Frame> *out);
    /** Drops whatever is buffered (a connection being closed reads and ignores its input). */
    void clear();

private:
    uint32_t max_payload_;
    std::vector<uint8_t> buf_;
    size_t start_ = 0;  // first unconsumed byte of buf_
};

}  // namespace afmesh::control
