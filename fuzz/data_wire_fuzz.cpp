// SPDX-License-Identifier: Apache-2.0
// The data plane's messages between workers and servers (core/engine/wire.cpp)
// as a receiver meets them: the input is one message, type byte first, and
// peek_type picks its decoder, as the engine's receive path does.
//
// Properties: an accepted message re-encodes to the same bytes (the encoding
// is canonical: fixed-width integers, only known flag bits, ndim shape
// entries, eager bytes exactly the rest of the message), so a difference is
// a field the decoder dropped or misread; and request_size/response_size,
// which the sender checks against the transport's message limit before it
// posts anything, agree with what encode() produced; and a REQUEST encoded
// in two pieces, as a prepared push-pull sends it (encode_tensors() once,
// the rest at each start), is the same message.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "engine/wire.h"
#include "fuzz_support.h"

namespace {

namespace fuzz = afmesh::fuzz;
namespace wire = afmesh::wire;

template <class Message>
bool round_trip(std::span<const uint8_t> message, const char *name, Message *m) {
    if (!wire::decode(message.data(), message.size(), m)) return false;
    std::vector<uint8_t> again;
    wire::encode(*m, again);
    fuzz::check(fuzz::same_bytes(message, again), "accepted data-plane message re-encodes differently", name);
    return true;
}

template <class Message>
void round_trip_only(std::span<const uint8_t> message, const char *name) {
    Message m;
    round_trip(message, name, &m);
}

/** Eager bytes are the message's tail, exactly; metadata-only messages point nowhere. */
void check_eager(std::span<const uint8_t> message, bool eager, const uint8_t *eager_data, uint64_t eager_bytes,
                 size_t metadata_bytes, const char *name) {
    fuzz::check(metadata_bytes + (eager ? eager_bytes : 0) == message.size(),
                "the size function disagrees with the encoding", name);
    if (eager) fuzz::check(eager_data == message.data() + metadata_bytes, "eager bytes are not the message's tail", name);
}

void check_request(std::span<const uint8_t> message) {
    wire::Request m;
    if (!round_trip(message, "REQUEST", &m)) return;
    size_t dims = 0;
    for (const wire::TensorMeta &t : m.pushes) dims += t.ndim;
    for (const wire::PullMeta &p : m.pulls) dims += p.tensor.ndim;
    const size_t metadata = wire::request_size(m.pushes.size() + m.pulls.size(), m.pulls.size(), dims);
    check_eager(message, m.eager, m.eager_data, wire::eager_bytes(m), metadata, "REQUEST");
    std::vector<uint8_t> tensors, pieces;
    wire::encode_tensors(m, tensors);
    wire::encode(m, tensors, {m.eager_data, m.eager ? wire::eager_bytes(m) : 0}, pieces);
    fuzz::check(fuzz::same_bytes(message, pieces), "a REQUEST encoded in two pieces differs from the whole", "REQUEST");
}

void check_response(std::span<const uint8_t> message) {
    wire::Response m;
    if (!round_trip(message, "RESPONSE", &m)) return;
    check_eager(message, m.eager, m.eager_data, wire::eager_bytes(m), wire::response_size(m.pull_bytes.size()),
                "RESPONSE");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const std::optional<wire::Type> type = wire::peek_type(data, size);
    if (!type) return 0;
    const std::span<const uint8_t> message(data, size);
    // No default: a message type added to wire.h fails this build (-Wswitch)
    // until its decoder is fuzzed here too.
    switch (*type) {
    case wire::Type::kIdent: round_trip_only<wire::Ident>(message, "IDENT"); break;
    case wire::Type::kAdvert: round_trip_only<wire::Advert>(message, "ADVERT"); break;
    case wire::Type::kAllocReq: round_trip_only<wire::AllocReq>(message, "ALLOC_REQ"); break;
    case wire::Type::kRequest: check_request(message); break;
    case wire::Type::kResponse: check_response(message); break;
    case wire::Type::kMailbox: round_trip_only<wire::MailboxAddress>(message, "MAILBOX"); break;
    case wire::Type::kChallenge: round_trip_only<wire::Challenge>(message, "CHALLENGE"); break;
    case wire::Type::kProof: round_trip_only<wire::Proof>(message, "PROOF"); break;
    case wire::Type::kBye:
    case wire::Type::kHeartbeat: break;  // no body: the type byte is the whole message, and no decoder reads it
    }
    return 0;
}
