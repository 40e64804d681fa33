// SPDX-License-Identifier: Apache-2.0
// Behaviour specific to the tcp module, beyond the shared conformance suite:
// its wire and address formats, its caps, its region keys, and how it
// guards the memory a write is sent from.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <netinet/in.h>

#include <cstring>
#include <map>
#include <string>

#include "log.h"
#include "module_params.h"
#include "transport_fixture.h"
#include "transports/tcp/address.h"
#include "transports/tcp/wire.h"

namespace afmesh::test {
namespace {

TEST(TcpWireFormat, HeaderRoundTrips) {
    tcp::FrameHeader in;
    in.type = tcp::FrameType::kWriteImm;
    in.imm = 0x01020304;
    in.key = 0x1122334455667788;
    in.offset = 0x8877665544332211;
    in.length = 0xdeadbeefcafe;
    uint8_t bytes[tcp::kFrameHeaderSize];
    tcp::encode_frame_header(in, bytes);
    EXPECT_EQ(bytes[0], 0x41) << "magic first, in network byte order";
    EXPECT_EQ(bytes[8], 0x01) << "imm in network byte order";
    tcp::FrameHeader out;
    tcp::Reason why;
    ASSERT_TRUE(tcp::decode_frame_header(bytes, &out, &why)) << why.text;
    EXPECT_EQ(out.type, in.type);
    EXPECT_EQ(out.imm, in.imm);
    EXPECT_EQ(out.key, in.key);
    EXPECT_EQ(out.offset, in.offset);
    EXPECT_EQ(out.length, in.length);
}

TEST(TcpWireFormat, AWriteFrameRoundTripsWithoutAnImmediate) {
    tcp::FrameHeader in;
    in.type = tcp::FrameType::kWrite;
    in.key = 7;
    in.offset = 4096;
    in.length = 100;
    uint8_t bytes[tcp::kFrameHeaderSize];
    tcp::encode_frame_header(in, bytes);
    tcp::FrameHeader out;
    tcp::Reason why;
    ASSERT_TRUE(tcp::decode_frame_header(bytes, &out, &why)) << why.text;
    EXPECT_EQ(out.type, tcp::FrameType::kWrite);
    EXPECT_EQ(out.key, in.key);
    EXPECT_EQ(out.offset, in.offset);
    EXPECT_EQ(out.length, in.length);
    in.imm = 1;  // only the WRITE_IMM that ends a write_imm_v carries one
    tcp::encode_frame_header(in, bytes);
    EXPECT_FALSE(tcp::decode_frame_header(bytes, &out, &why));
    EXPECT_NE(std::string(why.text).find("carries an immediate"), std::string::npos) << why.text;
}

TEST(TcpAddressFormat, RoundTripsBothFamilies) {
    for (const char *literal : {"127.0.0.1", "::1"}) {
        SCOPED_TRACE(literal);
        tcp::SocketAddress in;
        if (strchr(literal, ':')) {
            auto *in6 = reinterpret_cast<sockaddr_in6 *>(&in.storage);
            in6->sin6_family = AF_INET6;
            in6->sin6_port = htons(4242);
            ASSERT_EQ(inet_pton(AF_INET6, literal, &in6->sin6_addr), 1);
        } else {
            auto *in4 = reinterpret_cast<sockaddr_in *>(&in.storage);
            in4->sin_family = AF_INET;
            in4->sin_port = htons(4242);
            ASSERT_EQ(inet_pton(AF_INET, literal, &in4->sin_addr), 1);
        }
        uint8_t blob[tcp::kAddressBlobSize];
        ASSERT_TRUE(tcp::encode_address(in, blob));
        tcp::SocketAddress out;
        tcp::Reason why;
        ASSERT_TRUE(tcp::decode_address(blob, sizeof blob, &out, &why)) << why.text;
        EXPECT_EQ(out.storage.ss_family, in.storage.ss_family);
        EXPECT_NE(std::string(tcp::format_address(out).text).find("4242"), std::string::npos);
    }
}

TEST(TcpAddressFormat, RejectsMalformedBlobs) {
    tcp::SocketAddress in;
    auto *in4 = reinterpret_cast<sockaddr_in *>(&in.storage);
    in4->sin_family = AF_INET;
    in4->sin_port = htons(4242);
    in4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    uint8_t good[tcp::kAddressBlobSize];
    ASSERT_TRUE(tcp::encode_address(in, good));
    struct Corruption {
        size_t at;
        uint8_t value;
        const char *words;
    };
    for (const Corruption &c : {Corruption{0, 0x00, "not a tcp transport address"}, Corruption{4, 9, "version"},
                                Corruption{5, 5, "family"}, Corruption{20, 1, "padding"}}) {
        uint8_t blob[tcp::kAddressBlobSize];
        memcpy(blob, good, sizeof blob);
        blob[c.at] = c.value;
        tcp::SocketAddress out;
        tcp::Reason why;
        EXPECT_FALSE(tcp::decode_address(blob, sizeof blob, &out, &why)) << "byte " << c.at;
        EXPECT_NE(std::string(why.text).find(c.words), std::string::npos) << why.text;
    }
    uint8_t no_port[tcp::kAddressBlobSize];
    memcpy(no_port, good, sizeof no_port);
    no_port[6] = no_port[7] = 0;
    tcp::SocketAddress out;
    tcp::Reason why;
    EXPECT_FALSE(tcp::decode_address(no_port, sizeof no_port, &out, &why));
    EXPECT_FALSE(tcp::decode_address(good, sizeof good - 1, &out, &why));
}

class TcpTransport : public ::testing::Test {
protected:
    void SetUp() override {
        for (ModuleRecord &record : modules_of_kind(AFMESH_MODULE_TRANSPORT)) {
            if (record.name != "tcp") continue;
            for (auto *endpoint : {&a_, &b_}) {
                Status s = NetEndpoint::open(record, endpoint);
                ASSERT_TRUE(s) << s.to_string();
            }
        }
        ASSERT_NE(a_, nullptr) << "libafmesh_net_tcp.so is not on the module search path";
    }

    const afmesh_net_ops &ops() const { return a_->ops(); }
    Endpoints both() const { return {a_.get(), b_.get()}; }

    std::unique_ptr<NetEndpoint> a_, b_;
};

TEST_F(TcpTransport, ReportsItsCaps) {
    const afmesh_net_caps &caps = a_->caps();
    EXPECT_EQ(caps.flags, AFMESH_NET_CAP_ORDERED | AFMESH_NET_CAP_WAIT_FD);
    EXPECT_EQ(caps.imm_bytes, 4u);
    EXPECT_EQ(caps.mem_kinds, AFMESH_MEM_BIT(AFMESH_MEM_HOST));
    EXPECT_EQ(caps.max_send_size, tcp::kMaxSendSize);
    EXPECT_EQ(caps.max_addr_size, tcp::kAddressBlobSize);
    EXPECT_GE(caps.max_write_size, uint64_t{1} << 40) << "no cap users hit";
    EXPECT_GE(caps.max_write_segs, 2u) << "a tensor and its metadata in one write_imm_v";
}

TEST_F(TcpTransport, ListensWhereAfmeshTcpBindSays) {
    const std::vector<uint8_t> &blob = a_->address();
    tcp::SocketAddress bound;
    tcp::Reason why;
    ASSERT_TRUE(tcp::decode_address(blob.data(), blob.size(), &bound, &why)) << why.text;
    const std::string bind = Config::process().get("AFMESH_TCP_BIND");
    if (bind == "127.0.0.1") {
        ASSERT_EQ(bound.storage.ss_family, AF_INET);
        EXPECT_EQ(reinterpret_cast<sockaddr_in *>(&bound.storage)->sin_addr.s_addr, htonl(INADDR_LOOPBACK));
    }
    EXPECT_STRNE(tcp::format_address(bound).text, "");
}

TEST_F(TcpTransport, ListensOnlyOnce) {
    ASSERT_FALSE(a_->address().empty());
    uint8_t blob[tcp::kAddressBlobSize];
    size_t len = sizeof blob;
    EXPECT_EQ(ops().listen(a_->ctx(), blob, &len), AFMESH_HAL_INVALID_ARGUMENT);
    EXPECT_NE(take_module_error().find("already"), std::string::npos);
}

// Keys are capabilities: a peer may write only into a region it was told
// about. Sequential keys (1, 2, 3...) would let any connection guess them;
// random 64-bit keys lie far apart, and a key that was deregistered is not
// handed out again in practice.
TEST_F(TcpTransport, RegionKeysCannotBeGuessed) {
    std::vector<uint8_t> memory(64);
    afmesh_net_mem mem{sizeof(afmesh_net_mem), AFMESH_MEM_HOST, -1, -1, 0};
    std::vector<uint64_t> keys;
    for (int i = 0; i < 100; ++i) {
        afmesh_net_mr *mr = nullptr;
        afmesh_net_rkey rkey{};
        ASSERT_EQ(ops().mem_register(a_->ctx(), memory.data(), memory.size(), &mem, AFMESH_NET_ACCESS_REMOTE_WRITE, &mr,
                                     &rkey),
                  AFMESH_HAL_OK);
        keys.push_back(rkey.key);
        ASSERT_EQ(ops().mem_deregister(a_->ctx(), mr), AFMESH_HAL_OK);
    }
    std::sort(keys.begin(), keys.end());
    EXPECT_NE(keys.front(), 0u);
    for (size_t i = 1; i < keys.size(); ++i)
        EXPECT_GT(keys[i] - keys[i - 1], uint64_t{1} << 16) << "keys " << keys[i - 1] << " and " << keys[i];
}

TEST_F(TcpTransport, RefusesDeregisteringTwice) {
    RegisteredBuffer buffer(*a_, 64, AFMESH_NET_ACCESS_LOCAL);
    afmesh_net_mr *mr = buffer.mr();
    ASSERT_EQ(buffer.deregister(), AFMESH_HAL_OK);
    EXPECT_EQ(ops().mem_deregister(a_->ctx(), mr), AFMESH_HAL_INVALID_ARGUMENT);
    EXPECT_FALSE(take_module_error().empty());
}

TEST_F(TcpTransport, ChecksTheSourceOfZeroCopyWrites) {
    Link link;
    ASSERT_TRUE(connect(*a_, *b_, &link));
    RegisteredBuffer dst(*b_, 8192, AFMESH_NET_ACCESS_REMOTE_WRITE);
    RegisteredBuffer src(*a_, 4096, AFMESH_NET_ACCESS_LOCAL);
    RegisteredBuffer remote_only(*a_, 4096, AFMESH_NET_ACCESS_REMOTE_WRITE);
    const afmesh_net_rkey &to = dst.rkey();
    EXPECT_EQ(ops().write_imm(a_->ctx(), link.client, src.data() + 1, 4096, src.mr(), &to, 0, 0, 0, 0),
              AFMESH_HAL_ACCESS)
        << "one byte past the registration";
    EXPECT_NE(take_module_error().find("not inside"), std::string::npos);
    EXPECT_EQ(ops().write_imm(a_->ctx(), link.client, remote_only.data(), 4096, remote_only.mr(), &to, 0, 0, 0, 0),
              AFMESH_HAL_ACCESS)
        << "a registration without AFMESH_NET_ACCESS_LOCAL";
    EXPECT_NE(take_module_error().find("LOCAL"), std::string::npos);
}

// write_imm_v checks every segment as write_imm checks its one, and refuses
// the whole call, naming the segment, before it queues anything.
TEST_F(TcpTransport, ChecksEverySegmentBeforePostingAny) {
    Link link;
    ASSERT_TRUE(connect(*a_, *b_, &link));
    RegisteredBuffer dst(*b_, 8192, AFMESH_NET_ACCESS_REMOTE_WRITE);
    RegisteredBuffer src(*a_, 4096, AFMESH_NET_ACCESS_LOCAL);
    RegisteredBuffer remote_only(*a_, 4096, AFMESH_NET_ACCESS_REMOTE_WRITE);
    ASSERT_TRUE(dst.registered() && src.registered() && remote_only.registered());
    fill_pattern(dst.data(), dst.size(), 0xa7);
    fill_pattern(src.data(), src.size(), 0x3c);
    const afmesh_net_write_seg good{src.data(), src.mr(), 1024, &dst.rkey(), 0};
    struct Case {
        afmesh_net_write_seg bad;
        int status;
        const char *words;
    };
    const Case cases[] = {
        {{src.data() + 3073, src.mr(), 1024, &dst.rkey(), 2048}, AFMESH_HAL_ACCESS, "not inside"},
        {{remote_only.data(), remote_only.mr(), 1024, &dst.rkey(), 2048}, AFMESH_HAL_ACCESS, "LOCAL"},
        {{src.data(), nullptr, 1024, &dst.rkey(), 2048}, AFMESH_HAL_INVALID_ARGUMENT, "needs its source registration"},
        {{src.data(), src.mr(), 1024, &dst.rkey(), UINT64_MAX - 100}, AFMESH_HAL_INVALID_ARGUMENT, "overflow"},
    };
    for (const Case &c : cases) {
        SCOPED_TRACE(c.words);
        const afmesh_net_write_seg segs[] = {good, c.bad};
        EXPECT_EQ(ops().write_imm_v(a_->ctx(), link.client, segs, 2, 5, AFMESH_NET_SIGNAL, 5), c.status);
        const std::string error = take_module_error();
        EXPECT_NE(error.find("segment 1"), std::string::npos) << error;
        EXPECT_NE(error.find(c.words), std::string::npos) << error;
    }
    const uint64_t value = 0x0123456789abcdef;
    ASSERT_EQ(ops().write_imm(a_->ctx(), link.client, &value, sizeof value, nullptr, &dst.rkey(), 4096, 9, 0, 0),
              AFMESH_HAL_OK)
        << take_module_error();
    ASSERT_TRUE(poll_until(both(), [&] { return b_->count(AFMESH_NET_EV_IMM) == 1; }, "the write after the refusals"));
    EXPECT_EQ(b_->take(AFMESH_NET_EV_IMM)->imm, 9u);
    for (int round = 0; round < 50; ++round)
        for (NetEndpoint *e : both()) e->poll_once();
    EXPECT_EQ(b_->count(AFMESH_NET_EV_IMM), 0u) << "a refused write_imm_v delivered its immediate";
    EXPECT_EQ(a_->count(AFMESH_NET_EV_WRITE_DONE), 0u) << "a refused write_imm_v completed";
    EXPECT_TRUE(holds_pattern(dst.data(), 4096, 0xa7, 0, "the valid segment of a refused call"));
}

// The send queue takes all of a write_imm_v's frames or none. Writes posted
// before the connect completes wait in the queue, so it fills exactly.
TEST_F(TcpTransport, AGatheredWriteIsQueuedWholeOrNotAtAll) {
    RegisteredBuffer dst(*b_, 64, AFMESH_NET_ACCESS_REMOTE_WRITE);
    ASSERT_TRUE(dst.registered());
    fill_pattern(dst.data(), dst.size(), 0xa7);
    const std::vector<uint8_t> &address = b_->address();
    const uint64_t value = 1;
    const afmesh_net_rkey &to = dst.rkey();
    afmesh_net_conn *measured = nullptr, *conn = nullptr;
    ASSERT_EQ(ops().connect(a_->ctx(), address.data(), address.size(), &measured), AFMESH_HAL_OK);
    ASSERT_EQ(ops().connect(a_->ctx(), address.data(), address.size(), &conn), AFMESH_HAL_OK);
    size_t depth = 0;  // what one queue holds
    while (ops().write_imm(a_->ctx(), measured, &value, sizeof value, nullptr, &to, 0, 1, 0, 0) == AFMESH_HAL_OK)
        ++depth;
    ASSERT_GT(depth, 1u);
    for (size_t i = 0; i + 1 < depth; ++i)
        ASSERT_EQ(ops().write_imm(a_->ctx(), conn, &value, sizeof value, nullptr, &to, 0, 2, 0, 0), AFMESH_HAL_OK);
    const uint8_t bytes[16] = {};
    const afmesh_net_write_seg segs[] = {{bytes, nullptr, 8, &to, 16}, {bytes + 8, nullptr, 8, &to, 24}};
    EXPECT_EQ(ops().write_imm_v(a_->ctx(), conn, segs, 2, 3, AFMESH_NET_SIGNAL, 3), AFMESH_HAL_AGAIN)
        << "one slot left for two frames";
    EXPECT_EQ(ops().write_imm(a_->ctx(), conn, &value, sizeof value, nullptr, &to, 0, 4, 0, 0), AFMESH_HAL_OK)
        << "the refused write_imm_v took the last slot";
    afmesh_net_conn *accepted = nullptr;
    ASSERT_TRUE(poll_until(
        both(),
        [&] {
            if (ops().accept(b_->ctx(), &accepted) != AFMESH_HAL_OK) accepted = nullptr;
            return b_->count(AFMESH_NET_EV_IMM) == 2 * depth;
        },
        "every queued write"));
    std::map<uint32_t, size_t> imms;
    for (const NetEvent &e : b_->events())
        if (e.type == AFMESH_NET_EV_IMM) ++imms[e.imm];
    EXPECT_EQ(imms[1], depth);
    EXPECT_EQ(imms[2], depth - 1);
    EXPECT_EQ(imms[3], 0u);
    EXPECT_EQ(imms[4], 1u);
    EXPECT_EQ(a_->count(AFMESH_NET_EV_WRITE_DONE), 0u);
    EXPECT_TRUE(holds_pattern(dst.data() + 16, 16, 0xa7, 16, "the refused segments' bytes"));
}

TEST_F(TcpTransport, QueuesWritesPostedBeforeTheConnectCompletes) {
    RegisteredBuffer dst(*b_, 8, AFMESH_NET_ACCESS_REMOTE_WRITE);
    const std::vector<uint8_t> &address = b_->address();
    afmesh_net_conn *conn = nullptr;
    ASSERT_EQ(ops().connect(a_->ctx(), address.data(), address.size(), &conn), AFMESH_HAL_OK);
    const uint64_t value = 0x0123456789abcdef;
    const afmesh_net_rkey &to = dst.rkey();
    ASSERT_EQ(ops().write_imm(a_->ctx(), conn, &value, sizeof value, nullptr, &to, 0, 3, AFMESH_NET_SIGNAL, 1),
              AFMESH_HAL_OK);
    afmesh_net_conn *accepted = nullptr;
    ASSERT_TRUE(poll_until(
        both(),
        [&] {
            if (!accepted && ops().accept(b_->ctx(), &accepted) != AFMESH_HAL_OK) accepted = nullptr;
            return b_->count(AFMESH_NET_EV_IMM) == 1 && a_->count(AFMESH_NET_EV_WRITE_DONE) == 1;
        },
        "the early write"));
    EXPECT_EQ(a_->take(AFMESH_NET_EV_CONNECTED)->conn, conn);
    EXPECT_EQ(memcmp(dst.data(), &value, sizeof value), 0);
}

// Deregistering the source of a zero-copy write still in flight must stop
// the module reading it: the connection fails with ACCESS.
TEST_F(TcpTransport, FailsAWriteWhoseSourceIsDeregisteredInFlight) {
    constexpr size_t kBytes = 64 << 20;  // far more than loopback socket buffers hold
    Link link;
    ASSERT_TRUE(connect(*a_, *b_, &link));
    RegisteredBuffer dst(*b_, kBytes, AFMESH_NET_ACCESS_REMOTE_WRITE);
    RegisteredBuffer src(*a_, kBytes, AFMESH_NET_ACCESS_LOCAL);
    memset(src.data(), 1, kBytes);
    const afmesh_net_rkey &to = dst.rkey();
    ASSERT_EQ(ops().write_imm(a_->ctx(), link.client, src.data(), kBytes, src.mr(), &to, 0, 0, AFMESH_NET_SIGNAL, 0),
              AFMESH_HAL_OK);
    ASSERT_EQ(src.deregister(), AFMESH_HAL_OK);
    ASSERT_TRUE(poll_until(
        both(), [&] { return a_->count(AFMESH_NET_EV_CONN_ERROR, link.client) == 1; }, "the write to fail"));
    const auto error = a_->take(AFMESH_NET_EV_CONN_ERROR, link.client);
    EXPECT_EQ(error->status, AFMESH_HAL_ACCESS);
    EXPECT_NE(error->reason.find("source region"), std::string::npos) << error->reason;
    EXPECT_EQ(a_->count(AFMESH_NET_EV_WRITE_DONE), 0u);
    ASSERT_TRUE(poll_until(
        both(), [&] { return b_->count(AFMESH_NET_EV_CONN_ERROR, link.server) == 1; },
        "the receiver to see the broken frame"));
    EXPECT_EQ(b_->count(AFMESH_NET_EV_IMM), 0u);
}

}  // namespace
}  // namespace afmesh::test
