// SPDX-License-Identifier: Apache-2.0
#include "control/frame_writer.h"

#include <sys/socket.h>

#include <cerrno>

#include "control/socket_util.h"
#include "log.h"

namespace afmesh::control {

void FrameWriter::queue(MessageType type, std::span<const uint8_t> payload) {
    if (payload.size() > kMaxFramePayload) {
        AFMESH_LOG(AFMESH_LOG_ERROR, "control: dropping a %s of %zu bytes, above the %u-byte frame limit",
                   message_type_name(type), payload.size(), kMaxFramePayload);
        return;
    }
    append_frame(type, payload, &buf_);
}

Status FrameWriter::flush(int fd) {
    while (sent_ < buf_.size()) {
        ssize_t n = send(fd, buf_.data() + sent_, buf_.size() - sent_, MSG_NOSIGNAL);
        if (n > 0) {
            sent_ += static_cast<size_t>(n);
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return Status::ok();
        return {Code::kPeerFailed, "send: " + errno_text(n < 0 ? errno : EPIPE)};
    }
    buf_.clear();
    sent_ = 0;
    return Status::ok();
}

}  // namespace afmesh::control
