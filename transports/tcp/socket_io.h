// SPDX-License-Identifier: Apache-2.0
// Thin, EINTR-safe wrappers over the socket calls the transport makes. Every
// socket is non-blocking; sends never raise SIGPIPE.
#pragma once

#include <sys/types.h>
#include <sys/uio.h>

#include "address.h"
#include "failure_reason.h"

namespace afmesh::tcp {

/**
 * Resolves `host` (an IPv4 or IPv6 literal, optionally in brackets, or a host
 * name) and listens on an ephemeral port of the first address that binds.
 * Returns the non-blocking socket, or -1 with the reason.
 */
int open_listener(const char *host, SocketAddress *bound, Reason *why);

/** Low latency for small frames: no Nagle delay. */
void set_no_delay(int fd);

/** The pending error of a socket (SO_ERROR), e.g. a refused connect. */
int socket_error(int fd);

/** A gathered send (writev with MSG_NOSIGNAL); -1 with errno as sendmsg. */
ssize_t send_iov(int fd, const iovec *iov, int count);

/** A scattered receive; 0 at end of stream, -1 with errno as recvmsg. */
ssize_t receive_iov(int fd, iovec *iov, int count);

/** Whether errno after a failed non-blocking call means "try again later". */
bool would_block(int error);

}  // namespace afmesh::tcp
