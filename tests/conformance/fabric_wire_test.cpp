// The fabric module's two-sided message format (transports/fabric/wire.h):
// every message a peer may send is decoded or refused with a reason, never
// trusted. Forged bytes stand in for a confused or hostile peer.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

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

TEST(FabricWire, EveryTypeRoundTripsWithItsIds) {
    struct Case {
        MessageType type;
        uint32_t dst;
        size_t payload;
    };
    for (const Case &c : {Case{MessageType::kHello, 0, 40}, Case{MessageType::kAccept, 7, 40},
                          Case{MessageType::kData, 7, 100}, Case{MessageType::kBye, 0, 0},
                          Case{MessageType::kImm, 7, kImmPayloadSize}}) {
        SCOPED_TRACE(static_cast<int>(c.type));
        const std::vector<uint8_t> bytes = message(c.type, c.dst, 9, c.payload);
        Header header;
        Reason why;
        ASSERT_TRUE(decode_header(bytes.data(), bytes.size(), &header, &why)) << why.text;
        EXPECT_EQ(header.type, c.type);
        EXPECT_EQ(header.dst_conn, c.dst);
        EXPECT_EQ(header.src_conn, 9u);
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
    expect_refused(other_magic, "magic and version 2");

    std::vector<uint8_t> version_1 = bytes;  // a peer from before IMM messages is not heard
    version_1[4] = 1;
    expect_refused(version_1, "magic and version 2");

    for (uint8_t type : {uint8_t{0}, uint8_t{6}, uint8_t{255}}) {
        std::vector<uint8_t> unknown = bytes;
        unknown[5] = type;
        expect_refused(unknown, "unknown type " + std::to_string(type));
    }

    expect_refused(message(MessageType::kData, 0, 9, 4), "without its connection ids");
    expect_refused(message(MessageType::kAccept, 7, 0, 4), "without its connection ids");
    expect_refused(message(MessageType::kBye, 7, 9, 1), "control message with 1 bytes of payload");
}

}  // namespace
}  // namespace afmesh::fabric
