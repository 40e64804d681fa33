// SPDX-License-Identifier: Apache-2.0
// The tcp module against a hostile peer: a raw socket sends hand-crafted
// frames to the module's listen address. Every violation must fail that
// connection with EV_CONN_ERROR and a reason, leave every byte outside the
// registered region (and, for refused writes, inside it) untouched, and
// leave the context serving other connections. Run under AddressSanitizer.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <random>
#include <string>

#include "log.h"
#include "module_params.h"
#include "transport_fixture.h"
#include "transports/tcp/address.h"
#include "transports/tcp/wire.h"

namespace afmesh::test {
namespace {

using tcp::FrameHeader;
using tcp::FrameType;
using tcp::kFrameHeaderSize;

constexpr size_t kGuard = 4096, kRegion = 4096;
constexpr uint8_t kGuardByte = 0xa5, kPayloadByte = 0xee;

/** A plain blocking socket connected to the module, and the module's end of it. */
struct RawPeer {
    int fd = -1;
    afmesh_net_conn *conn = nullptr;
    ~RawPeer() {
        if (fd >= 0) close(fd);
    }

    void send_bytes(const void *bytes, size_t size) {
        const auto *p = static_cast<const uint8_t *>(bytes);
        while (size > 0) {
            const ssize_t n = ::send(fd, p, size, MSG_NOSIGNAL);
            ASSERT_GT(n, 0) << "raw send: " << strerror(errno);
            p += n;
            size -= static_cast<size_t>(n);
        }
    }
    void send_bytes(const std::vector<uint8_t> &bytes) { send_bytes(bytes.data(), bytes.size()); }
    /** Closes with a TCP reset instead of an orderly FIN. */
    void reset() {
        linger abort{1, 0};
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &abort, sizeof abort);
        close(fd);
        fd = -1;
    }
};

std::vector<uint8_t> header_bytes(const FrameHeader &header) {
    std::vector<uint8_t> bytes(kFrameHeaderSize);
    tcp::encode_frame_header(header, bytes.data());
    return bytes;
}

FrameHeader write_header(uint64_t key, uint64_t offset, uint64_t length, uint32_t imm = 0,
                         FrameType type = FrameType::kWriteImm) {
    FrameHeader h;
    h.type = type;
    h.key = key;
    h.offset = offset;
    h.length = length;
    h.imm = imm;
    return h;
}

/**
 * A WRITE frame (a write_imm_v segment before the last): placed like a
 * WRITE_IMM, under the same checks, and announced by none.
 */
FrameHeader plain_write_header(uint64_t key, uint64_t offset, uint64_t length) {
    return write_header(key, offset, length, 0, FrameType::kWrite);
}

/** The frame types that place a payload in a region: each refusal below holds for both. */
constexpr FrameType kWriteTypes[] = {FrameType::kWriteImm, FrameType::kWrite};

std::string type_trace(FrameType type) { return "frame type " + std::to_string(static_cast<int>(type)); }

std::vector<uint8_t> frame(const FrameHeader &header, uint8_t fill = kPayloadByte) {
    std::vector<uint8_t> bytes = header_bytes(header);
    bytes.resize(kFrameHeaderSize + header.length, fill);
    return bytes;
}

class TcpMaliciousFrames : public ::testing::Test {
protected:
    void SetUp() override {
        for (ModuleRecord &record : modules_of_kind(AFMESH_MODULE_TRANSPORT)) {
            if (record.name != "tcp") continue;
            Status s = NetEndpoint::open(record, &endpoint_);
            ASSERT_TRUE(s) << s.to_string();
        }
        ASSERT_NE(endpoint_, nullptr) << "libafmesh_net_tcp.so is not on the module search path";
        memory_.assign(kGuard + kRegion + kGuard, kGuardByte);
        memset(region(), 0, kRegion);
        afmesh_net_mem mem{sizeof(afmesh_net_mem), AFMESH_MEM_HOST, -1, -1, 0};
        ASSERT_EQ(ops().mem_register(ctx(), region(), kRegion, &mem, AFMESH_NET_ACCESS_REMOTE_WRITE, &mr_, &rkey_),
                  AFMESH_HAL_OK)
            << take_module_error();
        const std::vector<uint8_t> &blob = endpoint_->address();
        tcp::Reason why;
        ASSERT_TRUE(tcp::decode_address(blob.data(), blob.size(), &address_, &why)) << why.text;
    }

    void TearDown() override {
        if (mr_) {
            EXPECT_EQ(ops().mem_deregister(ctx(), mr_), AFMESH_HAL_OK);
        }
    }

    const afmesh_net_ops &ops() const { return endpoint_->ops(); }
    void *ctx() const { return endpoint_->ctx(); }
    uint8_t *region() { return memory_.data() + kGuard; }

    std::unique_ptr<RawPeer> connect_raw() {
        auto peer = std::make_unique<RawPeer>();
        peer->fd = socket(address_.storage.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        EXPECT_GE(peer->fd, 0);
        EXPECT_EQ(::connect(peer->fd, address_.get(), address_.length), 0) << strerror(errno);
        EXPECT_TRUE(poll_until(
            {endpoint_.get()}, [&] { return ops().accept(ctx(), &peer->conn) == AFMESH_HAL_OK; },
            "the module to accept the raw peer"));
        return peer;
    }

    // Waits for the module to fail `peer`'s connection with `status` and a
    // reason mentioning `words`; no immediate may have come from it.
    void expect_failure(RawPeer &peer, int status, const std::string &words) {
        ASSERT_TRUE(poll_until(
            {endpoint_.get()}, [&] { return endpoint_->count(AFMESH_NET_EV_CONN_ERROR, peer.conn) == 1; },
            "the module to fail the connection"));
        const auto error = endpoint_->take(AFMESH_NET_EV_CONN_ERROR, peer.conn);
        EXPECT_EQ(error->status, status) << error->reason;
        EXPECT_NE(error->reason.find(words), std::string::npos) << "reason: " << error->reason;
        EXPECT_EQ(endpoint_->count(AFMESH_NET_EV_IMM, peer.conn), 0u) << "a refused frame delivered an immediate";
        EXPECT_EQ(ops().close(ctx(), peer.conn), AFMESH_HAL_OK);
    }

    void expect_guards_intact() {
        for (size_t i = 0; i < kGuard; ++i) {
            ASSERT_EQ(memory_[i], kGuardByte) << "the guard before the region was written at " << i;
            ASSERT_EQ(memory_[kGuard + kRegion + i], kGuardByte) << "the guard after the region was written at " << i;
        }
    }

    void expect_region_untouched(size_t from = 0) {
        for (size_t i = from; i < kRegion; ++i) ASSERT_EQ(region()[i], 0) << "region byte " << i << " was written";
    }

    // After an attack, a well-behaved peer is still served.
    void expect_still_serving() {
        auto peer = connect_raw();
        std::vector<uint8_t> good = frame(write_header(rkey_.key, 100, 16, 77), 0x42);
        peer->send_bytes(good);
        ASSERT_TRUE(poll_until(
            {endpoint_.get()}, [&] { return endpoint_->count(AFMESH_NET_EV_IMM, peer->conn) == 1; },
            "a valid write after the attack"));
        EXPECT_EQ(endpoint_->take(AFMESH_NET_EV_IMM, peer->conn)->imm, 77u);
        for (size_t i = 100; i < 116; ++i) EXPECT_EQ(region()[i], 0x42);
        memset(region() + 100, 0, 16);
        EXPECT_EQ(ops().close(ctx(), peer->conn), AFMESH_HAL_OK);
    }

    // The whole check for an attack that must be refused before any byte lands.
    void expect_refused(const std::vector<uint8_t> &attack, int status, const std::string &words) {
        auto peer = connect_raw();
        peer->send_bytes(attack);
        expect_failure(*peer, status, words);
        expect_guards_intact();
        expect_region_untouched();
        expect_still_serving();
    }

    std::unique_ptr<NetEndpoint> endpoint_;
    std::vector<uint8_t> memory_;
    afmesh_net_mr *mr_ = nullptr;
    afmesh_net_rkey rkey_{};
    tcp::SocketAddress address_;
};

TEST_F(TcpMaliciousFrames, AcceptsAWellFormedWrite) { expect_still_serving(); }

TEST_F(TcpMaliciousFrames, RefusesBadMagic) {
    std::vector<uint8_t> attack = frame(write_header(rkey_.key, 0, 8));
    memcpy(attack.data(), "GET ", 4);
    expect_refused(attack, AFMESH_HAL_PEER_FAILED, "magic");
}

TEST_F(TcpMaliciousFrames, RefusesAnotherProtocolVersion) {
    std::vector<uint8_t> attack = frame(write_header(rkey_.key, 0, 8));
    attack[4] = tcp::kProtocolVersion + 1;
    expect_refused(attack, AFMESH_HAL_PEER_FAILED, "version");
}

TEST_F(TcpMaliciousFrames, RefusesUnknownFrameTypes) {
    std::vector<uint8_t> attack = frame(write_header(rkey_.key, 0, 8));
    attack[5] = 0x7f;
    expect_refused(attack, AFMESH_HAL_PEER_FAILED, "type");
}

TEST_F(TcpMaliciousFrames, RefusesNonZeroReservedFields) {
    for (size_t at : {size_t{6}, size_t{12}}) {
        SCOPED_TRACE("reserved byte " + std::to_string(at));
        std::vector<uint8_t> attack = frame(write_header(rkey_.key, 0, 8));
        attack[at] = 1;
        expect_refused(attack, AFMESH_HAL_PEER_FAILED, "reserved");
    }
}

TEST_F(TcpMaliciousFrames, RefusesUnknownKeys) {
    for (FrameType type : kWriteTypes) {
        SCOPED_TRACE(type_trace(type));
        expect_refused(frame(write_header(rkey_.key + 1000, 0, 8, 0, type)), AFMESH_HAL_ACCESS, "unknown region");
    }
}

TEST_F(TcpMaliciousFrames, RefusesOffsetsPastTheRegion) {
    for (FrameType type : kWriteTypes) {
        SCOPED_TRACE(type_trace(type));
        expect_refused(frame(write_header(rkey_.key, kRegion + 1, 0, 0, type)), AFMESH_HAL_ACCESS, "outside");
        expect_refused(frame(write_header(rkey_.key, kRegion, 1, 0, type)), AFMESH_HAL_ACCESS, "outside");
    }
}

TEST_F(TcpMaliciousFrames, RefusesLengthsPastTheRegion) {
    for (FrameType type : kWriteTypes) {
        SCOPED_TRACE(type_trace(type));
        expect_refused(frame(write_header(rkey_.key, 0, kRegion + 1, 0, type)), AFMESH_HAL_ACCESS, "outside");
        expect_refused(frame(write_header(rkey_.key, kRegion - 8, 9, 0, type)), AFMESH_HAL_ACCESS, "outside");
    }
}

TEST_F(TcpMaliciousFrames, RefusesOffsetPlusLengthOverflow) {
    for (FrameType type : kWriteTypes) {
        SCOPED_TRACE(type_trace(type));
        // offset + length wraps to 8: inside the region if the check overflowed.
        std::vector<uint8_t> attack = header_bytes(write_header(rkey_.key, 16, UINT64_MAX - 7, 0, type));
        attack.resize(attack.size() + 64, kPayloadByte);
        expect_refused(attack, AFMESH_HAL_ACCESS, "outside");
    }
}

TEST_F(TcpMaliciousFrames, RefusesWritesIntoALocalOnlyRegion) {
    std::vector<uint8_t> local(64, 0);
    afmesh_net_mem mem{sizeof(afmesh_net_mem), AFMESH_MEM_HOST, -1, -1, 0};
    afmesh_net_mr *mr = nullptr;
    afmesh_net_rkey rkey{};
    ASSERT_EQ(ops().mem_register(ctx(), local.data(), local.size(), &mem, AFMESH_NET_ACCESS_LOCAL, &mr, &rkey),
              AFMESH_HAL_OK);
    for (FrameType type : kWriteTypes) {
        SCOPED_TRACE(type_trace(type));
        expect_refused(frame(write_header(rkey.key, 0, 8, 0, type)), AFMESH_HAL_ACCESS,
                       "does not accept remote writes");
    }
    EXPECT_EQ(std::count(local.begin(), local.end(), 0), 64);
    EXPECT_EQ(ops().mem_deregister(ctx(), mr), AFMESH_HAL_OK);
}

TEST_F(TcpMaliciousFrames, RefusesWriteFramesCarryingAnImmediate) {
    FrameHeader header = plain_write_header(rkey_.key, 0, 8);
    header.imm = 1;
    expect_refused(frame(header), AFMESH_HAL_PEER_FAILED, "write frame carries an immediate");
}

// A WRITE lands and reports nothing; the WRITE_IMM after it announces both.
TEST_F(TcpMaliciousFrames, AWriteFrameIsAnnouncedByTheWriteImmAfterIt) {
    auto peer = connect_raw();
    peer->send_bytes(frame(plain_write_header(rkey_.key, 0, 64), 0x11));
    ASSERT_TRUE(poll_until(
        {endpoint_.get()}, [&] { return region()[63] == 0x11; }, "the WRITE frame's payload to land"));
    for (int round = 0; round < 50; ++round) endpoint_->poll_once();
    EXPECT_EQ(endpoint_->count(AFMESH_NET_EV_IMM, peer->conn), 0u) << "a WRITE frame delivered an immediate";
    peer->send_bytes(frame(write_header(rkey_.key, 1000, 16, 21), 0x22));
    ASSERT_TRUE(poll_until(
        {endpoint_.get()}, [&] { return endpoint_->count(AFMESH_NET_EV_IMM, peer->conn) == 1; }, "the WRITE_IMM"));
    EXPECT_EQ(endpoint_->take(AFMESH_NET_EV_IMM, peer->conn)->imm, 21u);
    for (size_t i = 0; i < 64; ++i) ASSERT_EQ(region()[i], 0x11) << "WRITE byte " << i;
    for (size_t i = 1000; i < 1016; ++i) ASSERT_EQ(region()[i], 0x22) << "WRITE_IMM byte " << i;
    expect_guards_intact();
    EXPECT_EQ(ops().close(ctx(), peer->conn), AFMESH_HAL_OK);
}

// write_imm_v's failure on the wire: a refused segment fails the connection
// before the WRITE_IMM behind it, valid as it is, can deliver its immediate.
TEST_F(TcpMaliciousFrames, ARefusedWriteFrameWithholdsTheImmediateBehindIt) {
    std::vector<uint8_t> stream = frame(plain_write_header(rkey_.key, kRegion, 8));
    const std::vector<uint8_t> last = frame(write_header(rkey_.key, 0, 16, 33), 0x44);
    stream.insert(stream.end(), last.begin(), last.end());
    expect_refused(stream, AFMESH_HAL_ACCESS, "outside");
}

TEST_F(TcpMaliciousFrames, RefusesOversizeMessages) {
    FrameHeader message;
    message.type = FrameType::kSend;
    message.length = tcp::kMaxSendSize + 1;
    expect_refused(header_bytes(message), AFMESH_HAL_PEER_FAILED, "exceeds");
}

TEST_F(TcpMaliciousFrames, RefusesMessagesCarryingWriteFields) {
    FrameHeader message;
    message.type = FrameType::kSend;
    message.key = rkey_.key;
    message.length = 8;
    expect_refused(frame(message), AFMESH_HAL_PEER_FAILED, "send frame carries write fields");
}

TEST_F(TcpMaliciousFrames, RefusesGarbage) {
    std::mt19937 random(12345);
    std::vector<uint8_t> garbage(4096);
    for (uint8_t &b : garbage) b = static_cast<uint8_t>(random());
    expect_refused(garbage, AFMESH_HAL_PEER_FAILED, "magic");
}

TEST_F(TcpMaliciousFrames, ReportsAHeaderCutShort) {
    auto peer = connect_raw();
    const std::vector<uint8_t> header = header_bytes(write_header(rkey_.key, 0, 8));
    peer->send_bytes(header.data(), 20);
    close(peer->fd);
    peer->fd = -1;
    expect_failure(*peer, AFMESH_HAL_PEER_FAILED, "inside a frame header");
    expect_guards_intact();
    expect_region_untouched();
    expect_still_serving();
}

TEST_F(TcpMaliciousFrames, ReportsAPayloadCutShort) {
    auto peer = connect_raw();
    const std::vector<uint8_t> attack = frame(write_header(rkey_.key, 0, 1000));
    peer->send_bytes(attack.data(), kFrameHeaderSize + 500);
    close(peer->fd);
    peer->fd = -1;
    expect_failure(*peer, AFMESH_HAL_PEER_FAILED, "short of the end");
    expect_guards_intact();
    expect_region_untouched(500);  // the first 500 bytes were in bounds and may have landed
    memset(region(), 0, kRegion);
    expect_still_serving();
}

TEST_F(TcpMaliciousFrames, ReportsAResetInTheMiddleOfAFrame) {
    auto peer = connect_raw();
    const std::vector<uint8_t> attack = frame(write_header(rkey_.key, 0, 1000));
    peer->send_bytes(attack.data(), kFrameHeaderSize + 500);
    peer->reset();
    expect_failure(*peer, AFMESH_HAL_PEER_FAILED, "");
    expect_guards_intact();
    expect_region_untouched(500);
    memset(region(), 0, kRegion);
    expect_still_serving();
}

TEST_F(TcpMaliciousFrames, StopsWritingARegionDeregisteredMidFrame) {
    auto peer = connect_raw();
    const std::vector<uint8_t> attack = frame(write_header(rkey_.key, 0, 2048));
    peer->send_bytes(attack.data(), kFrameHeaderSize + 1024);
    ASSERT_TRUE(poll_until(
        {endpoint_.get()}, [&] { return region()[1023] == kPayloadByte; }, "the first half of the payload to land"));
    ASSERT_EQ(ops().mem_deregister(ctx(), mr_), AFMESH_HAL_OK);
    mr_ = nullptr;
    peer->send_bytes(attack.data() + kFrameHeaderSize + 1024, 1024);
    expect_failure(*peer, AFMESH_HAL_ACCESS, "deregistered");
    expect_guards_intact();
    expect_region_untouched(1024);
}

TEST_F(TcpMaliciousFrames, DeliversValidFramesBeforeABadOne) {
    auto peer = connect_raw();
    std::vector<uint8_t> stream = frame(write_header(rkey_.key, 0, 4, 5), 0x11);
    std::vector<uint8_t> bad = frame(write_header(rkey_.key, 0, 4, 6), 0x22);
    bad[0] ^= 0xff;
    stream.insert(stream.end(), bad.begin(), bad.end());
    peer->send_bytes(stream);
    ASSERT_TRUE(poll_until(
        {endpoint_.get()}, [&] { return endpoint_->count(AFMESH_NET_EV_CONN_ERROR, peer->conn) == 1; },
        "the bad frame to be refused"));
    ASSERT_EQ(endpoint_->count(AFMESH_NET_EV_IMM, peer->conn), 1u);
    EXPECT_EQ(endpoint_->take(AFMESH_NET_EV_IMM, peer->conn)->imm, 5u);
    expect_failure(*peer, AFMESH_HAL_PEER_FAILED, "magic");
    for (size_t i = 0; i < 4; ++i) EXPECT_EQ(region()[i], 0x11);
    expect_guards_intact();
}

TEST_F(TcpMaliciousFrames, ReassemblesAFrameSentOneByteAtATime) {
    auto peer = connect_raw();
    const std::vector<uint8_t> trickle = frame(write_header(rkey_.key, 200, 64, 9), 0x33);
    for (uint8_t byte : trickle) {
        peer->send_bytes(&byte, 1);
        endpoint_->poll_once();
    }
    ASSERT_TRUE(poll_until(
        {endpoint_.get()}, [&] { return endpoint_->count(AFMESH_NET_EV_IMM, peer->conn) == 1; }, "the trickled frame"));
    EXPECT_EQ(endpoint_->take(AFMESH_NET_EV_IMM, peer->conn)->imm, 9u);
    for (size_t i = 200; i < 264; ++i) EXPECT_EQ(region()[i], 0x33);
    expect_guards_intact();
}

TEST_F(TcpMaliciousFrames, SurvivesManyHostilePeersAtOnce) {
    constexpr int kPeers = 32;
    std::vector<std::unique_ptr<RawPeer>> peers;
    for (int i = 0; i < kPeers; ++i) peers.push_back(connect_raw());
    std::mt19937 random(7);
    for (auto &peer : peers) {
        std::vector<uint8_t> garbage(1 + random() % 512);
        for (uint8_t &b : garbage) b = static_cast<uint8_t>(random());
        peer->send_bytes(garbage);
        peer.reset();  // an abrupt close on top
    }
    ASSERT_TRUE(poll_until(
        {endpoint_.get()}, [&] { return endpoint_->count(AFMESH_NET_EV_CONN_ERROR) == size_t{kPeers}; },
        "every hostile connection to fail"));
    while (auto error = endpoint_->take(AFMESH_NET_EV_CONN_ERROR)) {
        EXPECT_EQ(error->status, AFMESH_HAL_PEER_FAILED) << error->reason;
        EXPECT_EQ(ops().close(ctx(), error->conn), AFMESH_HAL_OK);
    }
    expect_guards_intact();
    expect_region_untouched();
    expect_still_serving();
}

// close() ends a connection with a FIN after what the socket already holds,
// even when input the module never read is waiting: a plain close(2) would
// make the kernel answer with a reset and throw away what it still holds for
// the peer (over a lossy link: a last response and the BYE behind it).
TEST_F(TcpMaliciousFrames, CloseWithUnreadInputEndsInAFinNotAReset) {
    auto peer = connect_raw();
    // Input the module never reads: nothing polls it before close().
    peer->send_bytes(frame(write_header(rkey_.key, 0, 16, 5), 0x11));
    const std::vector<uint8_t> message(1024, 0x22);
    ASSERT_EQ(ops().send(ctx(), peer->conn, message.data(), message.size(), 0, 0), AFMESH_HAL_OK) << take_module_error();
    ASSERT_EQ(ops().close(ctx(), peer->conn), AFMESH_HAL_OK);
    std::vector<uint8_t> got(kFrameHeaderSize + message.size() + 1);
    size_t have = 0;
    ssize_t n;
    while ((n = recv(peer->fd, got.data() + have, got.size() - have, 0)) > 0) have += static_cast<size_t>(n);
    EXPECT_EQ(n, 0) << "the connection ended with " << strerror(errno) << ", not an orderly end of stream";
    EXPECT_EQ(have, kFrameHeaderSize + message.size()) << "the message sent before close() did not arrive whole";
}

}  // namespace
}  // namespace afmesh::test
