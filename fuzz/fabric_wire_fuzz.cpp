// SPDX-License-Identifier: Apache-2.0
// The fabric transport's wire formats (transports/fabric/wire.cpp,
// address.cpp): the header of every two-sided message, with the handshake's
// payloads (HELLO and ACCEPT carry an address blob; REJECT and BYE none; IMM
// the immediate), and the address blob itself. The input's first byte picks:
//   0  one received message, checked as the progress thread's on_message
//      does; address payloads are read with the FI_SOCKADDR_IN format
//   1  an address blob: a little-endian u32 (the format this side's
//      provider uses), then the blob
//
// Properties: an accepted header or blob encodes back to the same bytes
// except where the format lets them differ: the reserved bytes, which the
// decoder does not read, and the version of a HELLO or REJECT, which may be
// any (the encoder writes its own); the re-encoding is accepted again with
// the same meaning; a refusal always says why.
#include <rdma/fabric.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "fuzz_support.h"
#include "transports/fabric/address.h"
#include "byte_codec.h"
#include "transports/fabric/wire.h"

namespace {

namespace fuzz = afmesh::fuzz;
namespace fabric = afmesh::fabric;

enum Selector : uint8_t { kMessage = 0, kAddress = 1 };

// The header's reserved u16 and the address blob's reserved byte.
constexpr fuzz::ByteRange kHeaderReserved{6, 2}, kAddressReserved{5, 1};
constexpr fuzz::ByteRange kHeaderVersion{4, 1};

void check_address(std::span<const uint8_t> blob, uint32_t format) {
    std::vector<uint8_t> raw;
    fabric::Reason why;
    if (!fabric::decode_address(blob.data(), blob.size(), format, &raw, &why)) {
        fuzz::check(why.text[0] != '\0', "a fabric address was refused without a reason");
        return;
    }
    std::vector<uint8_t> again, raw_again;
    fuzz::check(fabric::encode_address(format, raw, &again), "a decoded fabric address cannot be encoded");
    fuzz::check(fuzz::same_bytes(blob, again, {kAddressReserved}), "accepted fabric address re-encodes differently");
    fuzz::check(fabric::decode_address(again.data(), again.size(), format, &raw_again, &why) && raw_again == raw,
                "a re-encoded fabric address reads differently");
}

void check_message(std::span<const uint8_t> message) {
    // on_message drops what does not fit a receive buffer before decoding.
    if (message.size() > fabric::kMessageBufferSize) return;
    fabric::Header header;
    fabric::Reason why;
    if (!fabric::decode_header(message.data(), message.size(), &header, &why)) {
        fuzz::check(why.text[0] != '\0', "a fabric message was refused without a reason");
        return;
    }
    const bool any_version = header.type == fabric::MessageType::kHello || header.type == fabric::MessageType::kReject;
    fuzz::check(any_version || header.version == fabric::kWireVersion, "a message of another version was accepted");

    std::vector<uint8_t> again(message.begin(), message.end());
    fabric::encode_header(header, again.data());
    fuzz::check(fuzz::same_bytes(message, again, {kHeaderReserved, any_version ? kHeaderVersion : fuzz::ByteRange{}}),
                "accepted fabric header re-encodes differently");
    fabric::Header header_again;
    fuzz::check(fabric::decode_header(again.data(), again.size(), &header_again, &why) &&
                    header_again.type == header.type && header_again.dst_conn == header.dst_conn &&
                    header_again.src_conn == header.src_conn && header_again.version == fabric::kWireVersion,
                "a re-encoded fabric header reads differently");

    const std::span<const uint8_t> payload = message.subspan(fabric::kHeaderSize);
    switch (header.type) {
    case fabric::MessageType::kHello:
    case fabric::MessageType::kAccept: check_address(payload, FI_SOCKADDR_IN); break;
    case fabric::MessageType::kImm:
        fuzz::check(payload.size() == fabric::kImmPayloadSize, "an IMM message without its immediate");
        break;
    case fabric::MessageType::kBye:
    case fabric::MessageType::kReject:
        fuzz::check(payload.empty(), "a control message with a payload was accepted");
        break;
    case fabric::MessageType::kData: break;  // the application's bytes
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz::Selected in;
    if (!fuzz::split_selector(data, size, &in)) return 0;
    switch (in.selector) {
    case kMessage: check_message(in.rest); break;
    case kAddress:
        if (in.rest.size() >= sizeof(uint32_t))
            check_address(in.rest.subspan(sizeof(uint32_t)), afmesh::load_le32(in.rest.data()));
        break;
    default: break;
    }
    return 0;
}
