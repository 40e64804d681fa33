// SPDX-License-Identifier: Apache-2.0
// The TCP side channel: used only to exchange QP information when a
// connection is set up (there is no librdmacm) and afterwards to notice a
// peer's close or death at once, rather than after the RC retry timeout.
// The data path never touches it.
#pragma once

#include <sys/socket.h>

#include <string>

#include "discovery.h"

namespace afmesh::ibverbs {

/**
 * The address the side channel binds and advertises: the IP address inside
 * the port's RoCE GID (the NIC's own interface, reachable wherever RDMA
 * traffic is), else the first non-loopback IPv4 interface address, else
 * loopback. `source` says which, for describe().
 */
sockaddr_storage side_channel_host(const PortChoice &choice, std::string *source);

/** A non-blocking listening socket bound to `host` (port chosen by the kernel); -1 with `why`. */
int open_listener(const sockaddr_storage &host, sockaddr_storage *bound, std::string *why);

/** Starts a non-blocking connect; -1 with `why` when it fails at once. */
int start_connect(const sockaddr_storage &peer, std::string *why);

/** The pending error of a connecting socket (SO_ERROR), 0 once connected. */
int socket_error(int fd);

/**
 * Reads into buf[*filled..size) without blocking. Returns 1 when the buffer
 * is full, 0 when more is needed, -1 on end of stream or an error (`why`).
 */
int read_some(int fd, uint8_t *buf, size_t size, size_t *filled, std::string *why);

/**
 * Sends one handshake message. They are tiny and each direction carries at
 * most two, so a fresh socket's send buffer always takes them whole; a
 * short write is reported as a failure rather than buffered.
 */
bool send_message(int fd, const uint8_t *buf, size_t size, std::string *why);

}  // namespace afmesh::ibverbs
