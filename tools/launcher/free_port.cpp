// SPDX-License-Identifier: Apache-2.0
#include "free_port.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace afmesh {

std::string with_free_port(const std::string &address) {
    size_t colon = address.rfind(':');
    if (colon == std::string::npos || address.substr(colon + 1) != "0") return address;
    std::string host = address.substr(0, colon);
    std::string bare = host.size() > 1 && host.front() == '[' ? host.substr(1, host.size() - 2) : host;
    addrinfo hints{}, *res = nullptr;
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(bare.c_str(), "0", &hints, &res) != 0) return address;
    int fd = socket(res->ai_family, SOCK_STREAM, 0);
    sockaddr_storage bound{};
    socklen_t len = sizeof bound;
    int port = 0;
    if (fd >= 0 && bind(fd, res->ai_addr, res->ai_addrlen) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr *>(&bound), &len) == 0)
        port = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6 *>(&bound)->sin6_port
                                                 : reinterpret_cast<sockaddr_in *>(&bound)->sin_port);
    if (fd >= 0) close(fd);
    freeaddrinfo(res);
    return port ? host + ":" + std::to_string(port) : address;
}


}  // namespace afmesh
