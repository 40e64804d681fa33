// SPDX-License-Identifier: Apache-2.0
// TCP plumbing for the control plane: "host:port" parsing (IPv4, bracketed
// IPv6, names), listening, connecting with a deadline, printable addresses.
// Every socket is non-blocking and close-on-exec.
#pragma once

#include <sys/socket.h>

#include <chrono>
#include <string>
#include <string_view>

#include "status.h"

namespace afmesh::control {

using Clock = std::chrono::steady_clock;

/** Owns a file descriptor and closes it exactly once. */
class UniqueFd {
public:
    UniqueFd() = default;
    explicit UniqueFd(int fd) : fd_(fd) {}
    UniqueFd(UniqueFd &&other) noexcept : fd_(other.release()) {}
    UniqueFd &operator=(UniqueFd &&other) noexcept {
        reset(other.release());
        return *this;
    }
    ~UniqueFd() { reset(); }

    int get() const { return fd_; }
    bool valid() const { return fd_ >= 0; }
    int release() {
        int fd = fd_;
        fd_ = -1;
        return fd;
    }
    void reset(int fd = -1);

private:
    int fd_ = -1;
};

struct HostPort {
    std::string host;  // without brackets; empty means "any address" when listening
    std::string port;  // decimal, 0..65535
};

/**
 * Splits "host:port" or "[ipv6]:port". A bare IPv6 address is refused:
 * which ':' starts the port would be a guess.
 */
Status parse_host_port(std::string_view text, HostPort *out);

/** "1.2.3.4:5" / "[::1]:5", or without the port "1.2.3.4" / "::1". IPv4-mapped IPv6 prints as IPv4. */
std::string format_sockaddr(const sockaddr *addr, bool with_port);

/** Binds and listens on `address`; port 0 picks a free one. `bound` receives the address actually bound. */
Status listen_tcp(const std::string &address, UniqueFd *out, std::string *bound);

/**
 * Accepts one pending connection from a non-blocking listener. OK with `out`
 * left invalid when none is pending; an error (e.g. out of descriptors)
 * otherwise. `peer_host` gets the bare IP, `peer_endpoint` "ip:port" for logs.
 */
Status accept_tcp(int listen_fd, UniqueFd *out, std::string *peer_host, std::string *peer_endpoint);

/**
 * One attempt to connect to `address`, trying each resolved address in turn
 * and giving up at `deadline`. Name resolution itself is not bounded by the
 * deadline (getaddrinfo has no timeout). The connected socket is non-blocking.
 */
Status connect_tcp(const std::string &address, Clock::time_point deadline, UniqueFd *out);

/** Milliseconds from now until `deadline` for poll(): rounded up, 0 when past, clamped to int. */
int poll_timeout_ms(Clock::time_point deadline);

/** The text of an errno value. */
std::string errno_text(int err);

}  // namespace afmesh::control
