// SPDX-License-Identifier: Apache-2.0
// The ibverbs module's failure handling and port selection, through the
// HAL, against the in-process verbs emulation (AFMESH_IBVERBS_LIBRARY):
// access violations, RNR, dead and unreachable peers, flushes, malformed
// handshakes, and device/port/GID discovery over emulated device lists.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <string>

#include "log.h"
#include "module_params.h"
#include "transport_fixture.h"
#include "transports/ibverbs/limits.h"
#include "transports/ibverbs/wire.h"
#include "verbs_emulation.h"

namespace afmesh::test {
namespace {

constexpr uint32_t kLocal = AFMESH_NET_ACCESS_LOCAL, kRemoteWrite = AFMESH_NET_ACCESS_REMOTE_WRITE;

ModuleRecord ibverbs_record() {
    for (const ModuleRecord &r : modules_of_kind(AFMESH_MODULE_TRANSPORT))
        if (r.name == "ibverbs") return r;
    ADD_FAILURE() << "the ibverbs module was not found";
    return {};
}

class IbverbsTest : public ::testing::Test {
protected:
    void SetUp() override { afmesh_verbs_emu_reset(); }
    void TearDown() override {
        EXPECT_EQ(afmesh_verbs_emu_cq_overflows(), 0u) << "a completion queue overflowed";
        afmesh_verbs_emu_reset();
    }

    std::unique_ptr<NetEndpoint> open() {
        std::unique_ptr<NetEndpoint> endpoint;
        Status s = NetEndpoint::open(ibverbs_record(), &endpoint);
        EXPECT_TRUE(s) << s.to_string();
        return endpoint;
    }

    /** What init() says, NOT_PRESENT and errors included. */
    Status open_status() {
        std::unique_ptr<NetEndpoint> endpoint;
        return NetEndpoint::open(ibverbs_record(), &endpoint);
    }

    static std::string describe(NetEndpoint &endpoint) {
        char text[8192] = "";
        EXPECT_EQ(endpoint.ops().describe(endpoint.ctx(), text, sizeof text), AFMESH_HAL_OK);
        return text;
    }

    /** Writes `bytes` from the start of `src`. */
    static int write(NetEndpoint &from, afmesh_net_conn *conn, RegisteredBuffer &src, size_t bytes,
                     const afmesh_net_rkey &dst, uint64_t offset, uint32_t imm, uint32_t flags = 0, uint64_t cookie = 0) {
        return from.ops().write_imm(from.ctx(), conn, src.data(), bytes, src.mr(), &dst, offset, imm, flags, cookie);
    }

    // Polls a fixed number of rounds so events that must not exist get every chance to show.
    static void settle(const Endpoints &endpoints) {
        for (int round = 0; round < 50; ++round)
            for (NetEndpoint *e : endpoints) e->poll_once();
    }
};

// --- failures on the data path --------------------------------------------------

TEST_F(IbverbsTest, RemoteAccessViolationFailsOnlyThatConnection) {
    auto a = open(), b = open();
    ASSERT_TRUE(a && b);
    Link bad, good;
    ASSERT_TRUE(connect(*a, *b, &bad));
    ASSERT_TRUE(connect(*a, *b, &good));
    RegisteredBuffer src(*a, 4096, kLocal), dst(*b, 4096, kRemoteWrite);
    ASSERT_TRUE(src.registered() && dst.registered());
    fill_pattern(dst.data(), dst.size(), 1);
    fill_pattern(src.data(), src.size(), 2);
    // 1 KiB starting 3 KiB + 1 into a 4 KiB region: past its end.
    ASSERT_EQ(write(*a, bad.client, src, 1024, dst.rkey(), 3073, 7), AFMESH_HAL_OK);
    ASSERT_TRUE(poll_until({a.get(), b.get()}, [&] { return a->count(AFMESH_NET_EV_CONN_ERROR, bad.client) == 1; },
                           "the violation to fail the connection"));
    const auto error = a->take(AFMESH_NET_EV_CONN_ERROR, bad.client);
    EXPECT_EQ(error->status, AFMESH_HAL_ACCESS);
    EXPECT_NE(error->reason.find("remote access error"), std::string::npos) << error->reason;
    EXPECT_TRUE(holds_pattern(dst.data(), dst.size(), 1, 0, "the region"));

    ASSERT_EQ(write(*a, good.client, src, 64, dst.rkey(), 0, 8), AFMESH_HAL_OK) << take_module_error();
    ASSERT_TRUE(poll_until({a.get(), b.get()}, [&] { return b->count(AFMESH_NET_EV_IMM, good.server) == 1; },
                           "a write on the other connection"));
    EXPECT_EQ(b->take(AFMESH_NET_EV_IMM, good.server)->imm, 8u);
    EXPECT_TRUE(holds_pattern(dst.data(), 64, 2, 0, "the good write"));
    settle({a.get(), b.get()});
    EXPECT_EQ(a->count(AFMESH_NET_EV_CONN_ERROR, good.client), 0u);
    EXPECT_EQ(b->count(AFMESH_NET_EV_CONN_ERROR, good.server), 0u);
    EXPECT_EQ(b->count(AFMESH_NET_EV_IMM, bad.server), 0u) << "a refused write delivered its immediate";
}

TEST_F(IbverbsTest, ErrorFlushesOutstandingWorkWithoutReportingIt) {
    auto a = open(), b = open();
    ASSERT_TRUE(a && b);
    Link link;
    ASSERT_TRUE(connect(*a, *b, &link));
    RegisteredBuffer src(*a, 4096, kLocal), dst(*b, 4096, kRemoteWrite);
    ASSERT_TRUE(src.registered() && dst.registered());
    afmesh_net_rkey wrong = dst.rkey();
    wrong.key ^= 0x5555;  // no such region
    ASSERT_EQ(write(*a, link.client, src, 8, wrong, 0, 1), AFMESH_HAL_OK);
    for (uint32_t i = 0; i < 5; ++i)  // queued behind the failing write: flushed
        ASSERT_EQ(write(*a, link.client, src, 8, dst.rkey(), 8 * i, 10 + i, AFMESH_NET_SIGNAL, i), AFMESH_HAL_OK);
    ASSERT_TRUE(poll_until({a.get(), b.get()}, [&] { return a->count(AFMESH_NET_EV_CONN_ERROR) == 1; }, "the error"));
    settle({a.get(), b.get()});
    EXPECT_EQ(a->count(AFMESH_NET_EV_CONN_ERROR), 1u) << "one error per connection";
    EXPECT_EQ(a->count(AFMESH_NET_EV_WRITE_DONE), 0u) << "flushed writes reported as done";
    EXPECT_EQ(b->count(AFMESH_NET_EV_IMM), 0u);
    EXPECT_EQ(write(*a, link.client, src, 8, dst.rkey(), 0, 99), AFMESH_HAL_PEER_FAILED);
    EXPECT_NE(take_module_error().find("has failed"), std::string::npos);
}

TEST_F(IbverbsTest, ReceiverNotReadyHoldsWritesUntilItReposts) {
    auto a = open(), b = open();
    ASSERT_TRUE(a && b);
    Link link;
    ASSERT_TRUE(connect(*a, *b, &link));
    const uint32_t writes = a->caps().recv_depth + 10;  // more than the receiver has posted
    RegisteredBuffer src(*a, writes * 4, kLocal), dst(*b, writes * 4, kRemoteWrite);
    ASSERT_TRUE(src.registered() && dst.registered());
    for (uint32_t i = 0; i < writes; ++i) memcpy(src.data() + 4 * i, &i, 4);
    for (uint32_t i = 0; i < writes; ++i)
        ASSERT_EQ(a->ops().write_imm(a->ctx(), link.client, src.data() + 4 * i, 4, src.mr(), &dst.rkey(), 4 * i, i,
                                     i + 1 == writes ? AFMESH_NET_SIGNAL : 0, i),
                  AFMESH_HAL_OK)
            << take_module_error();
    settle({a.get()});  // the receiver does not poll: the sender must neither fail nor finish
    EXPECT_EQ(a->count(AFMESH_NET_EV_CONN_ERROR), 0u) << a->first_error();
    EXPECT_EQ(a->count(AFMESH_NET_EV_WRITE_DONE), 0u);
    ASSERT_TRUE(poll_until({a.get(), b.get()},
                           [&] { return b->count(AFMESH_NET_EV_IMM) == writes && a->count(AFMESH_NET_EV_WRITE_DONE) == 1; },
                           "the held writes"));
    for (uint32_t i = 0; i < writes; ++i) EXPECT_EQ(b->take(AFMESH_NET_EV_IMM)->imm, i) << "in posting order";
    for (uint32_t i = 0; i < writes; ++i) {
        uint32_t v;
        memcpy(&v, dst.data() + 4 * i, 4);
        EXPECT_EQ(v, i);
    }
}

TEST_F(IbverbsTest, PeerDeathFailsTheConnectionOnce) {
    auto a = open(), b = open();
    ASSERT_TRUE(a && b);
    Link link;
    ASSERT_TRUE(connect(*a, *b, &link));
    b.reset();  // the process is gone: no close(), its QPs and sockets vanish with it
    ASSERT_TRUE(poll_until({a.get()}, [&] { return a->count(AFMESH_NET_EV_CONN_ERROR, link.client) == 1; },
                           "the death to be noticed"));
    const auto error = a->take(AFMESH_NET_EV_CONN_ERROR, link.client);
    EXPECT_EQ(error->status, AFMESH_HAL_PEER_FAILED);
    EXPECT_NE(error->reason.find("closed"), std::string::npos) << error->reason;
    settle({a.get()});
    EXPECT_TRUE(a->events().empty());
}

TEST_F(IbverbsTest, UnreachablePeerQpFailsWithRetryExceeded) {
    auto a = open(), b = open();
    ASSERT_TRUE(a && b);
    Link link;
    ASSERT_TRUE(connect(*a, *b, &link));
    afmesh_verbs_emu_break_qp(afmesh_verbs_emu_last_qpn());  // the listener's QP, created last
    RegisteredBuffer src(*a, 64, kLocal), dst(*b, 64, kRemoteWrite);
    ASSERT_TRUE(src.registered() && dst.registered());
    ASSERT_EQ(write(*a, link.client, src, 64, dst.rkey(), 0, 1), AFMESH_HAL_OK);
    ASSERT_TRUE(poll_until({a.get()}, [&] { return a->count(AFMESH_NET_EV_CONN_ERROR, link.client) == 1; },
                           "the write to time out"));
    const auto error = a->take(AFMESH_NET_EV_CONN_ERROR, link.client);
    EXPECT_EQ(error->status, AFMESH_HAL_PEER_FAILED);
    EXPECT_NE(error->reason.find("transport retry counter exceeded"), std::string::npos) << error->reason;
}

// --- gathered writes ---------------------------------------------------------------

// write_imm_v is one ibv_post_send of a chain: plain RDMA writes, then the
// write with the immediate, each to its own place, signalled at the end only.
TEST_F(IbverbsTest, AGatheredWritePostsOneChainEndingInTheImmediate) {
    auto a = open(), b = open();
    ASSERT_TRUE(a && b);
    ASSERT_GE(a->caps().max_write_segs, 3u);
    Link link;
    ASSERT_TRUE(connect(*a, *b, &link));
    RegisteredBuffer src(*a, 4096, kLocal), tensor(*b, 4096, kRemoteWrite), meta(*b, 256, kRemoteWrite);
    ASSERT_TRUE(src.registered() && tensor.registered() && meta.registered());
    fill_pattern(src.data(), src.size(), 2);
    fill_pattern(tensor.data(), tensor.size(), 1);
    fill_pattern(meta.data(), meta.size(), 1);
    // A large segment sent from its registration, then two the module may inline.
    const afmesh_net_write_seg segs[] = {
        {src.data(), src.mr(), 3000, &tensor.rkey(), 16},
        {src.data() + 3000, src.mr(), 24, &meta.rkey(), 8},
        {src.data() + 3100, src.mr(), 64, &tensor.rkey(), 3500},
    };
    const uint64_t calls = afmesh_verbs_emu_post_send_calls();
    ASSERT_EQ(a->ops().write_imm_v(a->ctx(), link.client, segs, 3, 0xabcd, AFMESH_NET_SIGNAL, 77), AFMESH_HAL_OK)
        << take_module_error();
    EXPECT_EQ(afmesh_verbs_emu_post_send_calls(), calls + 1) << "one doorbell for the chain";
    afmesh_verbs_emu_posted chain[8];
    ASSERT_EQ(afmesh_verbs_emu_last_chain(chain, std::size(chain)), 3u);
    for (size_t i = 0; i < 3; ++i) {
        SCOPED_TRACE("work request " + std::to_string(i));
        const afmesh_net_write_seg &seg = segs[i];
        EXPECT_EQ(chain[i].qpn, chain[0].qpn);
        EXPECT_EQ(chain[i].opcode, i < 2 ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_WRITE_WITH_IMM);
        EXPECT_EQ((chain[i].send_flags & IBV_SEND_SIGNALED) != 0, i == 2) << "only the last is signalled";
        EXPECT_EQ(chain[i].num_sge, 1);
        EXPECT_EQ(chain[i].sge_addr, reinterpret_cast<uintptr_t>(seg.src));
        EXPECT_EQ(chain[i].sge_length, seg.bytes);
        EXPECT_EQ(chain[i].remote_addr, seg.dst->addr + seg.dst_offset);
        EXPECT_EQ(chain[i].rkey, seg.dst->key);
        const bool inlined = (chain[i].send_flags & IBV_SEND_INLINE) != 0;
        EXPECT_EQ(inlined, seg.bytes <= a->caps().max_inline);
        if (!inlined) {
            EXPECT_EQ(chain[i].sge_lkey, src.rkey().key) << "the emulation gives a region one key for both";
        }
    }
    EXPECT_EQ(chain[2].imm_data, htonl(0xabcd));

    ASSERT_TRUE(poll_until({a.get(), b.get()},
                           [&] { return b->count(AFMESH_NET_EV_IMM) == 1 && a->count(AFMESH_NET_EV_WRITE_DONE) == 1; },
                           "the immediate and the completion"));
    EXPECT_EQ(b->take(AFMESH_NET_EV_IMM)->imm, 0xabcdu);
    EXPECT_EQ(a->take(AFMESH_NET_EV_WRITE_DONE)->cookie, 77u);
    EXPECT_TRUE(holds_pattern(tensor.data(), 16, 1, 0, "before the first segment"));
    EXPECT_TRUE(holds_pattern(tensor.data() + 16, 3000, 2, 0, "the first segment"));
    EXPECT_TRUE(holds_pattern(tensor.data() + 3016, 484, 1, 3016, "between the first and the third"));
    EXPECT_TRUE(holds_pattern(tensor.data() + 3500, 64, 2, 3100, "the third segment"));
    EXPECT_TRUE(holds_pattern(meta.data() + 8, 24, 2, 3000, "the second segment"));
    settle({a.get(), b.get()});
    EXPECT_EQ(b->count(AFMESH_NET_EV_IMM) + b->count(AFMESH_NET_EV_RECV), 0u) << "the plain writes were reported";
    EXPECT_EQ(a->count(AFMESH_NET_EV_WRITE_DONE), 0u) << "the chain completed twice";
    EXPECT_EQ(a->count(AFMESH_NET_EV_CONN_ERROR) + b->count(AFMESH_NET_EV_CONN_ERROR), 0u) << a->first_error();
}

// ibv_post_send may take a chain part way. The caller hears of it, the
// immediate never arrives, and the requests that were posted keep their
// send-queue slots until a later signal retires them: the queue then holds
// exactly one write fewer.
TEST_F(IbverbsTest, AChainRefusedPartWayIsReportedAndItsSlotsCounted) {
    auto a = open(), b = open();
    ASSERT_TRUE(a && b);
    ASSERT_GE(a->caps().max_write_segs, 3u);
    Link link;
    ASSERT_TRUE(connect(*a, *b, &link));
    RegisteredBuffer src(*a, 4096, kLocal), dst(*b, 4096, kRemoteWrite);
    ASSERT_TRUE(src.registered() && dst.registered());
    fill_pattern(src.data(), src.size(), 2);
    fill_pattern(dst.data(), dst.size(), 1);
    const afmesh_net_write_seg segs[] = {
        {src.data(), src.mr(), 1000, &dst.rkey(), 0},
        {src.data() + 1000, src.mr(), 1000, &dst.rkey(), 1000},
        {src.data() + 2000, src.mr(), 8, &dst.rkey(), 2000},
    };
    afmesh_verbs_emu_refuse_post_send(1, ENOMEM);
    EXPECT_EQ(a->ops().write_imm_v(a->ctx(), link.client, segs, 3, 5, AFMESH_NET_SIGNAL, 5), AFMESH_HAL_ERROR);
    const std::string error = take_module_error();
    EXPECT_NE(error.find("after taking 1 of the chain's 3 work requests"), std::string::npos) << error;
    EXPECT_TRUE(holds_pattern(dst.data(), 1000, 2, 0, "the segment posted before the refusal"));
    EXPECT_TRUE(holds_pattern(dst.data() + 1000, dst.size() - 1000, 1, 1000, "the refused segments' ranges"));

    // Without polling nothing retires: the queue takes all its slots but the one still held.
    uint32_t accepted = 0;
    int rc;
    while ((rc = write(*a, link.client, src, 8, dst.rkey(), 3000, 100 + accepted)) == AFMESH_HAL_OK) ++accepted;
    EXPECT_EQ(rc, AFMESH_HAL_AGAIN) << take_module_error();
    EXPECT_EQ(accepted, ibverbs::kSendDepth - 1);
    ASSERT_TRUE(poll_until({a.get(), b.get()}, [&] { return b->count(AFMESH_NET_EV_IMM) == accepted; },
                           "the writes after the refusal"));
    ASSERT_EQ(post_retrying({a.get(), b.get()},
                            [&] {
                                return a->ops().write_imm_v(a->ctx(), link.client, segs, 3, 6, AFMESH_NET_SIGNAL, 6);
                            }),
              AFMESH_HAL_OK)
        << take_module_error();
    ASSERT_TRUE(poll_until({a.get(), b.get()},
                           [&] { return b->count(AFMESH_NET_EV_IMM) == accepted + 1 &&
                                        a->count(AFMESH_NET_EV_WRITE_DONE) == 1; },
                           "a whole gathered write"));
    EXPECT_EQ(a->take(AFMESH_NET_EV_WRITE_DONE)->cookie, 6u) << "the refused call completed";
    size_t refused = 0;
    for (const NetEvent &e : b->events()) refused += e.type == AFMESH_NET_EV_IMM && e.imm == 5;
    EXPECT_EQ(refused, 0u) << "the refused chain delivered its immediate";
    EXPECT_TRUE(holds_pattern(dst.data(), 2008, 2, 0, "the whole gathered write"));
    EXPECT_EQ(a->count(AFMESH_NET_EV_CONN_ERROR), 0u) << a->first_error();
}

// --- handshakes -----------------------------------------------------------------------

TEST_F(IbverbsTest, ConnectRejectsBadAddressBlobs) {
    auto a = open(), b = open();
    ASSERT_TRUE(a && b);
    std::vector<uint8_t> blob = b->address();
    ASSERT_EQ(blob.size(), ibverbs::kAddressSize);
    afmesh_net_conn *conn = nullptr;
    auto expect_invalid = [&](std::vector<uint8_t> bytes, const char *words) {
        EXPECT_EQ(a->ops().connect(a->ctx(), bytes.data(), bytes.size(), &conn), AFMESH_HAL_INVALID_ARGUMENT) << words;
        EXPECT_NE(take_module_error().find(words), std::string::npos) << words;
    };
    auto truncated = blob;
    truncated.pop_back();
    expect_invalid(truncated, "bytes, not");
    auto magic = blob;
    magic[0] ^= 0xff;
    expect_invalid(magic, "bad magic");
    auto version = blob;
    version[4] = 99;
    expect_invalid(version, "version 99");
    ibverbs::EndpointAddress decoded;
    std::string why;
    ASSERT_TRUE(ibverbs::decode_address(blob.data(), blob.size(), &decoded, &why)) << why;
    decoded.link = ibverbs::kLinkInfiniBand;  // this emulated port is RoCE
    std::vector<uint8_t> infiniband(ibverbs::kAddressSize);
    ibverbs::encode_address(decoded, infiniband.data());
    expect_invalid(infiniband, "InfiniBand");
}

TEST_F(IbverbsTest, GarbageOnTheSideChannelIsDroppedQuietly) {
    auto a = open(), b = open();
    ASSERT_TRUE(a && b);
    ibverbs::EndpointAddress address;
    std::string why;
    ASSERT_TRUE(ibverbs::decode_address(b->address().data(), b->address().size(), &address, &why)) << why;
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_EQ(::connect(fd, reinterpret_cast<const sockaddr *>(&address.side_channel), sizeof(sockaddr_in)), 0);
    uint8_t garbage[ibverbs::kHandshakeSize];
    memset(garbage, 0xab, sizeof garbage);
    ASSERT_EQ(::send(fd, garbage, sizeof garbage, 0), static_cast<ssize_t>(sizeof garbage));
    uint8_t byte;
    bool closed = false;  // the listener hangs up on the stranger
    ASSERT_TRUE(poll_until({b.get()}, [&] { return closed = closed || recv(fd, &byte, 1, MSG_DONTWAIT) == 0; },
                           "the stranger to be dropped"));
    ::close(fd);
    settle({b.get()});
    EXPECT_TRUE(b->events().empty()) << "a stranger produced " << event_type_name(b->events().front().type);
    Link link;
    EXPECT_TRUE(connect(*a, *b, &link)) << "the listener still serves real peers";
}

TEST_F(IbverbsTest, BadHandshakeReplyFailsTheConnection) {
    auto a = open();
    ASSERT_TRUE(a);
    const int listener = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in bound{};
    bound.sin_family = AF_INET;
    bound.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof bound;
    ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr *>(&bound), sizeof bound), 0);
    ASSERT_EQ(::listen(listener, 1), 0);
    ASSERT_EQ(getsockname(listener, reinterpret_cast<sockaddr *>(&bound), &length), 0);
    ibverbs::EndpointAddress fake;
    memcpy(&fake.side_channel, &bound, sizeof bound);
    fake.link = ibverbs::kLinkEthernet;
    std::vector<uint8_t> blob(ibverbs::kAddressSize);
    ibverbs::encode_address(fake, blob.data());

    afmesh_net_conn *conn = nullptr;
    ASSERT_EQ(a->ops().connect(a->ctx(), blob.data(), blob.size(), &conn), AFMESH_HAL_OK) << take_module_error();
    const int peer = accept(listener, nullptr, nullptr);
    ASSERT_GE(peer, 0);
    uint8_t request[ibverbs::kHandshakeSize];
    size_t got = 0;
    ASSERT_TRUE(poll_until({a.get()}, [&] {
        const ssize_t n = recv(peer, request + got, sizeof request - got, MSG_DONTWAIT);
        if (n > 0) got += static_cast<size_t>(n);
        return got == sizeof request;
    }, "the request"));
    ibverbs::QpInfo info;
    std::string why;
    ASSERT_TRUE(ibverbs::decode_handshake(request, ibverbs::HandshakeType::kRequest, &info, &why)) << why;
    info.qpn = 0;  // no QP has number 0
    uint8_t reply[ibverbs::kHandshakeSize];
    ibverbs::encode_handshake(ibverbs::HandshakeType::kReply, info, reply);
    ASSERT_EQ(::send(peer, reply, sizeof reply, 0), static_cast<ssize_t>(sizeof reply));
    ASSERT_TRUE(poll_until({a.get()}, [&] { return a->count(AFMESH_NET_EV_CONN_ERROR, conn) == 1; }, "the failure"));
    const auto error = a->take(AFMESH_NET_EV_CONN_ERROR, conn);
    EXPECT_NE(error->reason.find("bad handshake"), std::string::npos) << error->reason;
    EXPECT_EQ(a->count(AFMESH_NET_EV_CONNECTED, conn), 0u);
    EXPECT_EQ(a->ops().close(a->ctx(), conn), AFMESH_HAL_OK);
    ::close(peer);
    ::close(listener);
}

// --- discovery --------------------------------------------------------------------------

TEST_F(IbverbsTest, PrefersRoceV2Ipv4Gids) {
    afmesh_verbs_emu_clear();
    const int dev = afmesh_verbs_emu_add_device("mlx5_0");
    const int port = afmesh_verbs_emu_add_port(dev, IBV_LINK_LAYER_ETHERNET, IBV_PORT_ACTIVE, 0, IBV_MTU_1024);
    afmesh_verbs_emu_add_gid(dev, port, "fe80::2", IBV_GID_TYPE_ROCE_V1);
    afmesh_verbs_emu_add_gid(dev, port, "fe80::2", IBV_GID_TYPE_ROCE_V2);
    afmesh_verbs_emu_add_gid(dev, port, "::", IBV_GID_TYPE_ROCE_V2);
    afmesh_verbs_emu_add_gid(dev, port, "2001:db8::5", IBV_GID_TYPE_ROCE_V2);
    afmesh_verbs_emu_add_gid(dev, port, "::ffff:10.1.2.3", IBV_GID_TYPE_ROCE_V1);
    afmesh_verbs_emu_add_gid(dev, port, "::ffff:10.1.2.3", IBV_GID_TYPE_ROCE_V2);
    auto a = open();
    ASSERT_TRUE(a);
    const std::string text = describe(*a);
    EXPECT_NE(text.find("mlx5_0 port 1: RoCE (Ethernet), ACTIVE, MTU 1024, GID 5 ::ffff:10.1.2.3 (RoCE v2 IPv4), used"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("GID 4 ::ffff:10.1.2.3 (RoCE v1)"), std::string::npos) << text;
    EXPECT_EQ(text.find("GID 2 "), std::string::npos) << "an empty GID was listed: " << text;
    EXPECT_NE(text.find("from the IPv4 address of RoCE GID 5"), std::string::npos) << text;
}

TEST_F(IbverbsTest, SkipsInactivePortsAndAddressesInfiniBandByLid) {
    afmesh_verbs_emu_clear();
    const int roce = afmesh_verbs_emu_add_device("mlx5_0");
    afmesh_verbs_emu_add_gid(roce, afmesh_verbs_emu_add_port(roce, IBV_LINK_LAYER_ETHERNET, IBV_PORT_DOWN, 0, IBV_MTU_4096),
                             "::ffff:10.0.0.1", IBV_GID_TYPE_ROCE_V2);
    const int ib = afmesh_verbs_emu_add_device("mlx5_1");
    afmesh_verbs_emu_add_gid(ib, afmesh_verbs_emu_add_port(ib, IBV_LINK_LAYER_INFINIBAND, IBV_PORT_ACTIVE, 0x12, IBV_MTU_4096),
                             "fe80::3", IBV_GID_TYPE_IB);
    auto a = open(), b = open();
    ASSERT_TRUE(a && b);
    const std::string text = describe(*a);
    EXPECT_NE(text.find("mlx5_0 port 1: DOWN, not used (not active)"), std::string::npos) << text;
    EXPECT_NE(text.find("mlx5_1 port 1: InfiniBand, ACTIVE, MTU 4096, LID 0x12, used"), std::string::npos) << text;
    Link link;  // LID-routed RC works end to end
    ASSERT_TRUE(connect(*a, *b, &link));
    RegisteredBuffer src(*a, 16, kLocal), dst(*b, 16, kRemoteWrite);
    ASSERT_TRUE(src.registered() && dst.registered());
    ASSERT_EQ(write(*a, link.client, src, 16, dst.rkey(), 0, 5), AFMESH_HAL_OK);
    ASSERT_TRUE(poll_until({a.get(), b.get()}, [&] { return b->count(AFMESH_NET_EV_IMM) == 1; }, "the write"));
}

TEST_F(IbverbsTest, NoUsablePortIsNotPresent) {
    afmesh_verbs_emu_clear();
    const int dev = afmesh_verbs_emu_add_device("mlx5_0");
    afmesh_verbs_emu_add_port(dev, IBV_LINK_LAYER_INFINIBAND, IBV_PORT_ACTIVE, 0, IBV_MTU_4096);
    afmesh_verbs_emu_add_port(dev, IBV_LINK_LAYER_INFINIBAND, IBV_PORT_INIT, 0, IBV_MTU_4096);
    const Status s = open_status();
    EXPECT_EQ(s.code(), Code::kNotPresent) << s.to_string();
    EXPECT_NE(s.message().find("no LID assigned"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("port 2: INIT, not used"), std::string::npos) << s.message();
}

TEST_F(IbverbsTest, KernelWithoutRdmaIsNotPresent) {
    afmesh_verbs_emu_fail_device_list(ENOSYS);
    const Status s = open_status();
    EXPECT_EQ(s.code(), Code::kNotPresent) << s.to_string();
    EXPECT_NE(s.message().find("ibv_get_device_list: Function not implemented"), std::string::npos) << s.message();
    afmesh_verbs_emu_clear();
    afmesh_verbs_emu_fail_device_list(0);
    EXPECT_EQ(open_status().code(), Code::kNotPresent) << "an empty device list";
}

// Run by their own ctest entries, which set AFMESH_NET_DEVICES (read once per process).
const char *net_devices() {
    const char *value = getenv("AFMESH_NET_DEVICES");
    return value ? value : "";
}

TEST_F(IbverbsTest, NetDevicesNamingAMissingDeviceIsAnError) {
    if (std::string(net_devices()) != "mlx5_9") GTEST_SKIP() << "run by ctest ibverbs_net_devices_missing";
    const Status s = open_status();
    EXPECT_EQ(s.code(), Code::kError) << s.to_string();
    EXPECT_NE(s.message().find("AFMESH_NET_DEVICES names 'mlx5_9', which is not an RDMA device on this host (found: "
                               "emu_roce0)"),
              std::string::npos)
        << s.message();
}

TEST_F(IbverbsTest, NetDevicesChoosesTheConfiguredGid) {
    if (std::string(net_devices()) != "emu_roce0:1:1") GTEST_SKIP() << "run by ctest ibverbs_net_devices_gid_index";
    auto a = open();
    ASSERT_TRUE(a);
    const std::string text = describe(*a);
    EXPECT_NE(text.find("GID 1 fe80::1 (RoCE v2 link-local): configured"), std::string::npos) << text;
    EXPECT_NE(text.find("GID 1 fe80::1 (RoCE v2 link-local), used"), std::string::npos) << text;
}

}  // namespace
}  // namespace afmesh::test
