// SPDX-License-Identifier: Apache-2.0
// The tcp transport's wire formats (transports/tcp/wire.cpp, address.cpp):
// the 40-byte frame header every operation's bytes travel behind, and the
// listen-address blob a peer publishes through the scheduler. The input's
// first byte picks one (0: frame header, 1: address blob), the rest is the
// bytes.
//
// Properties: both formats are canonical (fixed fields, reserved bytes and
// IPv4 padding required to be zero), so an accepted header or blob encodes
// back to the same bytes; a refusal always says why.
#include <cstddef>
#include <cstdint>
#include <span>

#include "fuzz_support.h"
#include "transports/tcp/address.h"
#include "transports/tcp/wire.h"

namespace {

namespace fuzz = afmesh::fuzz;
namespace tcp = afmesh::tcp;

enum Selector : uint8_t { kFrameHeader = 0, kAddress = 1 };

void check_frame_header(std::span<const uint8_t> bytes) {
    // The receiver decodes a header once all of its bytes are in.
    if (bytes.size() != tcp::kFrameHeaderSize) return;
    tcp::FrameHeader header;
    tcp::Reason why;
    if (!tcp::decode_frame_header(bytes.data(), &header, &why)) {
        fuzz::check(why.text[0] != '\0', "a tcp frame header was refused without a reason");
        return;
    }
    uint8_t again[tcp::kFrameHeaderSize];
    tcp::encode_frame_header(header, again);
    fuzz::check(fuzz::same_bytes(bytes, again), "accepted tcp frame header re-encodes differently");
}

void check_address(std::span<const uint8_t> blob) {
    tcp::SocketAddress address;
    tcp::Reason why;
    if (!tcp::decode_address(blob.data(), blob.size(), &address, &why)) {
        fuzz::check(why.text[0] != '\0', "a tcp address was refused without a reason");
        return;
    }
    uint8_t again[tcp::kAddressBlobSize];
    fuzz::check(tcp::encode_address(address, again), "a decoded tcp address cannot be encoded");
    fuzz::check(fuzz::same_bytes(blob, again), "accepted tcp address re-encodes differently");
    // What the module does next with a peer's address: name it in messages.
    (void)tcp::is_wildcard(address);
    (void)tcp::format_address(address);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz::Selected in;
    if (!fuzz::split_selector(data, size, &in)) return 0;
    switch (in.selector) {
    case kFrameHeader: check_frame_header(in.rest); break;
    case kAddress: check_address(in.rest); break;
    default: break;
    }
    return 0;
}
