// SPDX-License-Identifier: Apache-2.0
#include "frame_sender.h"

#include <cerrno>
#include <cinttypes>
#include <cstring>
#include <utility>

#include "socket_io.h"

namespace afmesh::tcp {
namespace {

// iovecs per gathered send: enough to batch many small frames into one
// syscall, small enough for the stack.
constexpr int kMaxIov = 64;

}  // namespace

int FrameSender::queue(OutgoingFrame *frames, size_t count, uint32_t completion, uint64_t cookie) {
    if (queue_.room() < count) return AFMESH_HAL_AGAIN;
    // The copied payloads share one allocation, charged to the last frame:
    // frames retire in order, so it outlives every frame pointing into it.
    size_t copied = 0;
    for (size_t i = 0; i < count; ++i)
        if (!frames[i].source) copied += frames[i].header.length;
    size_t charge = 0;
    uint8_t *copy = nullptr;
    if (copied > 0 && !(copy = copies_.allocate(copied, &charge))) return AFMESH_HAL_AGAIN;
    for (size_t i = 0; i < count; ++i) {
        OutgoingFrame &frame = frames[i];
        SendOp &op = queue_.push();
        encode_frame_header(frame.header, op.header);
        op.payload = static_cast<const uint8_t *>(frame.payload);
        op.payload_length = frame.header.length;
        if (!frame.source && frame.header.length > 0) {
            memcpy(copy, frame.payload, frame.header.length);
            op.payload = copy;
            copy += frame.header.length;
        }
        op.source = std::move(frame.source);
        if (i + 1 == count) {
            op.cookie = cookie;
            op.copy_charge = charge;
            op.completion = completion;
        }
    }
    return AFMESH_HAL_OK;
}

FrameSender::Flush FrameSender::flush(int fd, Failure *failure) {
    for (size_t sent = 0; queue_.unsent_count() > 0;) {
        if (sent >= kSendBudgetBytes) return Flush::kBlocked;
        iovec iov[kMaxIov];
        // Zero-copy sources may not be deregistered while the kernel reads them.
        RegionAccesses<kMaxIov> access;
        int iov_count = 0;
        for (size_t i = 0; i < queue_.unsent_count() && iov_count + 2 <= kMaxIov; ++i) {
            SendOp &op = queue_.unsent(i);
            if (op.source && !access.acquire(*op.source)) {
                failure->status = AFMESH_HAL_ACCESS;
                failure->reason.format("the source region of a write in flight (id %" PRIu64 ") was deregistered",
                                       op.source->id());
                return Flush::kFailed;
            }
            uint64_t at = op.sent;
            if (at < kFrameHeaderSize) {
                iov[iov_count++] = {op.header + at, kFrameHeaderSize - at};
                at = kFrameHeaderSize;
            }
            if (at < op.size())
                iov[iov_count++] = {const_cast<uint8_t *>(op.payload) + (at - kFrameHeaderSize), op.size() - at};
        }
        const ssize_t n = send_iov(fd, iov, iov_count);
        counters_.add(kSendmsgCalls);
        if (n < 0) {
            if (would_block(errno)) return Flush::kBlocked;
            failure->status = AFMESH_HAL_PEER_FAILED;
            failure->reason.format("send failed: %s", strerror(errno));
            return Flush::kFailed;
        }
        queue_.advance(static_cast<uint64_t>(n));
        sent += static_cast<size_t>(n);
    }
    return Flush::kAllSent;
}

bool FrameSender::retire(EventSink *sink, afmesh_net_conn *conn) {
    while (queue_.has_done()) {
        SendOp &op = queue_.oldest_done();
        if (op.completion != 0) {
            if (!sink || sink->full()) return true;
            sink->add(static_cast<afmesh_net_event_type>(op.completion), conn).cookie = op.cookie;
        }
        copies_.release(op.copy_charge);
        queue_.pop();
    }
    return false;
}

void FrameSender::drop_all() {
    queue_.clear();
    copies_.clear();
}

}  // namespace afmesh::tcp
