// Behaviour specific to the tcp module, beyond the shared conformance suite:
// its wire and address formats, its caps, its region keys, and how it
// guards the memory a write is sent from.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>

#include <cstring>

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

TEST_F(TcpTransport, NeverReusesRegionKeys) {
    std::vector<uint8_t> memory(64);
    afmesh_net_mem mem{sizeof(afmesh_net_mem), AFMESH_MEM_HOST, -1, -1, 0};
    uint64_t last = 0;
    for (int i = 0; i < 100; ++i) {
        afmesh_net_mr *mr = nullptr;
        afmesh_net_rkey rkey{};
        ASSERT_EQ(ops().mem_register(a_->ctx(), memory.data(), memory.size(), &mem, AFMESH_NET_ACCESS_REMOTE_WRITE, &mr,
                                     &rkey),
                  AFMESH_HAL_OK);
        EXPECT_GT(rkey.key, last);
        last = rkey.key;
        ASSERT_EQ(ops().mem_deregister(a_->ctx(), mr), AFMESH_HAL_OK);
    }
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
