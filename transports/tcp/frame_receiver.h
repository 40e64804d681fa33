// SPDX-License-Identifier: Apache-2.0
// The receiving half of a connection: parses frames off the socket, checks
// each against the wire rules and the region table, and lands write
// payloads straight in the destination region.
//
// Headers are read through a small read-ahead buffer so that one receive
// call picks up many small frames. Payload bytes that arrive in the same
// read as their header are copied from it (at most kReadAheadBytes per
// frame, cheaper than another system call); the rest of a payload is
// received directly into its destination, with the read-ahead buffer as a
// second iovec that catches the next header.
//
// Owned by the progress thread; not thread-safe.
#pragma once

#include <sys/types.h>
#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "afmesh/hal/transport.h"
#include "counters.h"
#include "failure_reason.h"
#include "net_host.h"
#include "region_table.h"
#include "tcp/wire.h"

namespace afmesh::tcp {

inline constexpr size_t kReadAheadBytes = 4096;
/**
 * Bytes one progress() call takes from a connection before it pauses, so a
 * peer streaming a huge write cannot hold poll() (and the callers waiting
 * for it) or starve the other connections.
 */
inline constexpr size_t kReceiveBudgetBytes = 1 << 20;

class FrameReceiver {
public:
    /** `counters`: the context's, which count the receives. */
    explicit FrameReceiver(Counters &counters) : counters_(counters) {}

    enum class Result {
        kDrained,  // the socket has nothing more; wait for it to become readable
        kPaused,   // the event array is full, a message is lent out or the budget is spent: call again next poll
        kFailed,   // the stream is broken or violated the protocol; see failure()
    };

    /**
     * Receives and reports frames on `fd` until one of the Results applies.
     * `readable`: epoll has reported the socket readable since the last
     * call. A call that resumes a pause without that report reads only if
     * the pause came before the socket was known to be empty: level-
     * triggered epoll reports whatever arrives after.
     */
    Result progress(int fd, afmesh_net_conn *conn, const RegionTable &regions, EventSink &sink, bool readable);

    /** An EV_RECV's bytes are lent to the caller until the next poll(); nothing more is read meanwhile. */
    bool lent() const { return lent_; }
    void reclaim() { lent_ = false; }

    const Failure &failure() const { return failure_; }

private:
    enum class Stage { kHeader, kWritePayload, kMessagePayload };
    enum class Step { kMore, kDrained, kFailed };

    size_t buffered() const { return ahead_end_ - ahead_begin_; }
    Step fail(int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
    ssize_t read(int fd, iovec *iov, int count);
    Step read_ahead(int fd);
    Step start_payload(const RegionTable &regions);
    Step read_payload(int fd);
    void deliver(afmesh_net_conn *conn, EventSink &sink);

    Counters &counters_;
    Stage stage_ = Stage::kHeader;
    FrameHeader header_;
    // The current write's destination; between frames, a one-entry cache of
    // the last key so a stream of writes to one region skips the table.
    std::shared_ptr<Region> region_;
    uint8_t *dst_ = nullptr;
    uint64_t remaining_ = 0;
    std::unique_ptr<uint8_t[]> message_;  // one two-sided message, allocated on first use
    bool lent_ = false;
    bool socket_empty_ = false;  // a read came back short, and epoll has not reported the socket since
    size_t received_ = 0;        // bytes read in this progress() call
    Failure failure_;
    size_t ahead_begin_ = 0, ahead_end_ = 0;
    uint8_t ahead_[kReadAheadBytes];
};

}  // namespace afmesh::tcp
