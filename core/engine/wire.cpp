// SPDX-License-Identifier: Apache-2.0
#include "engine/wire.h"

#include <cassert>

#include "byte_codec.h"

namespace afmesh::wire {
namespace {

constexpr uint32_t kMaxTensorsPerMessage = 1 << 16;
// Encoded sizes: a tensor's metadata without its shape, and what a pull adds (rkey, offset).
constexpr size_t kTensorBytes = 8 + 8 + 4 + 1;
constexpr size_t kPullExtraBytes = 16 + 8;
// A REQUEST's fields before its tensors' metadata: type, slot, generation,
// posted_ns, push_writes, flags; then the two counts.
constexpr size_t kRequestHeaderBytes = 1 + 2 + 2 + 8 + 4 + 1;
constexpr size_t kRequestFixedBytes = kRequestHeaderBytes + 4 + 4;
// type, slot, generation, three timestamps, pull_writes, flags, and the count.
constexpr size_t kResponseFixedBytes = 1 + 2 + 2 + 3 * 8 + 4 + 1 + 4;

// The flags byte of a REQUEST and of a RESPONSE.
constexpr uint8_t kAborted = 1;       // REQUEST: aborted; RESPONSE: failed
constexpr uint8_t kEager = 2;         // the tensors' bytes follow the metadata
constexpr uint8_t kEagerAnswers = 4;  // REQUEST: answers may come eagerly
constexpr uint8_t kCarried = 8;       // written by a carrier, which the write count leaves out
constexpr uint8_t kRequestFlags = kAborted | kEager | kEagerAnswers | kCarried;
constexpr uint8_t kResponseFlags = kAborted | kEager | kCarried;
// Most mailbox entries a peer may offer: entries are named by 16 bits of the immediate.
constexpr uint32_t kMaxMailboxEntries = 1 << 16;

Status malformed(const char *what) { return {Code::kPeerFailed, std::string("malformed ") + what + " message"}; }

// At least one write per tensor unless the sender gave up part-way (the
// carrier, left out of the count, may have been the last tensor's); never
// more than chunking allows. None at all when the bytes came eagerly (and
// then the sender did not give up: it had every byte).
bool writes_plausible(uint32_t writes, bool gave_up, bool eager, bool carried, size_t tensors,
                      uint64_t most_writes) {
    if (eager) return writes == 0 && !gave_up;
    return writes <= most_writes && (gave_up || uint64_t{writes} + carried >= tensors);
}


// Eager bytes follow the metadata: exactly `bytes` of them, the rest of the
// message. *data is always set: messages are decoded into reused structs.
bool get_eager(ByteReader &r, bool eager, uint64_t bytes, const uint8_t **data) {
    *data = nullptr;
    if (!eager) return r.done();
    if (!r.ok() || r.remaining() != bytes) return false;
    *data = r.here();
    return true;
}

template <class Writer>
void put_rkey(Writer &w, const afmesh_net_rkey &k) {
    w.u64(k.key);
    w.u64(k.addr);
}

afmesh_net_rkey get_rkey(ByteReader &r) {
    afmesh_net_rkey k;
    k.key = r.u64();
    k.addr = r.u64();
    return k;
}

void put_mailbox(ByteWriter &w, const MailboxAddress &m) {
    put_rkey(w, m.rkey);
    w.u64(m.offset);
    w.u32(m.entries);
}

bool get_mailbox(ByteReader &r, MailboxAddress *m) {
    m->rkey = get_rkey(r);
    m->offset = r.u64();
    m->entries = r.u32();
    return r.ok() && m->entries <= kMaxMailboxEntries;
}

template <class Writer>
void put_tensor(Writer &w, const TensorMeta &t) {
    w.u64(t.key);
    w.u64(t.bytes);
    w.u8(t.dtype.code);
    w.u8(t.dtype.bits);
    w.u16(t.dtype.lanes);
    w.u8(static_cast<uint8_t>(t.ndim));
    for (uint32_t i = 0; i < t.ndim; ++i) w.i64(t.shape[i]);
}

bool get_tensor(ByteReader &r, TensorMeta *t) {
    t->key = r.u64();
    t->bytes = r.u64();
    t->dtype.code = r.u8();
    t->dtype.bits = r.u8();
    t->dtype.lanes = r.u16();
    t->ndim = r.u8();
    if (!r.ok() || t->ndim > AFMESH_MAX_DIMS || t->bytes >= kMaxTensorBytes) return false;
    for (uint32_t i = 0; i < t->ndim; ++i) t->shape[i] = r.i64();
    return r.ok();
}

// Reads a count and checks it against what the remaining bytes could hold.
bool get_count(ByteReader &r, size_t min_item_bytes, uint32_t *count) {
    *count = r.u32();
    return r.ok() && *count <= kMaxTensorsPerMessage && size_t{*count} * min_item_bytes <= r.remaining();
}

ByteReader open(const void *data, size_t len, Type expected) {
    ByteReader r(data, len);
    if (r.u8() != static_cast<uint8_t>(expected)) r.invalidate();
    return r;
}

}  // namespace

std::optional<Type> peek_type(const void *data, size_t len) {
    if (len == 0) return std::nullopt;
    uint8_t t = *static_cast<const uint8_t *>(data);
    if (t < static_cast<uint8_t>(Type::kIdent) || t > static_cast<uint8_t>(Type::kHeartbeat)) return std::nullopt;
    return static_cast<Type>(t);
}

void encode_bye(std::vector<uint8_t> &out) { out.push_back(static_cast<uint8_t>(Type::kBye)); }
void encode_heartbeat(std::vector<uint8_t> &out) { out.push_back(static_cast<uint8_t>(Type::kHeartbeat)); }

void encode(const Ident &m, std::vector<uint8_t> &out) {
    ByteWriter w(out);
    w.u8(static_cast<uint8_t>(Type::kIdent));
    w.u32(kMagic);
    w.u16(m.version);
    w.i32(m.worker_rank);
    w.i32(m.server_rank);
    w.raw(m.nonce.data(), m.nonce.size());
    put_mailbox(w, m.mailbox);
}

Status decode(const void *data, size_t len, Ident *m) {
    ByteReader r = open(data, len, Type::kIdent);
    uint32_t magic = r.u32();
    m->version = r.u16();
    if (r.ok() && magic == kMagic && m->version != kProtocolVersion)
        return {Code::kUnsupportedVersion, "peer speaks data protocol " + std::to_string(m->version) + ", this node " +
                                               std::to_string(kProtocolVersion)};
    m->worker_rank = r.i32();
    m->server_rank = r.i32();
    r.raw(m->nonce.data(), m->nonce.size());
    if (!get_mailbox(r, &m->mailbox) || !r.done() || magic != kMagic) return malformed("IDENT");
    return Status::ok();
}

void encode(const Challenge &m, std::vector<uint8_t> &out) {
    ByteWriter w(out);
    w.u8(static_cast<uint8_t>(Type::kChallenge));
    w.raw(m.nonce.data(), m.nonce.size());
    w.raw(m.mac.data(), m.mac.size());
}

Status decode(const void *data, size_t len, Challenge *m) {
    ByteReader r = open(data, len, Type::kChallenge);
    r.raw(m->nonce.data(), m->nonce.size());
    r.raw(m->mac.data(), m->mac.size());
    return r.done() ? Status::ok() : malformed("CHALLENGE");
}

void encode(const Proof &m, std::vector<uint8_t> &out) {
    ByteWriter w(out);
    w.u8(static_cast<uint8_t>(Type::kProof));
    w.raw(m.mac.data(), m.mac.size());
}

Status decode(const void *data, size_t len, Proof *m) {
    ByteReader r = open(data, len, Type::kProof);
    r.raw(m->mac.data(), m->mac.size());
    return r.done() ? Status::ok() : malformed("PROOF");
}

void encode(const MailboxAddress &m, std::vector<uint8_t> &out) {
    ByteWriter w(out);
    w.u8(static_cast<uint8_t>(Type::kMailbox));
    put_mailbox(w, m);
}

Status decode(const void *data, size_t len, MailboxAddress *m) {
    ByteReader r = open(data, len, Type::kMailbox);
    return get_mailbox(r, m) && r.done() ? Status::ok() : malformed("MAILBOX");
}

void encode(const Advert &m, std::vector<uint8_t> &out) {
    ByteWriter w(out);
    w.u8(static_cast<uint8_t>(Type::kAdvert));
    w.u64(m.key);
    put_rkey(w, m.rkey);
    w.u64(m.offset);
    w.u64(m.capacity);
}

Status decode(const void *data, size_t len, Advert *m) {
    ByteReader r = open(data, len, Type::kAdvert);
    m->key = r.u64();
    m->rkey = get_rkey(r);
    m->offset = r.u64();
    m->capacity = r.u64();
    return r.done() && m->capacity < kMaxTensorBytes ? Status::ok() : malformed("ADVERT");
}

void encode(const AllocReq &m, std::vector<uint8_t> &out) {
    ByteWriter w(out);
    w.u8(static_cast<uint8_t>(Type::kAllocReq));
    w.u64(m.key);
    w.u64(m.bytes);
}

Status decode(const void *data, size_t len, AllocReq *m) {
    ByteReader r = open(data, len, Type::kAllocReq);
    m->key = r.u64();
    m->bytes = r.u64();
    return r.done() && m->bytes < kMaxTensorBytes ? Status::ok() : malformed("ALLOC_REQ");
}

size_t request_size(size_t tensors, size_t pulls, size_t dims) {
    return kRequestFixedBytes + tensors * kTensorBytes + pulls * kPullExtraBytes + dims * sizeof(int64_t);
}

size_t response_size(size_t pulls) { return kResponseFixedBytes + pulls * sizeof(uint64_t); }

uint64_t eager_bytes(const Request &m) {
    uint64_t n = 0;
    for (const TensorMeta &t : m.pushes) n += t.bytes;
    return n;
}

uint64_t eager_bytes(const Response &m) {
    uint64_t n = 0;
    for (uint64_t b : m.pull_bytes) n += b;
    return n;
}

// REQUEST and RESPONSE are the hot path's messages: sized first, then
// written in place (ByteSpanWriter), not grown field by field.
namespace {

void put_request_header(ByteSpanWriter &w, const Request &m) {
    w.u8(static_cast<uint8_t>(Type::kRequest));
    w.u16(m.slot);
    w.u16(m.generation);
    w.u64(m.posted_ns);
    w.u32(m.push_writes);
    w.u8((m.aborted ? kAborted : 0) | (m.eager ? kEager : 0) | (m.eager_answers ? kEagerAnswers : 0) |
         (m.carried ? kCarried : 0));
}

void put_request_tensors(ByteSpanWriter &w, const Request &m) {
    w.u32(static_cast<uint32_t>(m.pushes.size()));
    for (const TensorMeta &t : m.pushes) put_tensor(w, t);
    w.u32(static_cast<uint32_t>(m.pulls.size()));
    for (const PullMeta &p : m.pulls) {
        put_tensor(w, p.tensor);
        put_rkey(w, p.rkey);
        w.u64(p.offset);
    }
}

// The bytes of m's tensors' metadata.
size_t request_tensors_size(const Request &m) {
    size_t dims = 0;
    for (const TensorMeta &t : m.pushes) dims += t.ndim;
    for (const PullMeta &p : m.pulls) dims += p.tensor.ndim;
    return request_size(m.pushes.size() + m.pulls.size(), m.pulls.size(), dims) - kRequestHeaderBytes;
}

}  // namespace

void encode(const Request &m, std::vector<uint8_t> &out) {
    const uint64_t eager = m.eager ? eager_bytes(m) : 0;
    const size_t at = out.size();
    out.resize(at + kRequestHeaderBytes + request_tensors_size(m) + eager);
    ByteSpanWriter w(out.data() + at, out.size() - at);
    put_request_header(w, m);
    put_request_tensors(w, m);
    if (m.eager) w.raw(m.eager_data, eager);
    assert(w.done());
}

void encode_tensors(const Request &m, std::vector<uint8_t> &out) {
    const size_t at = out.size();
    out.resize(at + request_tensors_size(m));
    ByteSpanWriter w(out.data() + at, out.size() - at);
    put_request_tensors(w, m);
    assert(w.done());
}

void encode(const Request &m, const std::vector<uint8_t> &tensors, std::span<const uint8_t> eager,
            std::vector<uint8_t> &out) {
    if (!m.eager) eager = {};
    const size_t at = out.size();
    out.resize(at + kRequestHeaderBytes + tensors.size() + eager.size());
    ByteSpanWriter w(out.data() + at, out.size() - at);
    put_request_header(w, m);
    w.raw(tensors.data(), tensors.size());
    w.raw(eager.data(), eager.size());
    assert(w.done());
}

Status decode(const void *data, size_t len, Request *m) {
    ByteReader r = open(data, len, Type::kRequest);
    m->slot = r.u16();
    m->generation = r.u16();
    m->posted_ns = r.u64();
    m->push_writes = r.u32();
    const uint8_t flags = r.u8();
    m->aborted = flags & kAborted;
    m->eager = flags & kEager;
    m->eager_answers = flags & kEagerAnswers;
    m->carried = flags & kCarried;
    uint32_t n = 0;
    if ((flags & ~kRequestFlags) || !get_count(r, kTensorBytes, &n)) return malformed("REQUEST");
    m->pushes.resize(n);
    uint64_t most_writes = 0;
    for (TensorMeta &t : m->pushes) {
        if (!get_tensor(r, &t)) return malformed("REQUEST");
        most_writes += max_writes(t.bytes);
    }
    if (!writes_plausible(m->push_writes, m->aborted, m->eager, m->carried, m->pushes.size(), most_writes))
        return malformed("REQUEST (write count)");
    if (!get_count(r, kTensorBytes + kPullExtraBytes, &n)) return malformed("REQUEST");
    m->pulls.resize(n);
    for (PullMeta &p : m->pulls) {
        if (!get_tensor(r, &p.tensor)) return malformed("REQUEST");
        p.rkey = get_rkey(r);
        p.offset = r.u64();
    }
    return get_eager(r, m->eager, eager_bytes(*m), &m->eager_data) ? Status::ok() : malformed("REQUEST");
}

void encode(const Response &m, std::vector<uint8_t> &out) {
    const uint64_t eager = m.eager ? eager_bytes(m) : 0;
    const size_t at = out.size();
    out.resize(at + response_size(m.pull_bytes.size()) + eager);
    ByteSpanWriter w(out.data() + at, out.size() - at);
    w.u8(static_cast<uint8_t>(Type::kResponse));
    w.u16(m.slot);
    w.u16(m.generation);
    w.u64(m.arrived_ns);
    w.u64(m.processed_ns);
    w.u64(m.responded_ns);
    w.u32(m.pull_writes);
    w.u8((m.failed ? kAborted : 0) | (m.eager ? kEager : 0) | (m.carried ? kCarried : 0));
    w.u32(static_cast<uint32_t>(m.pull_bytes.size()));
    for (uint64_t b : m.pull_bytes) w.u64(b);
    if (m.eager) w.raw(m.eager_data, eager);
    assert(w.done());
}

Status decode(const void *data, size_t len, Response *m) {
    ByteReader r = open(data, len, Type::kResponse);
    m->slot = r.u16();
    m->generation = r.u16();
    m->arrived_ns = r.u64();
    m->processed_ns = r.u64();
    m->responded_ns = r.u64();
    m->pull_writes = r.u32();
    const uint8_t flags = r.u8();
    m->failed = flags & kAborted;
    m->eager = flags & kEager;
    m->carried = flags & kCarried;
    uint32_t n = 0;
    if ((flags & ~kResponseFlags) || !get_count(r, 8, &n)) return malformed("RESPONSE");
    m->pull_bytes.resize(n);
    uint64_t most_writes = 0;
    for (uint64_t &b : m->pull_bytes) {
        b = r.u64();
        if (b >= kMaxTensorBytes) return malformed("RESPONSE");
        most_writes += max_writes(b);
    }
    if (!get_eager(r, m->eager, eager_bytes(*m), &m->eager_data)) return malformed("RESPONSE");
    return writes_plausible(m->pull_writes, m->failed, m->eager, m->carried, n, most_writes)
               ? Status::ok()
               : malformed("RESPONSE (write count)");
}

}  // namespace afmesh::wire
