// SPDX-License-Identifier: Apache-2.0
// A connection's queue of outgoing operations, oldest first. An operation is
// unsent until its last byte has gone to the socket, then done until it is
// retired (its completion reported, its copy and source released):
//
//   head_ ........ unsent_ ........ tail_
//   | done ops     | unsent ops     |
//
// Storage grows by doubling up to max_depth, so a connection that never has
// many operations in flight never holds memory for many, and the steady
// state allocates nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "region_table.h"
#include "tcp/wire.h"

namespace afmesh::tcp {

struct SendOp {
    uint8_t header[kFrameHeaderSize];
    const uint8_t *payload = nullptr;
    uint64_t payload_length = 0;
    uint64_t sent = 0;               // bytes of header + payload handed to the kernel
    uint64_t cookie = 0;
    size_t copy_charge = 0;          // CopyFifo bytes to release at retirement; 0 when not copied
    uint32_t completion = 0;         // event to report when signalled (afmesh_net_event_type), else 0
    std::shared_ptr<Region> source;  // a zero-copy payload's registration, checked before each send

    uint64_t size() const { return kFrameHeaderSize + payload_length; }
};

class SendQueue {
public:
    /** `max_depth` must be a power of two. */
    explicit SendQueue(size_t max_depth);

    /** Operations that may still be pushed. */
    size_t room() const { return max_depth_ - (tail_ - head_); }
    size_t unsent_count() const { return tail_ - unsent_; }
    bool has_done() const { return head_ != unsent_; }

    /** Appends a cleared operation. Requires room() > 0. */
    SendOp &push();
    /** The i-th unsent operation, 0 being the oldest. */
    SendOp &unsent(size_t i) { return slot(unsent_ + i); }
    /** Accounts `bytes` the socket accepted, in order, across the unsent operations. */
    void advance(uint64_t bytes);
    /** The oldest done operation. Requires has_done(). */
    SendOp &oldest_done() { return slot(head_); }
    /** Removes the oldest done operation. */
    void pop();
    /** Removes every operation. */
    void clear();

private:
    SendOp &slot(size_t index) { return slots_[index & (slots_.size() - 1)]; }
    void grow();

    std::vector<SendOp> slots_;  // power-of-two size; indices below are free-running
    const size_t max_depth_;
    size_t head_ = 0, unsent_ = 0, tail_ = 0;
};

}  // namespace afmesh::tcp
