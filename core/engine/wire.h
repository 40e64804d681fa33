// SPDX-License-Identifier: Apache-2.0
// Data-plane messages between workers and servers, carried by the
// transport's two-sided send. Tensor bytes move with one write_imm each into
// pre-advertised slices (see imm.h), except small ones, which travel inside
// the REQUEST or RESPONSE (eager): one transport operation each way instead
// of two, which is most of a small push-pull's cost on a provider like shm.
// Where the transport has a gathered write, a REQUEST or RESPONSE instead
// rides on its last tensor write into the peer's mailbox (mailbox.h): one
// operation each way for large tensors too.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "afmesh/afmesh.h"
#include "afmesh/hal/transport.h"
#include "crypto.h"
#include "status.h"

namespace afmesh::wire {

constexpr uint32_t kMagic = 0x444d4641;  // "AFMD"
// 2: REQUEST and RESPONSE carry their write counts and a failure flag;
// 3: and, eager, the tensors' bytes themselves;
// 4: mailboxes (IDENT and MAILBOX), and REQUEST and RESPONSE carried by a write;
// 5: connections are authenticated (IDENT, CHALLENGE, PROOF) and kept alive (HEARTBEAT).
constexpr uint16_t kProtocolVersion = 5;
constexpr uint64_t kMaxTensorBytes = uint64_t{1} << 48;
/**
 * A tensor may travel in several writes (staged device memory is sent chunk
 * by chunk); every write but a tensor's last carries at least this many
 * bytes, which bounds the writes a message may announce
 * (AFMESH_STAGING_CHUNK's minimum).
 */
constexpr uint64_t kMinChunkBytes = 4096;

/** The most writes a tensor of `bytes` may travel in. */
constexpr uint64_t max_writes(uint64_t bytes) {
    return bytes > kMinChunkBytes ? (bytes + kMinChunkBytes - 1) / kMinChunkBytes : 1;
}

enum class Type : uint8_t {
    kIdent = 1,      // worker -> server, first message on a connection
    kAdvert = 2,     // server -> worker: a receive slice for one key
    kAllocReq = 3,   // worker -> server: please provide a slice of at least `bytes` for `key`
    kRequest = 4,    // worker -> server: one push-pull's metadata
    kResponse = 5,   // server -> worker: the answer's lengths and timestamps
    kBye = 6,        // either way: this node is stopping; the connection closes next
    kMailbox = 7,    // server -> worker: where the worker may write its REQUESTs
    kChallenge = 8,  // server -> worker, answering IDENT: the server's nonce and proof
    kProof = 9,      // worker -> server, answering CHALLENGE: the worker's proof
    kHeartbeat = 10, // either way, every AFMESH_HEARTBEAT_MS: this node is alive
};

/** Where a peer may write messages: `entries` slots of Mailbox::kSlotBytes from `offset` on in `rkey`. */
struct MailboxAddress {
    afmesh_net_rkey rkey{};
    uint64_t offset = 0;
    uint32_t entries = 0;  // 0: no mailbox
};

/** Opens a connection; the server answers with a CHALLENGE (handshake.h). */
struct Ident {
    uint16_t version = kProtocolVersion;
    int32_t worker_rank = -1;
    int32_t server_rank = -1;  // the server the worker means to reach
    crypto::Nonce nonce{};     // the worker's, fresh for this connection
    /** The worker's mailbox for this server's RESPONSEs (entries 0: none). */
    MailboxAddress mailbox;
};

/** The server's half of the handshake: its nonce, and its proof over both nonces. */
struct Challenge {
    crypto::Nonce nonce{};
    crypto::Mac mac{};
};

/** The worker's half: its proof over both nonces. */
struct Proof {
    crypto::Mac mac{};
};

struct Advert {
    uint64_t key = 0;
    afmesh_net_rkey rkey{};
    uint64_t offset = 0;  // of the slice inside the registration
    uint64_t capacity = 0;
};

struct AllocReq {
    uint64_t key = 0;
    uint64_t bytes = 0;
};

/** Tensor metadata as it travels: everything but the data pointer. */
struct TensorMeta {
    uint64_t key = 0;
    uint64_t bytes = 0;
    afmesh_dtype dtype{};
    uint32_t ndim = 0;
    int64_t shape[AFMESH_MAX_DIMS] = {};
};

/** A pull slot: where in the worker the server writes its answer. */
struct PullMeta {
    TensorMeta tensor;  // bytes = capacity
    afmesh_net_rkey rkey{};
    uint64_t offset = 0;
};

struct Request {
    uint16_t slot = 0, generation = 0;
    uint64_t posted_ns = 0;
    /** The write_imms the pushes travelled in: the request is whole once this many immediates arrived. */
    uint32_t push_writes = 0;
    /**
     * The worker gave up on this push-pull part-way through its writes (its
     * stream failed): the server answers at once, with empty answers, to
     * hand the slices back, and hands nothing out.
     */
    bool aborted = false;
    /** The worker can take the answers eagerly: every pull buffer is host memory. */
    bool eager_answers = false;
    std::vector<TensorMeta> pushes;
    std::vector<PullMeta> pulls;
    /**
     * Eager: the pushes' bytes, concatenated in push order, travel after the
     * metadata (push_writes is 0). Encoding reads them from eager_data;
     * decoding points eager_data into the message, valid as long as it is.
     */
    bool eager = false;
    const uint8_t *eager_data = nullptr;
    /** Written into the server's mailbox by the carrier write (imm.h), which push_writes does not count. */
    bool carried = false;
};

struct Response {
    uint16_t slot = 0, generation = 0;
    uint64_t arrived_ns = 0, processed_ns = 0, responded_ns = 0;
    /** The write_imms the answers travelled in: the worker's part is whole once this many immediates arrived. */
    uint32_t pull_writes = 0;
    /**
     * No whole answer: the server could not send it (a device copy failed
     * part-way), or the request was aborted. The worker's push-pull fails;
     * the slices come back all the same.
     */
    bool failed = false;
    std::vector<uint64_t> pull_bytes;
    /** Eager, as in Request: the answers' bytes (pull_bytes of each) follow, and no writes. */
    bool eager = false;
    const uint8_t *eager_data = nullptr;
    /** As in Request: came with a carrier write that pull_writes does not count. */
    bool carried = false;
};

/** The bytes an eager request or response carries: the sum of its tensors' lengths. */
uint64_t eager_bytes(const Request &m);
uint64_t eager_bytes(const Response &m);

/**
 * The eager bytes of `count` tensors (`tensor_at(i)` gives the i-th) in one
 * run: a single tensor's own memory, or several gathered into `scratch`.
 */
template <class TensorAt>
std::span<const uint8_t> gather_eager(size_t count, TensorAt tensor_at, std::vector<uint8_t> *scratch) {
    if (count == 1) return {static_cast<const uint8_t *>(tensor_at(0).data), tensor_at(0).bytes};
    scratch->clear();
    for (size_t i = 0; i < count; ++i) {
        const afmesh_tensor &t = tensor_at(i);
        const auto *p = static_cast<const uint8_t *>(t.data);
        if (t.bytes) scratch->insert(scratch->end(), p, p + t.bytes);
    }
    return *scratch;
}

/**
 * The bytes encode() gives a REQUEST of `tensors` push and pull tensors
 * (`pulls` of them pulls) with `dims` dimensions in all, without eager
 * bytes: checked against the transport's message limit before anything is
 * posted.
 */
size_t request_size(size_t tensors, size_t pulls, size_t dims);
/** The bytes encode() gives a RESPONSE of `pulls` answers, without eager bytes. */
size_t response_size(size_t pulls);

/**
 * A REQUEST in two pieces, for a push-pull started many times
 * (afmesh_prepare_push_pull): the metadata of its tensors, which
 * encode_tensors() appends to `out` once, and the fields around it, which
 * the second encode() writes at each start. That encode() appends what
 * encode(m, out) would for a request with the pushes and pulls `tensors`
 * was encoded from; it reads none of m's own, and when m.eager the pushes'
 * bytes are `eager` (gather_eager's; m.eager_data is not read).
 */
void encode_tensors(const Request &m, std::vector<uint8_t> &out);
void encode(const Request &m, const std::vector<uint8_t> &tensors, std::span<const uint8_t> eager,
            std::vector<uint8_t> &out);

/** BYE and HEARTBEAT have no body: the type byte is the whole message. */
void encode_bye(std::vector<uint8_t> &out);
void encode_heartbeat(std::vector<uint8_t> &out);

// Encoders append a whole message (type byte first) to `out`.
void encode(const Ident &m, std::vector<uint8_t> &out);
void encode(const Challenge &m, std::vector<uint8_t> &out);
void encode(const Proof &m, std::vector<uint8_t> &out);
void encode(const MailboxAddress &m, std::vector<uint8_t> &out);
void encode(const Advert &m, std::vector<uint8_t> &out);
void encode(const AllocReq &m, std::vector<uint8_t> &out);
void encode(const Request &m, std::vector<uint8_t> &out);
void encode(const Response &m, std::vector<uint8_t> &out);

/** The message type, or nullopt for an empty or unknown message. */
std::optional<Type> peek_type(const void *data, size_t len);

// Decoders check every field against the buffer and the protocol's limits;
// a failure names what was wrong.
Status decode(const void *data, size_t len, Ident *m);
Status decode(const void *data, size_t len, Challenge *m);
Status decode(const void *data, size_t len, Proof *m);
Status decode(const void *data, size_t len, MailboxAddress *m);
Status decode(const void *data, size_t len, Advert *m);
Status decode(const void *data, size_t len, AllocReq *m);
Status decode(const void *data, size_t len, Request *m);
Status decode(const void *data, size_t len, Response *m);

}  // namespace afmesh::wire
