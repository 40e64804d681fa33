// SPDX-License-Identifier: Apache-2.0
// The ibverbs transport's wire formats (transports/ibverbs/wire.cpp): the
// listen-address blob a peer publishes through the scheduler, and the
// fixed-size handshake messages of the TCP side channel that sets up a
// queue pair. The input's first byte picks: 0, an address blob; 1-3, a
// handshake message read where that HandshakeType (REQUEST, REPLY, READY)
// is expected. The rest is the bytes.
//
// Properties: an accepted blob or message encodes back to the same bytes
// outside the ones the format reserves (the decoder does not read them; an
// IPv4 side channel leaves the last 12 of the 16 address bytes unused), and
// the re-encoding is accepted again with the same meaning.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "fuzz_support.h"
#include "transports/ibverbs/wire.h"

namespace {

namespace fuzz = afmesh::fuzz;
namespace ibverbs = afmesh::ibverbs;

constexpr uint8_t kAddressSelector = 0;

// Address: a reserved byte after the family, the unused part of an IPv4
// address, and the tail after the GID. Handshake: two bytes after the LID
// and the tail after the GID.
constexpr fuzz::ByteRange kAddressReserved{7, 1}, kAddressTail{44, 4}, kIpv4Unused{16, 12};
constexpr fuzz::ByteRange kHandshakeReserved{18, 2}, kHandshakeTail{36, 28};

void check_address(std::span<const uint8_t> blob) {
    ibverbs::EndpointAddress address;
    std::string why;
    if (!ibverbs::decode_address(blob.data(), blob.size(), &address, &why)) {
        fuzz::check(!why.empty(), "an ibverbs address was refused without a reason");
        return;
    }
    uint8_t again[ibverbs::kAddressSize];
    ibverbs::encode_address(address, again);
    const bool ipv4 = address.side_channel.ss_family == AF_INET;
    fuzz::check(fuzz::same_bytes(blob, again, {kAddressReserved, kAddressTail, ipv4 ? kIpv4Unused : fuzz::ByteRange{}}),
                "accepted ibverbs address re-encodes differently");
    // Encoding what the re-encoding decodes to must give the same bytes again.
    ibverbs::EndpointAddress address_again;
    uint8_t third[ibverbs::kAddressSize];
    fuzz::check(ibverbs::decode_address(again, sizeof again, &address_again, &why),
                "a re-encoded ibverbs address is refused", why.c_str());
    ibverbs::encode_address(address_again, third);
    fuzz::check(fuzz::same_bytes(again, third), "a re-encoded ibverbs address reads differently");
    // What the module does next with a peer's address: name it in messages.
    (void)ibverbs::format_sockaddr(address.side_channel);
}

void check_handshake(std::span<const uint8_t> message, ibverbs::HandshakeType expected) {
    // The side channel reads exactly one message's bytes before decoding them.
    if (message.size() != ibverbs::kHandshakeSize) return;
    ibverbs::QpInfo info;
    std::string why;
    if (!ibverbs::decode_handshake(message.data(), expected, &info, &why)) {
        fuzz::check(!why.empty(), "an ibverbs handshake was refused without a reason");
        return;
    }
    uint8_t again[ibverbs::kHandshakeSize];
    ibverbs::encode_handshake(expected, info, again);
    fuzz::check(fuzz::same_bytes(message, again, {kHandshakeReserved, kHandshakeTail}),
                "accepted ibverbs handshake re-encodes differently");
    ibverbs::QpInfo info_again;
    uint8_t third[ibverbs::kHandshakeSize];
    fuzz::check(ibverbs::decode_handshake(again, expected, &info_again, &why),
                "a re-encoded ibverbs handshake is refused", why.c_str());
    ibverbs::encode_handshake(expected, info_again, third);
    fuzz::check(fuzz::same_bytes(again, third), "a re-encoded ibverbs handshake reads differently");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz::Selected in;
    if (!fuzz::split_selector(data, size, &in)) return 0;
    if (in.selector == kAddressSelector) {
        check_address(in.rest);
    } else if (in.selector >= static_cast<uint8_t>(ibverbs::HandshakeType::kRequest) &&
               in.selector <= static_cast<uint8_t>(ibverbs::HandshakeType::kReady)) {
        check_handshake(in.rest, static_cast<ibverbs::HandshakeType>(in.selector));
    }
    return 0;
}
