// SPDX-License-Identifier: Apache-2.0
#include "control/frame_reader.h"

#include <sys/socket.h>

#include <cerrno>

#include "control/socket_util.h"

namespace afmesh::control {
namespace {

constexpr size_t kReadChunk = 64 * 1024;

}  // namespace

Status FrameReader::fill(int fd) {
    if (start_ > 0) {
        buf_.erase(buf_.begin(), buf_.begin() + static_cast<std::ptrdiff_t>(start_));
        start_ = 0;
    }
    size_t old_size = buf_.size();
    buf_.resize(old_size + kReadChunk);
    ssize_t n;
    do {
        n = recv(fd, buf_.data() + old_size, kReadChunk, 0);
    } while (n < 0 && errno == EINTR);
    int err = errno;
    buf_.resize(old_size + (n > 0 ? static_cast<size_t>(n) : 0));
    if (n > 0) return Status::ok();
    if (n < 0) {
        if (err == EAGAIN || err == EWOULDBLOCK) return Status::ok();
        // A peer that closes with our data unread sends a reset: to us it is the same end of stream.
        if (err == ECONNRESET) return {Code::kPeerFailed, "connection closed (reset by peer)"};
        return {Code::kError, "recv: " + errno_text(err)};
    }
    if (buf_.empty()) return {Code::kPeerFailed, "connection closed"};
    return {Code::kInvalidArgument, "connection closed in the middle of a frame (" + std::to_string(buf_.size()) +
                                   " bytes of it received)"};
}

Status FrameReader::next(std::optional<Frame> *out) {
    out->reset();
    size_t available = buf_.size() - start_;
    if (available < kFrameHeaderBytes) return Status::ok();
    FrameHeader header;
    std::span<const uint8_t, kFrameHeaderBytes> head(buf_.data() + start_, kFrameHeaderBytes);
    if (Status s = decode_frame_header(head, &header); !s) return s;
    if (header.payload_bytes > max_payload_) {
        return {Code::kInvalidArgument, std::string(message_type_name(header.type)) + " frame of " +
                                            std::to_string(header.payload_bytes) + " bytes exceeds the " +
                                            std::to_string(max_payload_) + "-byte limit for what this side receives"};
    }
    if (available - kFrameHeaderBytes < header.payload_bytes) return Status::ok();
    auto payload = buf_.begin() + static_cast<std::ptrdiff_t>(start_ + kFrameHeaderBytes);
    *out = Frame{header.type, {payload, payload + header.payload_bytes}};
    start_ += kFrameHeaderBytes + header.payload_bytes;
    return Status::ok();
}

void FrameReader::clear() {
    buf_.clear();
    start_ = 0;
}

}  // namespace afmesh::control
