// SPDX-License-Identifier: Apache-2.0
// The fabric module's two-sided message format (transports/fabric/wire.h):
// every message a peer may send is decoded or refused with a reason, never
// trusted. Forged bytes stand in for a confused or hostile peer.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "transports/fabric/nic_match.h"
#include "transports/fabric/wire.h"

namespace afmesh::fabric {
namespace {

std::vector<uint8_t> message(MessageType type, uint32_t dst, uint32_t src, size_t payload = 0) {
    std::vector<uint8_t> out(kHeaderSize + payload, 0);
    encode_header({type, dst, src}, out.data());
    return out;
}

// Decodes `bytes`, expecting a refusal whose reason contains `because`.
void expect_refused(const std::vector<uint8_t> &bytes, const std::string &because) {
    Header header;
    Reason why;
    ASSERT_FALSE(decode_header(bytes.data(), bytes.size(), &header, &why)) << "accepted; wanted: " << because;
    EXPECT_NE(std::string(why.text).find(because), std::string::npos) << why.text;
}

// The domain the module prefers is the one on the NIC placement chose.
TEST(FabricNics, ADomainIsOnTheListedNicItIsNamedAfter) {
    EXPECT_TRUE(domain_on_listed_nic("mlx5_0", "mlx5_0:1"));
    EXPECT_TRUE(domain_on_listed_nic("mlx5_3", "mlx5_0:1,mlx5_3"));
    EXPECT_TRUE(domain_on_listed_nic("rdmap16s27-rdm", "rdmap16s27"));  // efa
    EXPECT_TRUE(domain_on_listed_nic("mlx5_2", "mlx5_2:1:3"));
    EXPECT_FALSE(domain_on_listed_nic("mlx5_10", "mlx5_1"));
    EXPECT_FALSE(domain_on_listed_nic("mlx5_1", "mlx5_10"));
    EXPECT_FALSE(domain_on_listed_nic("mlx5_0", ""));
    EXPECT_FALSE(domain_on_listed_nic("mlx5_0", ",:1,"));
    EXPECT_FALSE(domain_on_listed_nic("eth0", "mlx5_0"));
}

TEST(FabricWire, EveryTypeRoundTripsWithItsIds) {
    struct Case {
        MessageType type;
        uint32_t dst;
        size_t payload;
    };
    for (const Case &c : {Case{MessageType::kHello, 0, 40}, Case{MessageType::kAccept, 7, 40},
                          Case{MessageType::kData, 7, 100}, Case{MessageType::kBye, 0, 0},
                          Case{MessageType::kImm, 7, kImmPayloadSize}, Case{MessageType::kReject, 7, 0}}) {
        SCOPED_TRACE(static_cast<int>(c.type));
        const std::vector<uint8_t> bytes = message(c.type, c.dst, 9, c.payload);
        Header header;
        Reason why;
        ASSERT_TRUE(decode_header(bytes.data(), bytes.size(), &header, &why)) << why.text;
        EXPECT_EQ(header.type, c.type);
        EXPECT_EQ(header.dst_conn, c.dst);
        EXPECT_EQ(header.src_conn, 9u);
        EXPECT_EQ(header.version, kWireVersion);
    }
}

TEST(FabricWire, AnImmediateMessageCarriesExactlyFourBytes) {
    expect_refused(message(MessageType::kImm, 7, 9, 0), "immediate message with 0 bytes");
    expect_refused(message(MessageType::kImm, 7, 9, 8), "immediate message with 8 bytes");
    expect_refused(message(MessageType::kImm, 0, 9, kImmPayloadSize), "without its connection ids");
}

TEST(FabricWire, ForgedHeadersAreRefusedWithAReason) {
    std::vector<uint8_t> bytes = message(MessageType::kData, 7, 9, 4);
    expect_refused(std::vector<uint8_t>(bytes.begin(), bytes.begin() + kHeaderSize - 1), "shorter than");

    std::vector<uint8_t> other_magic = bytes;
    other_magic[0] ^= 0xff;
    expect_refused(other_magic, "without the fabric transport's magic");

    std::vector<uint8_t> version_2 = bytes;  // a peer from before tagged writes is not heard
    version_2[4] = 2;
    expect_refused(version_2, "type 3 message of fabric wire protocol 2 (this module speaks 3)");

    for (uint8_t type : {uint8_t{0}, uint8_t{7}, uint8_t{255}}) {
        std::vector<uint8_t> unknown = bytes;
        unknown[5] = type;
        expect_refused(unknown, "unknown type " + std::to_string(type));
    }

    expect_refused(message(MessageType::kData, 0, 9, 4), "without its connection ids");
    expect_refused(message(MessageType::kAccept, 7, 0, 4), "without its connection ids");
    expect_refused(message(MessageType::kBye, 7, 9, 1), "control message with 1 bytes of payload");
}

// HELLO and REJECT keep their layout in every version, so a listener can
// answer a HELLO of any version with REJECT, and a client can read a REJECT
// of any version: both are decoded whatever their version byte says.
TEST(FabricWire, HelloAndRejectOfAnyVersionAreReadSoPeersCanSayTheyDiffer) {
    for (uint8_t version : {uint8_t{1}, uint8_t{2}, uint8_t{4}, uint8_t{255}}) {
        SCOPED_TRACE(static_cast<int>(version));
        for (MessageType type : {MessageType::kHello, MessageType::kReject}) {
            std::vector<uint8_t> bytes = message(type, type == MessageType::kHello ? 0 : 7, 9,
                                                 type == MessageType::kHello ? 40 : 0);
            bytes[4] = version;
            Header header;
            Reason why;
            ASSERT_TRUE(decode_header(bytes.data(), bytes.size(), &header, &why)) << why.text;
            EXPECT_EQ(header.type, type);
            EXPECT_EQ(header.version, version);
        }
    }
    // The listener has no connection id to give: a REJECT's source may be 0, its destination may not.
    Header header;
    Reason why;
    const std::vector<uint8_t> from_listener = message(MessageType::kReject, 7, 0);
    EXPECT_TRUE(decode_header(from_listener.data(), from_listener.size(), &header, &why)) << why.text;
    expect_refused(message(MessageType::kReject, 0, 0), "without its connection ids");
    expect_refused(message(MessageType::kReject, 7, 0, 1), "control message with 1 bytes of payload");
}

}  // namespace
}  // namespace afmesh::fabric
