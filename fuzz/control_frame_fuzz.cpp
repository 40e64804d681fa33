// SPDX-License-Identifier: Apache-2.0
// The control protocol's framing (core/control/frame_reader.cpp, frame.cpp)
// as the scheduler and the nodes meet it: a byte stream on a socket, arriving
// in reads cut at arbitrary points and ending cleanly or inside a frame.
// Every frame the reader hands out goes on to its message decoder.
//
// Input: one byte of options, then the stream.
//   bit 0     the reader's payload limit: set, kMaxNodePayload (the
//             scheduler's); clear, kMaxFramePayload (a node's)
//   bits 1-7  bytes that arrive per read; 0: the whole stream at once
//
// Properties: the frames handed out, framed again with append_frame, are the
// stream's first bytes (nothing lost, reordered or invented); a refusal comes
// from a header that decode_frame_header or the limit refuses; at the end of
// the stream the reader reports a clean close exactly when it holds no part
// of a frame.
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <span>
#include <vector>

#include "control/frame.h"
#include "control/frame_reader.h"
#include "control_message_check.h"
#include "fuzz_support.h"

namespace {

using afmesh::Code;
using afmesh::Status;
namespace control = afmesh::control;
namespace fuzz = afmesh::fuzz;

// FrameReader reads a socket (recv), so the stream travels through a real one.
struct SocketPair {
    int reader = -1, writer = -1;

    SocketPair() {
        int fds[2];
        // Non-blocking both ways: the reader must see "nothing yet", and a
        // large stream must not block the writer while nobody reads.
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds) != 0)
            fuzz::fail("socketpair", strerror(errno));
        reader = fds[0];
        writer = fds[1];
    }
    ~SocketPair() {
        close(reader);
        close(writer);
    }
    SocketPair(const SocketPair &) = delete;
    SocketPair &operator=(const SocketPair &) = delete;
};

class StreamCheck {
public:
    StreamCheck(std::span<const uint8_t> stream, uint32_t max_payload)
        : stream_(stream), reader_(max_payload), max_payload_(max_payload) {}

    /** One read while the stream is open; false once the reader refused a header (the stream is dead). */
    bool read(int fd) {
        Status s = reader_.fill(fd);
        fuzz::check(s.is_ok(), "fill failed on an open stream", s.message().c_str());
        return take_frames();
    }

    /** Reads to the end of the stream, then checks how the reader reports it. */
    void finish(int fd) {
        for (;;) {
            Status s = reader_.fill(fd);
            if (s.is_ok()) {
                if (!take_frames()) return;
                continue;
            }
            if (consumed_ == stream_.size())
                fuzz::check(s.code() == Code::kPeerFailed, "a stream of whole frames did not end cleanly",
                            s.message().c_str());
            else
                fuzz::check(s.code() == Code::kInvalidArgument, "a stream ending inside a frame was not refused",
                            s.to_string().c_str());
            return;
        }
    }

private:
    bool take_frames() {
        for (;;) {
            std::optional<control::Frame> frame;
            Status s = reader_.next(&frame);
            if (!s) {
                check_refusal(s);
                return false;
            }
            if (!frame) return true;
            check_frame(*frame);
        }
    }

    void check_frame(const control::Frame &frame) {
        std::vector<uint8_t> again;
        control::append_frame(frame.type, frame.payload, &again);
        fuzz::check(again.size() <= stream_.size() - consumed_, "the reader handed out more bytes than arrived");
        fuzz::check(fuzz::same_bytes(stream_.subspan(consumed_, again.size()), again),
                    "a frame differs from the bytes it came from");
        consumed_ += again.size();
        fuzz::check_control_payload(frame.type, frame.payload);
    }

    void check_refusal(const Status &s) {
        fuzz::check(s.code() == Code::kInvalidArgument || s.code() == Code::kUnsupportedVersion,
                    "a bad header was refused with an unexpected code", s.to_string().c_str());
        fuzz::check(stream_.size() - consumed_ >= control::kFrameHeaderBytes,
                    "a header was refused before all of it arrived");
        std::span<const uint8_t, control::kFrameHeaderBytes> head(stream_.data() + consumed_,
                                                                  control::kFrameHeaderBytes);
        control::FrameHeader header;
        const bool acceptable =
            control::decode_frame_header(head, &header).is_ok() && header.payload_bytes <= max_payload_;
        fuzz::check(!acceptable, "the reader refused an acceptable header", s.message().c_str());
    }

    std::span<const uint8_t> stream_;
    control::FrameReader reader_;
    uint32_t max_payload_;
    size_t consumed_ = 0;  // stream bytes handed out as frames
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz::Selected in;
    if (!fuzz::split_selector(data, size, &in)) return 0;
    const uint32_t max_payload = (in.selector & 1) ? control::kMaxNodePayload : control::kMaxFramePayload;
    const size_t per_read = (in.selector >> 1) ? (in.selector >> 1) : std::max<size_t>(in.rest.size(), 1);

    SocketPair sockets;
    StreamCheck stream(in.rest, max_payload);
    for (size_t sent = 0; sent < in.rest.size();) {
        const size_t n = std::min(per_read, in.rest.size() - sent);
        ssize_t written = send(sockets.writer, in.rest.data() + sent, n, MSG_NOSIGNAL);
        if (written < 0 && errno != EAGAIN) fuzz::fail("send", strerror(errno));
        if (written > 0) sent += static_cast<size_t>(written);
        if (!stream.read(sockets.reader)) return 0;
    }
    shutdown(sockets.writer, SHUT_WR);
    stream.finish(sockets.reader);
    return 0;
}
