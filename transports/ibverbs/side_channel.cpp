// SPDX-License-Identifier: Apache-2.0
#include "side_channel.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace afmesh::ibverbs {
namespace {

sockaddr_storage ipv4(const void *bytes) {
    sockaddr_storage out{};
    auto &v4 = reinterpret_cast<sockaddr_in &>(out);
    v4.sin_family = AF_INET;
    memcpy(&v4.sin_addr, bytes, 4);
    return out;
}

socklen_t length_of(const sockaddr_storage &address) {
    return address.ss_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
}

}  // namespace

sockaddr_storage side_channel_host(const PortChoice &choice, std::string *source) {
    if (choice.roce && (choice.gid_kind == GidKind::kRoceV2Ipv4 || is_ipv4_mapped(choice.gid))) {
        *source = "the IPv4 address of RoCE GID " + std::to_string(choice.gid_index);
        return ipv4(choice.gid.raw + 12);
    }
    if (choice.roce && choice.gid_kind == GidKind::kRoceV2Ipv6) {
        sockaddr_storage out{};
        auto &v6 = reinterpret_cast<sockaddr_in6 &>(out);
        v6.sin6_family = AF_INET6;
        memcpy(&v6.sin6_addr, choice.gid.raw, 16);
        *source = "the IPv6 address of RoCE GID " + std::to_string(choice.gid_index);
        return out;
    }
    ifaddrs *list = nullptr;
    if (getifaddrs(&list) == 0) {
        for (ifaddrs *i = list; i; i = i->ifa_next) {
            if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || (i->ifa_flags & IFF_LOOPBACK) ||
                !(i->ifa_flags & IFF_UP))
                continue;
            const sockaddr_storage out = ipv4(&reinterpret_cast<const sockaddr_in *>(i->ifa_addr)->sin_addr);
            *source = std::string("interface ") + i->ifa_name + " (the port's GID holds no IP address)";
            freeifaddrs(list);
            return out;
        }
        freeifaddrs(list);
    }
    const in_addr loopback{htonl(INADDR_LOOPBACK)};
    *source = "loopback (no other IPv4 interface is up)";
    return ipv4(&loopback);
}

int open_listener(const sockaddr_storage &host, sockaddr_storage *bound, std::string *why) {
    const int fd = socket(host.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        *why = std::string("socket: ") + strerror(errno);
        return -1;
    }
    socklen_t length = length_of(host);
    if (bind(fd, reinterpret_cast<const sockaddr *>(&host), length) != 0 || ::listen(fd, SOMAXCONN) != 0 ||
        getsockname(fd, reinterpret_cast<sockaddr *>(bound), &length) != 0) {
        *why = std::string("bind/listen: ") + strerror(errno);
        ::close(fd);
        return -1;
    }
    return fd;
}

int start_connect(const sockaddr_storage &peer, std::string *why) {
    const int fd = socket(peer.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        *why = std::string("socket: ") + strerror(errno);
        return -1;
    }
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    // A non-blocking connect interrupted by a signal carries on in the background, like EINPROGRESS.
    if (::connect(fd, reinterpret_cast<const sockaddr *>(&peer), length_of(peer)) != 0 && errno != EINPROGRESS &&
        errno != EINTR) {
        *why = std::string("connect: ") + strerror(errno);
        ::close(fd);
        return -1;
    }
    return fd;
}

int socket_error(int fd) {
    int error = 0;
    socklen_t length = sizeof error;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) != 0) return errno;
    return error;
}

int read_some(int fd, uint8_t *buf, size_t size, size_t *filled, std::string *why) {
    while (*filled < size) {
        const ssize_t n = recv(fd, buf + *filled, size - *filled, 0);
        if (n > 0) {
            *filled += static_cast<size_t>(n);
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
        *why = n == 0 ? "the peer closed the side channel" : std::string("side channel: ") + strerror(errno);
        return -1;
    }
    return 1;
}

bool send_message(int fd, const uint8_t *buf, size_t size, std::string *why) {
    ssize_t n;
    do {
        n = ::send(fd, buf, size, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    if (n == static_cast<ssize_t>(size)) return true;
    *why = n < 0 ? std::string("side channel send: ") + strerror(errno) : "side channel send was cut short";
    return false;
}

}  // namespace afmesh::ibverbs
