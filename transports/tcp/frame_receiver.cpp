// SPDX-License-Identifier: Apache-2.0
#include "frame_receiver.h"

#include <cerrno>
#include <cinttypes>
#include <cstdarg>
#include <cstring>
#include <new>

#include "remote_write_scope.h"
#include "socket_io.h"

namespace afmesh::tcp {

FrameReceiver::Result FrameReceiver::progress(int fd, afmesh_net_conn *conn, const RegionTable &regions,
                                              EventSink &sink, bool readable) {
    // An EV_RECV lends the message until the next poll: that poll resumes
    // here without epoll's word, and would otherwise spend a system call
    // (one per message, tcp's costliest step) learning the socket is empty.
    if (readable) socket_empty_ = false;
    received_ = 0;
    for (;;) {
        if (lent_ || sink.full() || received_ >= kReceiveBudgetBytes) return Result::kPaused;
        Step step;
        if (stage_ == Stage::kHeader) {
            if (buffered() < kFrameHeaderSize) {
                step = read_ahead(fd);
            } else if (!decode_frame_header(ahead_ + ahead_begin_, &header_, &failure_.reason)) {
                failure_.status = AFMESH_HAL_PEER_FAILED;
                step = Step::kFailed;
            } else {
                ahead_begin_ += kFrameHeaderSize;
                step = start_payload(regions);
            }
        } else if (remaining_ == 0) {
            deliver(conn, sink);
            step = Step::kMore;
        } else {
            step = read_payload(fd);
        }
        if (step == Step::kDrained) return Result::kDrained;
        if (step == Step::kFailed) return Result::kFailed;
    }
}

FrameReceiver::Step FrameReceiver::fail(int status, const char *fmt, ...) {
    failure_.status = status;
    va_list ap;
    va_start(ap, fmt);
    failure_.reason.vformat(fmt, ap);
    va_end(ap);
    return Step::kFailed;
}

// A read that comes back short has emptied the socket's receive queue, so
// another read before epoll reports the socket again could only say EAGAIN:
// skip that system call and let level-triggered epoll report the socket when
// more arrives. Fails with errno EAGAIN in that case.
ssize_t FrameReceiver::read(int fd, iovec *iov, int count) {
    if (socket_empty_) {
        errno = EAGAIN;
        return -1;
    }
    size_t wanted = 0;
    for (int i = 0; i < count; ++i) wanted += iov[i].iov_len;
    const ssize_t n = receive_iov(fd, iov, count);
    counters_.add(kRecvmsgCalls);
    socket_empty_ = n > 0 && static_cast<size_t>(n) < wanted;
    if (n > 0) received_ += static_cast<size_t>(n);
    return n;
}

FrameReceiver::Step FrameReceiver::read_ahead(int fd) {
    if (ahead_begin_ > 0) {  // keep the partial header, at most kFrameHeaderSize - 1 bytes
        memmove(ahead_, ahead_ + ahead_begin_, buffered());
        ahead_end_ -= ahead_begin_;
        ahead_begin_ = 0;
    }
    iovec iov = {ahead_ + ahead_end_, sizeof ahead_ - ahead_end_};
    const ssize_t n = read(fd, &iov, 1);
    if (n > 0) {
        ahead_end_ += static_cast<size_t>(n);
        return Step::kMore;
    }
    if (n == 0)
        return buffered() > 0 ? fail(AFMESH_HAL_PEER_FAILED, "peer closed the connection inside a frame header")
                              : fail(AFMESH_HAL_PEER_FAILED, "peer closed the connection");
    if (would_block(errno)) return Step::kDrained;
    return fail(AFMESH_HAL_PEER_FAILED, "receive failed: %s", strerror(errno));
}

FrameReceiver::Step FrameReceiver::start_payload(const RegionTable &regions) {
    remaining_ = header_.length;
    if (header_.type == FrameType::kSend) {
        if (!message_) {
            message_.reset(new (std::nothrow) uint8_t[kMaxSendSize]);
            if (!message_)
                return fail(AFMESH_HAL_NO_MEMORY, "no memory for a %" PRIu32 "-byte message buffer", kMaxSendSize);
        }
        dst_ = message_.get();
        stage_ = Stage::kMessagePayload;
        return Step::kMore;
    }
    // WRITE and WRITE_IMM alike: their payload lands only inside a region that accepts it.
    if (!region_ || region_->id() != header_.key || region_->revoked()) region_ = regions.find(header_.key);
    if (!region_) return fail(AFMESH_HAL_ACCESS, "write to unknown region key %" PRIu64, header_.key);
    if (!region_->allows(AFMESH_NET_ACCESS_REMOTE_WRITE))
        return fail(AFMESH_HAL_ACCESS, "write to region %" PRIu64 ", which does not accept remote writes", header_.key);
    if (!region_->contains(header_.offset, header_.length))
        return fail(AFMESH_HAL_ACCESS,
                    "write of %" PRIu64 " bytes at offset %" PRIu64 " falls outside region %" PRIu64 " of %" PRIu64
                    " bytes",
                    header_.length, header_.offset, header_.key, region_->length());
    dst_ = region_->base() + header_.offset;
    stage_ = Stage::kWritePayload;
    return Step::kMore;
}

FrameReceiver::Step FrameReceiver::read_payload(int fd) {
    RegionAccess access;
    if (stage_ == Stage::kWritePayload && !access.acquire(*region_))
        return fail(AFMESH_HAL_ACCESS, "region %" PRIu64 " was deregistered while a write into it was arriving",
                    header_.key);
    const RemoteWriteScope remote_write(stage_ == Stage::kWritePayload);
    if (buffered() > 0) {
        const size_t n = remaining_ < buffered() ? static_cast<size_t>(remaining_) : buffered();
        memcpy(dst_, ahead_ + ahead_begin_, n);
        ahead_begin_ += n;
        dst_ += n;
        remaining_ -= n;
        return Step::kMore;
    }
    ahead_begin_ = ahead_end_ = 0;
    iovec iov[2] = {{dst_, remaining_}, {ahead_, sizeof ahead_}};
    const ssize_t n = read(fd, iov, 2);
    if (n > 0) {
        const uint64_t landed = static_cast<uint64_t>(n) < remaining_ ? static_cast<uint64_t>(n) : remaining_;
        dst_ += landed;
        remaining_ -= landed;
        ahead_end_ = static_cast<size_t>(static_cast<uint64_t>(n) - landed);
        return Step::kMore;
    }
    if (n == 0)
        return fail(AFMESH_HAL_PEER_FAILED,
                    "peer closed the connection %" PRIu64 " bytes short of the end of a %" PRIu64 "-byte frame",
                    remaining_, header_.length);
    if (would_block(errno)) return Step::kDrained;
    return fail(AFMESH_HAL_PEER_FAILED, "receive failed: %s", strerror(errno));
}

void FrameReceiver::deliver(afmesh_net_conn *conn, EventSink &sink) {
    if (stage_ == Stage::kWritePayload) {
        // A WRITE's bytes are announced by the WRITE_IMM that ends its write_imm_v (wire.h).
        if (header_.type == FrameType::kWriteImm) sink.add(AFMESH_NET_EV_IMM, conn).imm = header_.imm;
    } else {
        afmesh_net_event &event = sink.add(AFMESH_NET_EV_RECV, conn);
        event.data = message_.get();
        event.len = static_cast<uint32_t>(header_.length);
        lent_ = true;
    }
    stage_ = Stage::kHeader;
}

}  // namespace afmesh::tcp
