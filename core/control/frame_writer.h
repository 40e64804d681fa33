// SPDX-License-Identifier: Apache-2.0
// Queues outgoing control frames and writes them to a non-blocking socket as
// fast as it accepts them, so one slow peer never blocks the sender's thread.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "control/frame.h"
#include "status.h"

namespace afmesh::control {

class FrameWriter {
public:
    /**
     * Appends one frame. A payload over kMaxFramePayload is a caller bug (the
     * callers check the only two messages whose size users control): it is
     * logged and dropped rather than sent as a frame the peer must refuse.
     */
    void queue(MessageType type, std::span<const uint8_t> payload);
    /** Writes what the socket takes now. PEER_FAILED when the peer is gone. */
    Status flush(int fd);
    bool empty() const { return sent_ == buf_.size(); }
    size_t queued_bytes() const { return buf_.size() - sent_; }

private:
    std::vector<uint8_t> buf_;
    size_t sent_ = 0;  // bytes of buf_ already written
};

}  // namespace afmesh::control
