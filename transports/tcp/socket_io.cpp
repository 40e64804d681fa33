// SPDX-License-Identifier: Apache-2.0
#include "socket_io.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace afmesh::tcp {

int open_listener(const char *host, SocketAddress *bound, Reason *why) {
    // getaddrinfo takes "::1", not the "[::1]" people write next to a port.
    char name[256];
    size_t len = strlen(host);
    if (len >= 2 && host[0] == '[' && host[len - 1] == ']') {
        host += 1;
        len -= 2;
    }
    if (len >= sizeof name) {
        why->format("bind address of %zu characters is too long", len);
        return -1;
    }
    memcpy(name, host, len);
    name[len] = '\0';

    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    addrinfo *found = nullptr;
    if (int rc = getaddrinfo(name, "0", &hints, &found); rc != 0) {
        why->format("cannot resolve '%s': %s", name, gai_strerror(rc));
        return -1;
    }
    int fd = -1;
    for (addrinfo *ai = found; ai && fd < 0; ai = ai->ai_next) {
        fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            why->format("socket: %s", strerror(errno));
            continue;
        }
        bound->length = sizeof bound->storage;
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || ::listen(fd, SOMAXCONN) != 0 ||
            getsockname(fd, bound->get(), &bound->length) != 0) {
            why->format("cannot listen on '%s': %s", name, strerror(errno));
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(found);
    return fd;
}

void set_no_delay(int fd) {
    int on = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
}

int socket_error(int fd) {
    int error = 0;
    socklen_t len = sizeof error;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) != 0) return errno;
    return error;
}

ssize_t send_iov(int fd, const iovec *iov, int count) {
    msghdr msg{};
    msg.msg_iov = const_cast<iovec *>(iov);
    msg.msg_iovlen = static_cast<size_t>(count);
    ssize_t n;
    do {
        n = sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    } while (n < 0 && errno == EINTR);
    return n;
}

ssize_t receive_iov(int fd, iovec *iov, int count) {
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(count);
    ssize_t n;
    do {
        n = recvmsg(fd, &msg, MSG_DONTWAIT);
    } while (n < 0 && errno == EINTR);
    return n;
}

bool would_block(int error) { return error == EAGAIN || error == EWOULDBLOCK; }

}  // namespace afmesh::tcp
