// SPDX-License-Identifier: Apache-2.0
// The data-plane messages between workers and servers (core/engine/wire.h),
// without sockets: every message survives a round trip, every truncation is
// refused, and so are write counts that chunking cannot produce, eager
// messages whose bytes do not match their tensors, unknown flags and peers
// of another protocol version; mailbox addresses travel whole and within
// the immediate's reach.
#include <gtest/gtest.h>

#include <cstring>

#include "engine/wire.h"

namespace afmesh::wire {
namespace {

TensorMeta tensor(uint64_t key, uint64_t bytes) {
    TensorMeta t;
    t.key = key;
    t.bytes = bytes;
    t.dtype = {2, 32, 1};
    t.ndim = 2;
    t.shape[0] = 4;
    t.shape[1] = static_cast<int64_t>(bytes / 16);
    return t;
}

/** A REQUEST with an 8 KiB push (at most two writes) and an empty one (one write). */
Request sample_request(uint32_t push_writes, bool aborted) {
    Request r;
    r.slot = 7;
    r.generation = 3;
    r.posted_ns = 123456789;
    r.push_writes = push_writes;
    r.aborted = aborted;
    r.pushes = {tensor(1, 2 * kMinChunkBytes), tensor(2, 0)};
    PullMeta pull;
    pull.tensor = tensor(1000, 4096);
    pull.rkey = {0xabc, 0x1000};
    pull.offset = 64;
    r.pulls = {pull};
    return r;
}

/** A RESPONSE with one answer of kMinChunkBytes + 1 bytes: at most two writes. */
Response sample_response(uint32_t pull_writes, bool failed) {
    Response r;
    r.slot = 7;
    r.generation = 3;
    r.arrived_ns = 1;
    r.processed_ns = 2;
    r.responded_ns = 3;
    r.pull_writes = pull_writes;
    r.failed = failed;
    r.pull_bytes = {kMinChunkBytes + 1};
    return r;
}

template <class Message>
std::vector<uint8_t> encoded(const Message &m) {
    std::vector<uint8_t> out;
    encode(m, out);
    return out;
}

template <class Message>
Status decode_bytes(const std::vector<uint8_t> &bytes) {
    Message m;
    return decode(bytes.data(), bytes.size(), &m);
}

TEST(DataWire, RequestRoundTripsWithItsWriteCountAndAbortFlag) {
    const std::vector<uint8_t> bytes = encoded(sample_request(3, false));
    ASSERT_EQ(peek_type(bytes.data(), bytes.size()), Type::kRequest);
    Request back;
    ASSERT_TRUE(decode(bytes.data(), bytes.size(), &back));
    EXPECT_EQ(back.slot, 7);
    EXPECT_EQ(back.generation, 3);
    EXPECT_EQ(back.posted_ns, 123456789u);
    EXPECT_EQ(back.push_writes, 3u);
    EXPECT_FALSE(back.aborted);
    ASSERT_EQ(back.pushes.size(), 2u);
    EXPECT_EQ(back.pushes[0].bytes, 2 * kMinChunkBytes);
    EXPECT_EQ(back.pushes[0].shape[1], static_cast<int64_t>(2 * kMinChunkBytes / 16));
    ASSERT_EQ(back.pulls.size(), 1u);
    EXPECT_EQ(back.pulls[0].rkey.key, 0xabcu);
    EXPECT_EQ(back.pulls[0].offset, 64u);

    const std::vector<uint8_t> aborted = encoded(sample_request(1, true));
    ASSERT_TRUE(decode(aborted.data(), aborted.size(), &back));
    EXPECT_TRUE(back.aborted);
    EXPECT_EQ(back.push_writes, 1u);
}

// The worker checks a REQUEST's size against the transport's limit before
// it posts anything, from this arithmetic rather than by encoding it.
TEST(DataWire, RequestSizeIsWhatEncodingGives) {
    Request r = sample_request(3, false);  // three tensors of two dimensions, one of them a pull
    EXPECT_EQ(encoded(r).size(), request_size(3, 1, 6));
    r.pulls.clear();
    r.pushes[1].ndim = AFMESH_MAX_DIMS;
    EXPECT_EQ(encoded(r).size(), request_size(2, 0, 2 + AFMESH_MAX_DIMS));
}

TEST(DataWire, ResponseRoundTripsWithItsWriteCountAndFailureFlag) {
    const std::vector<uint8_t> bytes = encoded(sample_response(2, true));
    Response back;
    ASSERT_TRUE(decode(bytes.data(), bytes.size(), &back));
    EXPECT_EQ(back.slot, 7);
    EXPECT_EQ(back.responded_ns, 3u);
    EXPECT_EQ(back.pull_writes, 2u);
    EXPECT_TRUE(back.failed);
    EXPECT_EQ(back.pull_bytes, (std::vector<uint64_t>{kMinChunkBytes + 1}));
}

TEST(DataWire, EveryTruncationIsRefused) {
    const std::vector<uint8_t> request = encoded(sample_request(3, false));
    const std::vector<uint8_t> response = encoded(sample_response(2, false));
    for (size_t len = 0; len < request.size(); ++len)
        EXPECT_FALSE(decode_bytes<Request>({request.begin(), request.begin() + static_cast<long>(len)}))
            << "REQUEST cut to " << len << " bytes";
    for (size_t len = 0; len < response.size(); ++len)
        EXPECT_FALSE(decode_bytes<Response>({response.begin(), response.begin() + static_cast<long>(len)}))
            << "RESPONSE cut to " << len << " bytes";
}

// A tensor travels in one write, or in chunks of at least kMinChunkBytes:
// a peer announcing more writes than that, or (unless it gave up part-way)
// fewer than one per tensor, would leave the receiver waiting for
// immediates that never come, or finishing before the data is there.
TEST(DataWire, WriteCountsChunkingCannotProduceAreRefused) {
    EXPECT_TRUE(decode_bytes<Request>(encoded(sample_request(3, false))));  // 2 + 1: the most
    EXPECT_TRUE(decode_bytes<Request>(encoded(sample_request(2, false))));  // one write each
    const Status too_many = decode_bytes<Request>(encoded(sample_request(4, false)));
    EXPECT_FALSE(too_many);
    EXPECT_NE(too_many.message().find("write count"), std::string::npos) << too_many.message();
    EXPECT_FALSE(decode_bytes<Request>(encoded(sample_request(1, false))));  // fewer than the pushes
    EXPECT_TRUE(decode_bytes<Request>(encoded(sample_request(0, true))));    // aborted before any write
    EXPECT_FALSE(decode_bytes<Request>(encoded(sample_request(4, true))));

    EXPECT_TRUE(decode_bytes<Response>(encoded(sample_response(2, false))));
    EXPECT_FALSE(decode_bytes<Response>(encoded(sample_response(3, false))));
    EXPECT_FALSE(decode_bytes<Response>(encoded(sample_response(0, false))));
    EXPECT_TRUE(decode_bytes<Response>(encoded(sample_response(0, true))));
}

// A carried message arrives with the write it rode on, which its count
// leaves out: one write fewer than the tensors is then plausible, not more.
TEST(DataWire, CarriedMessagesCountOneWriteFewer) {
    Request request = sample_request(1, false);
    EXPECT_FALSE(decode_bytes<Request>(encoded(request)));  // two pushes, one write, nothing carried
    request.carried = true;
    Request back;
    const std::vector<uint8_t> bytes = encoded(request);
    ASSERT_TRUE(decode(bytes.data(), bytes.size(), &back));
    EXPECT_TRUE(back.carried);
    EXPECT_EQ(back.push_writes, 1u);
    request.push_writes = 0;  // two pushes cannot fit in the carrier alone
    EXPECT_FALSE(decode_bytes<Request>(encoded(request)));
    request.push_writes = 4;  // nor can chunking give more than before
    EXPECT_FALSE(decode_bytes<Request>(encoded(request)));

    Response response = sample_response(0, false);
    EXPECT_FALSE(decode_bytes<Response>(encoded(response)));
    response.carried = true;
    Response answer;
    const std::vector<uint8_t> answer_bytes = encoded(response);
    ASSERT_TRUE(decode(answer_bytes.data(), answer_bytes.size(), &answer));
    EXPECT_TRUE(answer.carried);
    EXPECT_FALSE(sample_response(2, false).carried);
}

TEST(DataWire, MailboxAddressesTravelInIdentAndMailbox) {
    Ident ident;
    ident.worker_rank = 2;
    ident.mailbox = {{0x1234, 0x5678}, 4096, 64};
    Ident back;
    const std::vector<uint8_t> bytes = encoded(ident);
    ASSERT_TRUE(decode(bytes.data(), bytes.size(), &back));
    EXPECT_EQ(back.worker_rank, 2);
    EXPECT_EQ(back.mailbox.rkey.key, 0x1234u);
    EXPECT_EQ(back.mailbox.rkey.addr, 0x5678u);
    EXPECT_EQ(back.mailbox.offset, 4096u);
    EXPECT_EQ(back.mailbox.entries, 64u);

    MailboxAddress mailbox{{7, 8}, 9, 1 << 16};
    const std::vector<uint8_t> mailbox_bytes = encoded(mailbox);
    ASSERT_EQ(peek_type(mailbox_bytes.data(), mailbox_bytes.size()), Type::kMailbox);
    MailboxAddress mailbox_back;
    ASSERT_TRUE(decode(mailbox_bytes.data(), mailbox_bytes.size(), &mailbox_back));
    EXPECT_EQ(mailbox_back.entries, uint32_t{1} << 16);
    for (size_t len = 0; len < mailbox_bytes.size(); ++len)
        EXPECT_FALSE(
            decode_bytes<MailboxAddress>({mailbox_bytes.begin(), mailbox_bytes.begin() + static_cast<long>(len)}))
            << "MAILBOX cut to " << len << " bytes";
    mailbox.entries = (1 << 16) + 1;  // an entry the immediate's 16 bits cannot name
    EXPECT_FALSE(decode_bytes<MailboxAddress>(encoded(mailbox)));
    ident.mailbox.entries = mailbox.entries;
    EXPECT_FALSE(decode_bytes<Ident>(encoded(ident)));
}

TEST(DataWire, HandshakeMessagesRoundTripAndRefuseTruncation) {
    Ident ident;
    ident.worker_rank = 1;
    ident.server_rank = 3;
    for (size_t i = 0; i < ident.nonce.size(); ++i) ident.nonce[i] = static_cast<uint8_t>(i + 1);
    Ident ident_back;
    const std::vector<uint8_t> ident_bytes = encoded(ident);
    ASSERT_TRUE(decode(ident_bytes.data(), ident_bytes.size(), &ident_back));
    EXPECT_EQ(ident_back.server_rank, 3);
    EXPECT_EQ(ident_back.nonce, ident.nonce);

    Challenge challenge;
    challenge.nonce.fill(0xab);
    challenge.mac.fill(0xcd);
    Proof proof;
    proof.mac.fill(0xef);
    const std::vector<uint8_t> challenge_bytes = encoded(challenge), proof_bytes = encoded(proof);
    EXPECT_EQ(peek_type(challenge_bytes.data(), challenge_bytes.size()), Type::kChallenge);
    EXPECT_EQ(peek_type(proof_bytes.data(), proof_bytes.size()), Type::kProof);
    Challenge challenge_back;
    Proof proof_back;
    ASSERT_TRUE(decode(challenge_bytes.data(), challenge_bytes.size(), &challenge_back));
    ASSERT_TRUE(decode(proof_bytes.data(), proof_bytes.size(), &proof_back));
    EXPECT_EQ(challenge_back.nonce, challenge.nonce);
    EXPECT_EQ(challenge_back.mac, challenge.mac);
    EXPECT_EQ(proof_back.mac, proof.mac);
    for (size_t len = 0; len < ident_bytes.size(); ++len)
        EXPECT_FALSE(decode_bytes<Ident>({ident_bytes.begin(), ident_bytes.begin() + static_cast<long>(len)}));
    for (size_t len = 0; len < challenge_bytes.size(); ++len)
        EXPECT_FALSE(
            decode_bytes<Challenge>({challenge_bytes.begin(), challenge_bytes.begin() + static_cast<long>(len)}));
    for (size_t len = 0; len < proof_bytes.size(); ++len)
        EXPECT_FALSE(decode_bytes<Proof>({proof_bytes.begin(), proof_bytes.begin() + static_cast<long>(len)}));
    std::vector<uint8_t> longer = proof_bytes;
    longer.push_back(0);
    EXPECT_FALSE(decode_bytes<Proof>(longer));

    std::vector<uint8_t> heartbeat;
    encode_heartbeat(heartbeat);
    EXPECT_EQ(peek_type(heartbeat.data(), heartbeat.size()), Type::kHeartbeat);
    const uint8_t unknown = static_cast<uint8_t>(Type::kHeartbeat) + 1;
    EXPECT_EQ(peek_type(&unknown, 1), std::nullopt);
}

TEST(DataWire, UnknownFlagsAreRefused) {
    // type, slot, generation, posted_ns, push_writes: the flags byte follows.
    std::vector<uint8_t> request = encoded(sample_request(3, false));
    constexpr size_t kRequestFlags = 1 + 2 + 2 + 8 + 4;
    ASSERT_TRUE(decode_bytes<Request>(request));
    request[kRequestFlags] = 16;
    EXPECT_FALSE(decode_bytes<Request>(request));
    // type, slot, generation, three timestamps, pull_writes.
    std::vector<uint8_t> response = encoded(sample_response(2, false));
    constexpr size_t kResponseFlags = 1 + 2 + 2 + 3 * 8 + 4;
    ASSERT_TRUE(decode_bytes<Response>(response));
    response[kResponseFlags] = 0x80;
    EXPECT_FALSE(decode_bytes<Response>(response));
}

/** An eager REQUEST: a 5-byte and an empty push travel inside it, and the answers may come so. */
Request eager_request(const uint8_t *bytes) {
    Request r = sample_request(0, false);
    r.pushes = {tensor(1, 5), tensor(2, 0)};
    r.eager = true;
    r.eager_answers = true;
    r.eager_data = bytes;
    return r;
}

TEST(DataWire, EagerBytesTravelInsideTheirMessage) {
    const uint8_t pushed[5] = {1, 2, 3, 4, 5};
    const std::vector<uint8_t> request = encoded(eager_request(pushed));
    EXPECT_EQ(request.size(), encoded(sample_request(2, false)).size() + sizeof pushed);
    Request in;
    ASSERT_TRUE(decode(request.data(), request.size(), &in));
    EXPECT_TRUE(in.eager);
    EXPECT_TRUE(in.eager_answers);
    ASSERT_NE(in.eager_data, nullptr);
    EXPECT_EQ(std::vector<uint8_t>(in.eager_data, in.eager_data + 5), std::vector<uint8_t>(pushed, pushed + 5));

    Response r = sample_response(0, false);
    const uint8_t answer[3] = {9, 8, 7};
    r.pull_bytes = {3, 0};
    r.eager = true;
    r.eager_data = answer;
    const std::vector<uint8_t> response = encoded(r);
    Response back;
    ASSERT_TRUE(decode(response.data(), response.size(), &back));
    EXPECT_TRUE(back.eager);
    EXPECT_EQ(std::vector<uint8_t>(back.eager_data, back.eager_data + 3), std::vector<uint8_t>(answer, answer + 3));
}

// A prepared push-pull encodes its tensors' metadata once and the rest at
// each start: the two pieces must make exactly the message encode() makes,
// whatever the header's fields, eager or not.
TEST(DataWire, ARequestEncodedInTwoPiecesIsTheWholeRequest) {
    const uint8_t pushed[5] = {1, 2, 3, 4, 5};
    for (Request whole : {sample_request(3, false), sample_request(1, true), eager_request(pushed)}) {
        std::vector<uint8_t> tensors;
        encode_tensors(whole, tensors);
        Request header = whole;  // the second piece reads no tensors of its own
        header.pushes.clear();
        header.pulls.clear();
        std::vector<uint8_t> pieces = {0xee};  // appended after what is there, as encode() does
        encode(header, tensors, {whole.eager_data, whole.eager ? eager_bytes(whole) : 0}, pieces);
        std::vector<uint8_t> expected = {0xee};
        encode(whole, expected);
        EXPECT_EQ(pieces, expected);
        Request back;
        ASSERT_TRUE(decode(pieces.data() + 1, pieces.size() - 1, &back));
        EXPECT_EQ(back.pushes.size(), whole.pushes.size());
        EXPECT_EQ(back.eager, whole.eager);
    }
}

// The engines decode every message into one reused struct: nothing of an
// earlier message may show through a later one.
TEST(DataWire, DecodingIntoAUsedStructLeavesNothingOfTheLastMessage) {
    const uint8_t pushed[5] = {1, 2, 3, 4, 5};
    const std::vector<uint8_t> eager = encoded(eager_request(pushed));
    Request plain = sample_request(1, false);
    plain.pushes = {tensor(7, 64)};
    plain.pulls.clear();
    const std::vector<uint8_t> written = encoded(plain);
    Request in;
    ASSERT_TRUE(decode(eager.data(), eager.size(), &in));
    ASSERT_TRUE(decode(written.data(), written.size(), &in));
    EXPECT_FALSE(in.eager);
    EXPECT_EQ(in.eager_data, nullptr);
    ASSERT_EQ(in.pushes.size(), 1u);
    EXPECT_EQ(in.pushes[0].key, 7u);
    EXPECT_TRUE(in.pulls.empty());

    Response answer = sample_response(0, false);
    const uint8_t bytes[3] = {9, 8, 7};
    answer.pull_bytes = {3};
    answer.eager = true;
    answer.eager_data = bytes;
    const std::vector<uint8_t> eager_answer = encoded(answer);
    const std::vector<uint8_t> written_answer = encoded(sample_response(1, false));
    Response back;
    ASSERT_TRUE(decode(eager_answer.data(), eager_answer.size(), &back));
    ASSERT_TRUE(decode(written_answer.data(), written_answer.size(), &back));
    EXPECT_FALSE(back.eager);
    EXPECT_EQ(back.eager_data, nullptr);
    EXPECT_EQ(back.pull_bytes, sample_response(1, false).pull_bytes);
}

// The tensors' lengths say how many eager bytes follow: one more or one
// fewer is refused, and so are writes announced besides (the receiver would
// wait for immediates that never come) or an abort (the sender had every byte).
TEST(DataWire, EagerMessagesMustCarryExactlyTheirTensorsBytes) {
    const uint8_t pushed[6] = {1, 2, 3, 4, 5, 6};
    std::vector<uint8_t> request = encoded(eager_request(pushed));
    request.push_back(0);
    EXPECT_FALSE(decode_bytes<Request>(request));
    request.resize(request.size() - 2);
    EXPECT_FALSE(decode_bytes<Request>(request));  // every shorter cut: EveryTruncationIsRefused
    Request writes = eager_request(pushed);
    writes.push_writes = 1;
    EXPECT_FALSE(decode_bytes<Request>(encoded(writes)));
    Request aborted = eager_request(pushed);
    aborted.aborted = true;
    EXPECT_FALSE(decode_bytes<Request>(encoded(aborted)));

    const uint8_t answer[4] = {};
    Response r = sample_response(0, false);
    r.pull_bytes = {4};
    r.eager = true;
    r.eager_data = answer;
    std::vector<uint8_t> response = encoded(r);
    ASSERT_TRUE(decode_bytes<Response>(response));
    response.pop_back();
    EXPECT_FALSE(decode_bytes<Response>(response));
    r.pull_writes = 1;
    EXPECT_FALSE(decode_bytes<Response>(encoded(r)));
}

TEST(DataWire, APeerOfAnotherProtocolVersionIsRefusedNamingBoth) {
    Ident old_peer;
    old_peer.version = 1;
    old_peer.worker_rank = 0;
    const Status s = decode_bytes<Ident>(encoded(old_peer));
    EXPECT_EQ(s.code(), Code::kUnsupportedVersion);
    EXPECT_NE(s.message().find("protocol 1, this node " + std::to_string(kProtocolVersion)), std::string::npos)
        << s.message();
    Ident current;
    current.worker_rank = 3;
    Ident back;
    const std::vector<uint8_t> bytes = encoded(current);
    ASSERT_TRUE(decode(bytes.data(), bytes.size(), &back));
    EXPECT_EQ(back.worker_rank, 3);
}

}  // namespace
}  // namespace afmesh::wire
