// SPDX-License-Identifier: Apache-2.0
// Storage for the payloads copied at post time (small writes and two-sided
// messages), so the caller may reuse its buffer on return. Operations leave
// a connection's send queue in the order they entered it, so their copies
// are released in allocation order: a ring of bytes where an allocation that
// does not fit before the end starts again at the front, charging the
// skipped tail to itself.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace afmesh::tcp {

class CopyFifo {
public:
    explicit CopyFifo(size_t capacity) : capacity_(capacity) {}

    /**
     * `bytes` (> 0) contiguous bytes, or null when they do not fit now.
     * `*charge` is what release() must be given for them.
     */
    uint8_t *allocate(size_t bytes, size_t *charge);
    /** Releases the oldest allocation still held. */
    void release(size_t charge);
    /** Releases everything. */
    void clear() { head_ = tail_ = used_ = 0; }

private:
    std::unique_ptr<uint8_t[]> buffer_;  // allocated on first use: many connections never copy
    const size_t capacity_;
    size_t head_ = 0;  // start of the oldest allocation
    size_t tail_ = 0;  // where the next allocation goes
    size_t used_ = 0;  // bytes charged, skipped tails included
};

}  // namespace afmesh::tcp
