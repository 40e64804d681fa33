// SPDX-License-Identifier: Apache-2.0
// What the multi-process tests need to play a stranger at a node's ports:
// the node's listening ports and open descriptors, found from /proc as an
// outsider would; a plain socket speaking the tcp transport's (public)
// framing without any cluster key; and bounded polling for a condition.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cluster_harness.h"
#include "engine/wire.h"
#include "hold_point.h"
#include "transports/tcp/wire.h"

namespace afmesh {

/** Polls `done` until it holds or `limit` passes (a bound on the test, not a timing assumption). */
inline bool eventually(const std::function<bool()> &done,
                       std::chrono::milliseconds limit = std::chrono::seconds(60)) {
    for (const auto deadline = Clock::now() + limit; !done();) {
        if (Clock::now() >= deadline) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return true;
}

inline size_t open_descriptors(pid_t pid) {
    std::error_code ec;
    auto entries = std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec);
    return ec ? 0 : static_cast<size_t>(std::distance(entries, std::filesystem::directory_iterator()));
}

// The TCP ports `pid` listens on, as `ss -ltnp` finds them: its socket
// inodes, looked up among the listening sockets of its network namespace.
inline std::vector<uint16_t> listening_ports(pid_t pid) {
    const std::string proc = "/proc/" + std::to_string(pid);
    std::set<std::string> inodes;
    std::error_code ec;
    for (const auto &fd : std::filesystem::directory_iterator(proc + "/fd", ec)) {
        const std::string target = std::filesystem::read_symlink(fd.path(), ec).string();
        if (target.rfind("socket:[", 0) == 0) inodes.insert(target.substr(8, target.size() - 9));
    }
    std::vector<uint16_t> ports;
    for (const char *table : {"/net/tcp", "/net/tcp6"}) {
        std::ifstream in(proc + table);
        std::string line;
        std::getline(in, line);  // header
        while (std::getline(in, line)) {
            std::istringstream fields(line);
            std::string slot, local, remote, state, queues, timer, retransmits, uid, timeout, inode;
            fields >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid >> timeout >> inode;
            if (state == "0A" && inodes.count(inode))
                ports.push_back(static_cast<uint16_t>(std::stoul(local.substr(local.find(':') + 1), nullptr, 16)));
        }
    }
    return ports;
}

// A stranger's plain socket to a server's tcp data port: it speaks the tcp
// transport's framing, which is public, but holds no cluster key.
class Stranger {
public:
    explicit Stranger(uint16_t port) {
        fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        timeval limit{60, 0};  // a read that gets nothing fails the test instead of hanging it
        setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
        sockaddr_in to{};
        to.sin_family = AF_INET;
        to.sin_port = htons(port);
        to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        connected_ = connect(fd_, reinterpret_cast<sockaddr *>(&to), sizeof to) == 0;
    }
    ~Stranger() { close(); }
    Stranger(const Stranger &) = delete;
    Stranger &operator=(const Stranger &) = delete;

    bool connected() const { return connected_; }
    void close() {
        if (fd_ >= 0) ::close(fd_);
        fd_ = -1;
    }

    /** Sends raw bytes; false once the server has closed the connection. */
    bool send_bytes(const std::vector<uint8_t> &bytes) {
        return ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size());
    }
    /** A tcp-transport frame: header, then `payload`. */
    bool send_frame(tcp::FrameHeader header, const std::vector<uint8_t> &payload) {
        header.length = payload.size();
        std::vector<uint8_t> bytes(tcp::kFrameHeaderSize);
        tcp::encode_frame_header(header, bytes.data());
        bytes.insert(bytes.end(), payload.begin(), payload.end());
        return send_bytes(bytes);
    }
    bool send_message(const std::vector<uint8_t> &message) {
        tcp::FrameHeader h;
        h.type = tcp::FrameType::kSend;
        return send_frame(h, message);
    }
    /** The next message the server sends, or nothing once it has closed the connection. */
    std::optional<std::vector<uint8_t>> next_message() {
        std::vector<uint8_t> header(tcp::kFrameHeaderSize);
        if (!read_exactly(header)) return std::nullopt;
        tcp::FrameHeader h;
        tcp::Reason why;
        if (!tcp::decode_frame_header(header.data(), &h, &why) || h.type != tcp::FrameType::kSend) return std::nullopt;
        std::vector<uint8_t> payload(h.length);
        if (!read_exactly(payload)) return std::nullopt;
        return payload;
    }
    /** Whether the server has closed the connection (reads until EOF or a reset). */
    bool closed_by_server() {
        uint8_t byte;
        for (;;) {
            const ssize_t n = recv(fd_, &byte, 1, 0);
            if (n == 0 || (n < 0 && errno == ECONNRESET)) return true;
            if (n < 0) return false;  // SO_RCVTIMEO passed: still open
        }
    }

private:
    bool read_exactly(std::vector<uint8_t> &buffer) {
        for (size_t got = 0; got < buffer.size();) {
            const ssize_t n = recv(fd_, buffer.data() + got, buffer.size() - got, 0);
            if (n <= 0) return false;
            got += static_cast<size_t>(n);
        }
        return true;
    }

    int fd_ = -1;
    bool connected_ = false;
};

inline std::vector<uint8_t> forged_ident(int32_t worker, int32_t server) {
    wire::Ident ident;
    ident.worker_rank = worker;
    ident.server_rank = server;
    ident.nonce.fill(0x42);
    std::vector<uint8_t> out;
    wire::encode(ident, out);
    return out;
}

inline uint16_t data_port(Cluster &c, const std::string &server) {
    std::vector<uint16_t> ports;
    EXPECT_TRUE(eventually([&] { return !(ports = listening_ports(c.pid_of(server))).empty(); }))
        << server << " never listened";
    EXPECT_EQ(ports.size(), 1u) << server << " listens on more than its data port";
    return ports.empty() ? 0 : ports[0];
}

inline size_t lines_with(const std::string &text, const std::string &what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
}

/**
 * A running 1 x 1 cluster whose server and worker (af_test_node echo) wait,
 * past their first barrier, until release(): strangers can then visit a
 * formed cluster with nobody waiting on a peer, and the nodes run to the
 * end afterwards, checking every byte.
 */
class HeldCluster {
public:
    HeldCluster() {
        c.add({"scheduler", -1, {"echo"}, {}});
        c.add({"server", 0, server_.held({"echo"}), {}});
        c.add({"worker", 0, worker_.held({"echo"}), {}});
    }
    /** Waits until both nodes hold; false when that takes a minute. */
    bool ready() {
        return server_.ok() && worker_.ok() && server_.wait_ready(std::chrono::seconds(60)) &&
               worker_.wait_ready(std::chrono::seconds(60));
    }
    void release() {
        server_.release();
        worker_.release();
    }

    Cluster c{1, 1};

private:
    HoldPoint server_, worker_;
};

/**
 * A visit of strangers to one port: first a crowd of 200 connections opened
 * and closed at once, then one stranger after another (next()), who stay
 * connected until taken (lingering()) to watch the node close them.
 */
class Visit {
public:
    explicit Visit(uint16_t port) : port_(port) {
        std::vector<std::unique_ptr<Stranger>> crowd;
        for (int i = 0; i < 200; ++i) crowd.push_back(std::make_unique<Stranger>(port));
    }
    Stranger &next() {
        lingering_.push_back(std::make_unique<Stranger>(port_));
        return *lingering_.back();
    }
    std::vector<std::unique_ptr<Stranger>> lingering() { return std::move(lingering_); }

private:
    const uint16_t port_;
    std::vector<std::unique_ptr<Stranger>> lingering_;
};

/**
 * Strangers at a server's data port: the crowd, then garbage, a message
 * announcing a terabyte, a truncated message, silence, and an IDENT never
 * followed by a PROOF; those five are returned, still connected.
 */
inline std::vector<std::unique_ptr<Stranger>> visit_data_port(uint16_t port) {
    Visit visit(port);
    auto stranger = [&]() -> Stranger & { return visit.next(); };
    std::vector<uint8_t> garbage(1024);
    for (size_t i = 0; i < garbage.size(); ++i) garbage[i] = static_cast<uint8_t>(i * 131 + 7);
    stranger().send_bytes(garbage);
    std::vector<uint8_t> header(tcp::kFrameHeaderSize);
    tcp::encode_frame_header({tcp::FrameType::kSend, 0, 0, 0, uint64_t{1} << 40}, header.data());
    stranger().send_bytes(header);
    tcp::encode_frame_header({tcp::FrameType::kSend, 0, 0, 0, 100}, header.data());
    header.resize(header.size() + 10, 0);
    stranger().send_bytes(header);
    stranger();  // silent
    stranger().send_message(forged_ident(0, 0));
    return visit.lingering();
}

}  // namespace afmesh
