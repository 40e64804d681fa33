// SPDX-License-Identifier: Apache-2.0
// The sending half of a connection: turns posted operations into frames and
// writes them with gathered sends, straight from the caller's registered
// memory for large writes. Not thread-safe: the connection serialises it.
#pragma once

#include <memory>

#include "afmesh/hal/transport.h"
#include "copy_fifo.h"
#include "counters.h"
#include "failure_reason.h"
#include "net_host.h"
#include "send_queue.h"
#include "tcp/wire.h"

namespace afmesh::tcp {

/** Frames one connection may have queued before posting returns AGAIN (a write_imm_v is one per segment). */
inline constexpr size_t kSendQueueDepth = 4096;
static_assert((kSendQueueDepth & (kSendQueueDepth - 1)) == 0, "SendQueue needs a power of two");
/** Bytes of copied payloads one connection may have queued. */
inline constexpr size_t kCopyFifoBytes = 256 * 1024;
/**
 * Bytes one flush() hands the kernel before it yields, as if the socket were
 * full: a poster returns promptly from a huge write, and poll() continues it
 * when the socket reports writable, a budget at a time.
 */
inline constexpr size_t kSendBudgetBytes = 1 << 20;

/** One frame to queue. With a `source` region its payload is sent from `payload` in place; without one it is copied. */
struct OutgoingFrame {
    FrameHeader header;
    const void *payload = nullptr;
    std::shared_ptr<Region> source;
};

class FrameSender {
public:
    /** `counters`: the context's, which count the sends. */
    explicit FrameSender(Counters &counters) : queue_(kSendQueueDepth), copies_(kCopyFifoBytes), counters_(counters) {}

    /**
     * Queues `count` frames back to back, all of them or none (one operation
     * may be several frames: write_imm_v), taking their sources. Payloads
     * without a source are copied now. `completion` is the event to report
     * once the last frame is sent (0: none).
     * @return OK, or AGAIN when the queue or the copy space lacks room for them all.
     */
    int queue(OutgoingFrame *frames, size_t count, uint32_t completion, uint64_t cookie);

    bool has_unsent() const { return queue_.unsent_count() > 0; }

    enum class Flush { kAllSent, kBlocked, kFailed };
    /** Writes unsent frames until all are sent, the socket is full or the budget is spent (kBlocked). */
    Flush flush(int fd, Failure *failure);

    /**
     * Retires sent operations, oldest first. A signalled one becomes an event
     * in `sink` while it has room; with no sink (a posting thread), retiring
     * stops at the first signalled one, left for poll() to report.
     * @return whether a signalled completion is still waiting to be reported.
     */
    bool retire(EventSink *sink, afmesh_net_conn *conn);

    /** Forgets every queued operation without completions (the connection is gone). */
    void drop_all();

private:
    SendQueue queue_;
    CopyFifo copies_;
    Counters &counters_;
};

}  // namespace afmesh::tcp
