// SPDX-License-Identifier: Apache-2.0
#include "control/socket_util.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <memory>
#include <system_error>

namespace afmesh::control {
namespace {

using AddrInfoPtr = std::unique_ptr<addrinfo, decltype(&freeaddrinfo)>;

Status resolve(const HostPort &hp, bool passive, AddrInfoPtr *out) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
    addrinfo *result = nullptr;
    int rc = getaddrinfo(hp.host.empty() ? nullptr : hp.host.c_str(), hp.port.c_str(), &hints, &result);
    if (rc != 0) {
        std::string why = rc == EAI_SYSTEM ? errno_text(errno) : gai_strerror(rc);
        return {Code::kNotFound, "cannot resolve '" + hp.host + "': " + why};
    }
    *out = AddrInfoPtr(result, freeaddrinfo);
    return Status::ok();
}

UniqueFd open_socket(int family) {
    return UniqueFd(socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
}

// Control messages are small and latency matters more than packet count.
void set_nodelay(int fd) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

/** Waits for a non-blocking connect() to finish; 0 on success, else an errno (ETIMEDOUT at the deadline). */
int finish_connect(int fd, Clock::time_point deadline) {
    for (;;) {
        pollfd p{fd, POLLOUT, 0};
        int rc = poll(&p, 1, poll_timeout_ms(deadline));
        if (rc < 0 && errno == EINTR) continue;
        if (rc < 0) return errno;
        if (rc == 0) return ETIMEDOUT;
        int err = 0;
        socklen_t len = sizeof err;
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) return errno;
        return err;
    }
}

}  // namespace

void UniqueFd::reset(int fd) {
    if (fd_ >= 0) close(fd_);
    fd_ = fd;
}

Status parse_host_port(std::string_view text, HostPort *out) {
    auto bad = [&](const std::string &why) {
        return Status(Code::kInvalidArgument, "bad address '" + std::string(text) + "': " + why);
    };
    std::string_view host, port;
    if (!text.empty() && text.front() == '[') {
        size_t close = text.find(']');
        if (close == std::string_view::npos) return bad("missing ']'");
        host = text.substr(1, close - 1);
        if (close + 1 >= text.size() || text[close + 1] != ':') return bad("expected ':port' after ']'");
        port = text.substr(close + 2);
    } else {
        size_t colon = text.rfind(':');
        if (colon == std::string_view::npos) return bad("expected host:port");
        host = text.substr(0, colon);
        if (host.find(':') != std::string_view::npos) return bad("write IPv6 addresses in brackets: [addr]:port");
        port = text.substr(colon + 1);
    }
    if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string_view::npos ||
        std::stoul(std::string(port)) > 65535) {
        return bad("port must be a number 0..65535");
    }
    out->host = std::string(host);
    out->port = std::string(port);
    return Status::ok();
}

std::string format_sockaddr(const sockaddr *addr, bool with_port) {
    char text[INET6_ADDRSTRLEN] = "?";
    unsigned port = 0;
    bool v6 = false;
    if (addr->sa_family == AF_INET) {
        auto *in = reinterpret_cast<const sockaddr_in *>(addr);
        inet_ntop(AF_INET, &in->sin_addr, text, sizeof text);
        port = ntohs(in->sin_port);
    } else if (addr->sa_family == AF_INET6) {
        auto *in6 = reinterpret_cast<const sockaddr_in6 *>(addr);
        port = ntohs(in6->sin6_port);
        if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
            inet_ntop(AF_INET, &in6->sin6_addr.s6_addr[12], text, sizeof text);
        } else {
            inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof text);
            v6 = true;
        }
    }
    if (!with_port) return text;
    // Built by appending: GCC 12 reports a false -Wrestrict on "[" + std::string.
    std::string out;
    if (v6) out += '[';
    out += text;
    if (v6) out += ']';
    out += ':';
    out += std::to_string(port);
    return out;
}

Status listen_tcp(const std::string &address, UniqueFd *out, std::string *bound) {
    HostPort hp;
    if (Status s = parse_host_port(address, &hp); !s) return s;
    AddrInfoPtr addrs(nullptr, freeaddrinfo);
    if (Status s = resolve(hp, true, &addrs); !s) return s;
    std::string last_error = "no usable address";
    for (addrinfo *ai = addrs.get(); ai; ai = ai->ai_next) {
        UniqueFd fd = open_socket(ai->ai_family);
        if (!fd.valid()) {
            last_error = "socket: " + errno_text(errno);
            continue;
        }
        int one = 1;
        setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd.get(), SOMAXCONN) != 0) {
            last_error = format_sockaddr(ai->ai_addr, true) + ": " + errno_text(errno);
            continue;
        }
        sockaddr_storage actual{};
        socklen_t len = sizeof actual;
        getsockname(fd.get(), reinterpret_cast<sockaddr *>(&actual), &len);
        *bound = format_sockaddr(reinterpret_cast<sockaddr *>(&actual), true);
        *out = std::move(fd);
        return Status::ok();
    }
    return {Code::kError, "cannot listen on " + address + ": " + last_error};
}

Status accept_tcp(int listen_fd, UniqueFd *out, std::string *peer_host, std::string *peer_endpoint) {
    sockaddr_storage peer{};
    socklen_t len = sizeof peer;
    UniqueFd fd(accept4(listen_fd, reinterpret_cast<sockaddr *>(&peer), &len, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!fd.valid()) {
        // A connection that died in the backlog, or a signal, is not the listener's failure.
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED) return Status::ok();
        return {Code::kError, "accept: " + errno_text(errno)};
    }
    set_nodelay(fd.get());
    *peer_host = format_sockaddr(reinterpret_cast<sockaddr *>(&peer), false);
    *peer_endpoint = format_sockaddr(reinterpret_cast<sockaddr *>(&peer), true);
    *out = std::move(fd);
    return Status::ok();
}

Status connect_tcp(const std::string &address, Clock::time_point deadline, UniqueFd *out) {
    HostPort hp;
    if (Status s = parse_host_port(address, &hp); !s) return s;
    AddrInfoPtr addrs(nullptr, freeaddrinfo);
    if (Status s = resolve(hp, false, &addrs); !s) return s;
    std::string last_error = "no usable address";
    for (addrinfo *ai = addrs.get(); ai; ai = ai->ai_next) {
        UniqueFd fd = open_socket(ai->ai_family);
        if (!fd.valid()) {
            last_error = "socket: " + errno_text(errno);
            continue;
        }
        int err = connect(fd.get(), ai->ai_addr, ai->ai_addrlen) == 0 ? 0 : errno;
        if (err == EINPROGRESS) err = finish_connect(fd.get(), deadline);
        if (err == 0) {
            set_nodelay(fd.get());
            *out = std::move(fd);
            return Status::ok();
        }
        last_error = format_sockaddr(ai->ai_addr, true) + ": " + errno_text(err);
        if (err == ETIMEDOUT) return {Code::kTimeout, "connect to " + last_error};
    }
    return {Code::kPeerFailed, "connect to " + last_error};
}

int poll_timeout_ms(Clock::time_point deadline) {
    auto left = deadline - Clock::now();
    if (left <= Clock::duration::zero()) return 0;
    auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
    return ms > INT_MAX ? INT_MAX : static_cast<int>(ms);
}

std::string errno_text(int err) { return std::error_code(err, std::generic_category()).message(); }

}  // namespace afmesh::control
