// SPDX-License-Identifier: Apache-2.0
#include "worker.h"

#include <algorithm>
#include <cstring>

#include "clock.h"
#include "imm.h"
#include "log.h"
#include "reuse.h"

namespace afmesh {
namespace {

using inflight::generation_of;

Status check_tensor(const afmesh_tensor &t, const char *what, size_t index) {
    auto bad = [&](const std::string &why) {
        return Status(Code::kInvalidArgument, std::string(what) + " " + std::to_string(index) + ": " + why);
    };
    if (t.bytes >= wire::kMaxTensorBytes) return bad("size must be below 2^48 bytes");
    if (t.bytes > 0 && !t.data) return bad("null data pointer");
    if (t.ndim > AFMESH_MAX_DIMS) return bad("more than " + std::to_string(AFMESH_MAX_DIMS) + " dimensions");
    if (static_cast<uint32_t>(t.kind) >= AFMESH_MEM_KIND_COUNT) return bad("unknown memory kind");
    return Status::ok();
}

wire::TensorMeta meta_of(uint64_t key, const afmesh_tensor &t) {
    wire::TensorMeta m;
    m.key = key;
    m.bytes = t.bytes;
    m.dtype = t.dtype;
    m.ndim = t.ndim;
    std::copy(t.shape, t.shape + t.ndim, m.shape);
    return m;
}

}  // namespace

WorkerEngine::WorkerEngine(EngineContext ctx, int32_t rank, int32_t num_servers)
    : ctx_(ctx), rank_(rank), num_servers_(num_servers), servers_(num_servers),
      flags_(ctx.device, ctx.device_id, kMaxOpsInFlight) {}

WorkerEngine::~WorkerEngine() {
    // Ops never waited: stream work behind a closed gate may still write staging buffers.
    for (Op &op : ops_) release_gates(op.gates, true);
    // flags_ destroys its device flags after this.
}

void WorkerEngine::attach_server(int32_t server_rank, afmesh_net_conn *conn) {
    Server &server = servers_[server_rank];
    server.outbox = std::make_unique<Outbox>(ctx_.transport, conn, ctx_.counters.peer(server_rank));
    if (ctx_.mailbox_entries == 0) return;
    if (Status s = Mailbox::create(ctx_.registry, ctx_.mailbox_entries, &server.mailbox); !s)
        AFMESH_LOG(AFMESH_LOG_WARN, "server %d: no mailbox (%s): REQUESTs and RESPONSEs go as messages",
                   server_rank, s.message().c_str());
}

wire::MailboxAddress WorkerEngine::mailbox_for(int32_t server_rank) const {
    const Mailbox *mailbox = servers_[server_rank].mailbox.get();
    return mailbox ? mailbox->address() : wire::MailboxAddress{};
}

Status WorkerEngine::validate(const afmesh_push *push, size_t num_push, const afmesh_pull *pull,
                              size_t num_pull) const {
    const int32_t n = num_servers_;
    if ((num_push && !push) || (num_pull && !pull)) return {Code::kInvalidArgument, "null push or pull array"};
    if (num_push + num_pull == 0) return {Code::kInvalidArgument, "a push-pull needs at least one push or pull"};
    for (size_t i = 0; i < num_push; ++i) {
        if (Status s = check_tensor(push[i].tensor, "push", i); !s) return s;
        if (push[i].num_servers && !push[i].servers) return {Code::kInvalidArgument, "push " + std::to_string(i) + ": null server list"};
        for (uint32_t j = 0; j < push[i].num_servers; ++j)
            if (push[i].servers[j] < 0 || push[i].servers[j] >= n)
                return {Code::kInvalidArgument, "push " + std::to_string(i) + ": server " +
                                                    std::to_string(push[i].servers[j]) + " does not exist (" +
                                                    std::to_string(n) + " servers)"};
    }
    for (size_t i = 0; i < num_pull; ++i) {
        if (Status s = check_tensor(pull[i].tensor, "pull", i); !s) return s;
        if (pull[i].server < 0 || pull[i].server >= n)
            return {Code::kInvalidArgument, "pull " + std::to_string(i) + ": server " +
                                                std::to_string(pull[i].server) + " does not exist"};
    }
    return Status::ok();
}

Status WorkerEngine::build_op(Op &op, const afmesh_push *push, size_t num_push, const afmesh_pull *pull,
                              size_t num_pull, const std::vector<Staging::Buffer> &staged) {
    op.pushes.clear();
    op.pulls.clear();
    op.staged = !staged.empty();
    op.delivered.store(false);
    op.flag_armed = false;
    std::vector<int32_t> &part_of = part_of_;
    part_of.assign(servers_.size(), -1);
    // The op's parts of its last use are set back and reused, vectors and all.
    size_t parts = 0;
    auto part_for = [&](int32_t server) AFMESH_REQUIRES(ctx_.mu) -> Part & {
        if (part_of[server] < 0) {
            part_of[server] = static_cast<int32_t>(parts);
            if (parts == op.parts.size()) op.parts.emplace_back();
            Part &part = op.parts[parts++];
            Part fresh;
            keep_capacity(part.pushes, fresh.pushes);
            keep_capacity(part.pulls, fresh.pulls);
            keep_capacity(part.encoded_tensors, fresh.encoded_tensors);
            part = std::move(fresh);
            part.server = server;
            part.trace.server = server;
        }
        return op.parts[part_of[server]];
    };
    for (size_t i = 0; i < num_push; ++i) {
        afmesh_tensor t = push[i].tensor;
        afmesh_net_mr *mr = nullptr;
        const Staging::Buffer buffer = op.staged ? staged[i] : Staging::Buffer{};
        if (buffer.ptr) {
            t.data = buffer.ptr;  // the pinned copy is what travels
            mr = buffer.reg->mr;
        } else if (t.bytes > 0) {
            const Registration *reg = nullptr;
            if (Status s = ctx_.registry.find_or_add(t.data, t.bytes, t.kind, t.device, &reg); !s) return s;
            mr = reg->mr;
        }
        op.pushes.push_back({push[i].key, t, mr, buffer, t.bytes});
        if (push[i].num_servers == 0) {
            for (size_t s = 0; s < servers_.size(); ++s) part_for(static_cast<int32_t>(s)).pushes.push_back(i);
        } else {
            for (uint32_t j = 0; j < push[i].num_servers; ++j) {
                Part &p = part_for(push[i].servers[j]);
                if (p.pushes.empty() || p.pushes.back() != i) p.pushes.push_back(i);  // a server listed twice gets it once
            }
        }
    }
    for (size_t i = 0; i < num_pull; ++i) {
        afmesh_tensor t = pull[i].tensor;
        const Registration *reg = nullptr;
        const Staging::Buffer buffer = op.staged ? staged[num_push + i] : Staging::Buffer{};
        void *device_data = nullptr;
        if (buffer.ptr) {
            device_data = t.data;  // the server writes into the pinned buffer; deliver() copies it here
            t.data = buffer.ptr;
            reg = buffer.reg;
        } else if (t.bytes > 0) {
            if (Status s = ctx_.registry.find_or_add(t.data, t.bytes, t.kind, t.device, &reg); !s) return s;
        }
        op.pulls.push_back({pull[i].key, t, pull[i].server, reg, 0, buffer, device_data});
        Part &part = part_for(pull[i].server);
        part.pulls.push_back(i);
        part.most_answer_writes = static_cast<uint32_t>(
            std::min<uint64_t>(part.most_answer_writes + wire::max_writes(t.bytes), UINT32_MAX));
    }
    op.parts.resize(parts);
    for (Part &p : op.parts) {
        for (size_t a = 0; a < p.pushes.size(); ++a)
            for (size_t b = a + 1; b < p.pushes.size(); ++b)
                if (op.pushes[p.pushes[a]].key == op.pushes[p.pushes[b]].key)
                    return {Code::kInvalidArgument, "key " + std::to_string(op.pushes[p.pushes[a]].key) +
                                                        " is pushed twice to server " + std::to_string(p.server) +
                                                        " in one push-pull"};
        size_t dims = 0;
        for (uint32_t i : p.pushes) dims += op.pushes[i].tensor.ndim;
        for (uint32_t i : p.pulls) dims += op.pulls[i].tensor.ndim;
        p.request_bytes = wire::request_size(p.pushes.size() + p.pulls.size(), p.pulls.size(), dims);
        if (const uint32_t limit = ctx_.transport.net_caps().max_send_size; p.request_bytes > limit)
            return {Code::kInvalidArgument, "the request to server " + std::to_string(p.server) + " (" +
                                                std::to_string(p.request_bytes) +
                                                " bytes of metadata) exceeds the transport's message limit of " +
                                                std::to_string(limit) + "; use fewer tensors per push-pull"};
    }
    return Status::ok();
}

Status WorkerEngine::servers_ready(const Op &op) const {
    for (const Part &p : op.parts) {
        const Server &server = servers_[p.server];
        if (server.failed) return peer_failure("server " + std::to_string(p.server), server.failure);
        if (server.connecting)
            return {Code::kPeerFailed, "server " + std::to_string(p.server) +
                                           ": its new incarnation has not completed the handshake yet (its "
                                           "PEER_UP event says when it has)"};
    }
    return Status::ok();
}

Status WorkerEngine::room_for_op() const {
    if (!ops_.full()) return Status::ok();
    return {Code::kNoMemory,
            "too many push-pulls in flight (" + std::to_string(kMaxOpsInFlight) + "); wait for some first"};
}

Status WorkerEngine::push_pull(const afmesh_push *push, size_t num_push, const afmesh_pull *pull, size_t num_pull,
                               void *stream, afmesh_handle *handle) {
    if (!handle) return {Code::kInvalidArgument, "null handle pointer"};
    if (Status s = validate(push, num_push, pull, num_pull); !s) return s;
    // Before the lock: copies without a stream block. Stays empty (no allocation) for host tensors.
    std::vector<Staging::Buffer> staged;
    std::vector<Gate> gates;
    if (Status s = stage(push, num_push, pull, num_pull, stream, &staged, &gates); !s) return s;
    Status refused;
    {
        MutexLock lock(&ctx_.mu);
        if (Status s = room_for_op(); !s) {
            refused = s;
        } else if (Status s = build_op(ops_.next_to_build(), push, num_push, pull, num_pull, staged); !s) {
            refused = s;
        } else if (Status s = servers_ready(ops_.next_to_build()); !s) {
            refused = s;
        } else {
            issue(ops_.next_free(), std::move(gates), handle);
            return Status::ok();
        }
    }
    // Without the lock: the copies on the stream may still be writing the buffers.
    release_gates(gates, true);
    for (Staging::Buffer &buffer : staged) ctx_.staging.release(buffer);
    return refused;
}

void WorkerEngine::issue(uint16_t slot, std::vector<Gate> &&gates, afmesh_handle *handle) {
    Op &op = ops_[slot];
    *handle = ops_.take();  // the op in `slot`, live under a new sequence
    op.error = Status::ok();
    op.state.store(kPending);
    op.gates = std::move(gates);
    op.next_gate = 0;
    op.issued_ns = monotonic_ns();
    ctx_.counters.push_pulls.started.add();
    for (const Part &part : op.parts) ctx_.counters.peer(part.server).push_pulls.started.add();
    if (!op.gates.empty()) watch_gates(slot);
    for (uint32_t i = 0; i < op.parts.size(); ++i) {
        Server &server = servers_[op.parts[i].server];
        // Behind parked work for the same server, nothing overtakes.
        if (!server.parked.empty() || !advance(slot, op.parts[i], op.issued_ns)) {
            server.parked.push_back({slot, i, op.sequence});
            ctx_.counters.peer(op.parts[i].server).credit_waits.add();
        }
        if (!op.error.is_ok()) break;
    }
    finish_if_settled(slot);
}

bool WorkerEngine::slices_ready(uint16_t slot, const Part &part) {
    Op &op = ops_[slot];
    Server &server = servers_[part.server];
    bool ready = true;
    for (uint32_t i : part.pushes) {
        const PushSpec &push = op.pushes[i];
        RemoteSlice &slice = server.slices[push.key];
        if (slice.known && slice.advert.capacity < push.tensor.bytes && slice.refused_bytes >= push.tensor.bytes) {
            fail_op(slot, {Code::kInvalidArgument, "push of key " + std::to_string(push.key) + " (" +
                                                     std::to_string(push.tensor.bytes) + " bytes) exceeds server " +
                                                     std::to_string(part.server) + "'s receive slice of " +
                                                     std::to_string(slice.advert.capacity) + " bytes"});
            return false;
        }
        if (!slice.known || slice.advert.capacity < push.tensor.bytes) {
            // Rendezvous: the server provides (or grows) a slice for this key.
            if (!slice.alloc_pending) {
                scratch_.clear();
                wire::encode(wire::AllocReq{push.key, push.tensor.bytes}, scratch_);
                if (Status s = server.outbox->send(scratch_); !s) {
                    fail_server(part.server, s);
                    return false;
                }
                slice.alloc_pending = true;
                slice.requested_bytes = push.tensor.bytes;
            }
            ready = false;
        } else if (slice.busy_slot >= 0 && slice.busy_slot != slot) {
            ready = false;  // credit: the server still reads the previous push of this key
        }
    }
    return ready;
}

bool WorkerEngine::advance(uint16_t slot, Part &part, uint64_t now_ns) {
    Op &op = ops_[slot];
    if (!op.error.is_ok()) return true;  // a failed op claims nothing more
    if (!slices_ready(slot, part)) return !op.error.is_ok();  // a failed op stops waiting for slices
    Server &server = servers_[part.server];
    for (uint32_t i : part.pushes) server.slices[op.pushes[i].key].busy_slot = slot;
    part.claimed = true;
    part.eager = eager_pushes(op, part);
    part.eager_answers = host_pulls(op, part);
    part.trace.posted = now_ns;
    post_ready(slot, part);
    return true;
}

bool WorkerEngine::eager_pushes(const Op &op, const Part &part) const {
    uint64_t bytes = 0;
    for (uint32_t i : part.pushes) {
        const PushSpec &push = op.pushes[i];
        if (push.staged.ptr || push.ready_bytes != push.tensor.bytes) return false;
        if (push.tensor.bytes && push.tensor.kind != AFMESH_MEM_HOST) return false;
        bytes += push.tensor.bytes;
    }
    return ctx_.eager.admits(part.request_bytes, bytes);
}

bool WorkerEngine::host_pulls(const Op &op, const Part &part) const {
    return std::all_of(part.pulls.begin(), part.pulls.end(), [&](uint32_t i) {
        const PullSpec &pull = op.pulls[i];
        return pull.staged.ptr || pull.tensor.bytes == 0 || pull.tensor.kind == AFMESH_MEM_HOST;
    });
}

void WorkerEngine::post_ready(uint16_t slot, Part &part) {
    Op &op = ops_[slot];
    Server &server = servers_[part.server];
    const uint32_t imm = imm::encode(imm::Direction::kPush, slot, generation_of(op.sequence));
    auto sendable = [&](size_t next) {  // whether part.pushes[next] (or the REQUEST, past the end) can go now
        if (next == part.pushes.size()) return true;
        const PushSpec &push = op.pushes[part.pushes[next]];
        return push.tensor.bytes == 0 || push.ready_bytes > 0;
    };
    while (!part.request_sent && !server.failed) {
        if (!op.error.is_ok() || part.eager || part.next_push == part.pushes.size())
            return send_request(slot, part, nullptr);
        const PushSpec &push = op.pushes[part.pushes[part.next_push]];
        const uint64_t offset = part.next_offset, end = push.ready_bytes;
        if (push.tensor.bytes > 0 && end == offset) return;  // the stream has not produced more yet
        const bool whole = end == push.tensor.bytes;
        // MORE only when the next write (or the REQUEST) follows at once.
        const bool more = whole && sendable(part.next_push + 1);
        const RemoteSlice &slice = server.slices[push.key];
        const void *data = offset ? static_cast<const uint8_t *>(push.tensor.data) + offset : push.tensor.data;
        const afmesh_net_write_seg piece{data, push.mr, end - offset, &slice.advert.rkey, slice.advert.offset + offset};
        part.next_offset = whole ? 0 : end;
        part.next_push += whole;
        if (part.next_push == part.pushes.size()) return send_request(slot, part, &piece);
        if (Status s = server.outbox->write(&piece, 1, imm, more ? AFMESH_NET_MORE : 0, 0); !s)
            return fail_server(part.server, s);
        ++part.writes;
    }
}

void WorkerEngine::describe_tensors(const Op &op, const Part &part, wire::Request *request) {
    request->pushes.clear();
    request->pulls.clear();
    for (uint32_t i : part.pushes) request->pushes.push_back(meta_of(op.pushes[i].key, op.pushes[i].tensor));
    for (uint32_t i : part.pulls) {
        const PullSpec &pull = op.pulls[i];
        wire::PullMeta meta;
        meta.tensor = meta_of(pull.key, pull.tensor);
        if (pull.reg) {
            meta.rkey = pull.reg->rkey;
            meta.offset = pull.reg->offset_of(reinterpret_cast<uintptr_t>(pull.tensor.data));
        }
        request->pulls.push_back(meta);
    }
}

void WorkerEngine::encode_request(uint16_t slot, const Part &part) {
    const Op &op = ops_[slot];
    wire::Request &request = request_;
    request.slot = slot;
    request.generation = generation_of(op.sequence);
    request.posted_ns = part.trace.posted;
    request.push_writes = part.writes;
    request.aborted = !op.error.is_ok();
    request.eager = part.eager && !request.aborted;
    request.eager_answers = part.eager_answers;
    request.carried = part.entry >= 0;
    const auto push_tensor = [&](size_t i) -> const afmesh_tensor & { return op.pushes[part.pushes[i]].tensor; };
    const std::span<const uint8_t> eager =
        request.eager ? wire::gather_eager(part.pushes.size(), push_tensor, &eager_) : std::span<const uint8_t>();
    request.eager_data = eager.data();
    scratch_.clear();
    if (!part.encoded_tensors.empty()) return wire::encode(request, part.encoded_tensors, eager, scratch_);
    describe_tensors(op, part, &request);
    wire::encode(request, scratch_);
}

void WorkerEngine::send_request(uint16_t slot, Part &part, const afmesh_net_write_seg *last) {
    Op &op = ops_[slot];
    Server &server = servers_[part.server];
    const bool aborted = !op.error.is_ok();
    // Eager and aborted requests have no tensor write to ride on.
    if (!aborted && !part.eager && part.request_bytes <= Mailbox::kMaxMessageBytes) part.entry = server.entries.take();
    if (last && part.entry < 0) {  // the piece goes on its own, the REQUEST right behind it
        const uint32_t imm = imm::encode(imm::Direction::kPush, slot, generation_of(op.sequence));
        if (Status s = server.outbox->write(last, 1, imm, AFMESH_NET_MORE, 0); !s) return fail_server(part.server, s);
        ++part.writes;
    }
    encode_request(slot, part);
    Status sent;
    if (part.entry >= 0) {
        afmesh_net_write_seg segs[2];
        uint32_t n = 0;
        if (last && last->bytes) segs[n++] = *last;
        segs[n++] = server.mailbox->stage(static_cast<uint32_t>(part.entry), scratch_, server.server_mailbox);
        const uint32_t carrier = imm::encode_carrier(imm::Direction::kPush, static_cast<uint16_t>(part.entry));
        sent = server.outbox->write(segs, n, carrier, 0, 0);
    } else {
        sent = server.outbox->send(scratch_);
    }
    if (!sent) return fail_server(part.server, sent);
    part.request_sent = true;
    part.aborted = aborted;
    ctx_.counters.peer(part.server).count(request_);
}

void WorkerEngine::advance_parked(int32_t server_rank) {
    Server &server = servers_[server_rank];
    if (server.parked.empty()) return;
    const uint64_t now = monotonic_ns();
    while (!server.parked.empty()) {
        Parked p = server.parked.front();
        Op &op = ops_[p.slot];
        bool live = op.in_use && op.sequence == p.sequence && op.error.is_ok();
        if (live && !advance(p.slot, op.parts[p.part], now)) return;
        // advance() fails the server when a write to it is refused, and
        // fail_server() settles and drops everything parked: p is gone.
        if (server.failed) return;
        server.parked.pop_front();
        if (op.in_use && op.sequence == p.sequence) finish_if_settled(p.slot);
    }
}

void WorkerEngine::on_message(int32_t server_rank, const void *data, size_t len) {
    Server &server = servers_[server_rank];
    auto type = wire::peek_type(data, len);
    if (type == wire::Type::kAdvert) {
        wire::Advert advert;
        if (Status s = wire::decode(data, len, &advert); !s) return protocol_error(server_rank, s.message());
        RemoteSlice &slice = server.slices[advert.key];
        if (slice.alloc_pending && advert.capacity < slice.requested_bytes) slice.refused_bytes = slice.requested_bytes;
        slice.known = true;
        slice.alloc_pending = false;
        slice.advert = advert;
        advance_parked(server_rank);
        return;
    }
    if (type == wire::Type::kMailbox) {
        if (server.server_mailbox.entries) return protocol_error(server_rank, "a second MAILBOX");
        if (Status s = wire::decode(data, len, &server.server_mailbox); !s)
            return protocol_error(server_rank, s.message());
        if (server.mailbox) server.entries.reset(std::min(server.mailbox->entries(), server.server_mailbox.entries));
        return;
    }
    if (type != wire::Type::kResponse) return protocol_error(server_rank, "unexpected message type");
    if (Status s = wire::decode(data, len, &decoded_); !s) return protocol_error(server_rank, s.message());
    on_response(server_rank, decoded_, -1);
}

void WorkerEngine::on_carrier(int32_t server_rank, uint32_t value) {
    const Mailbox *mailbox = servers_[server_rank].mailbox.get();
    if (imm::direction(value) != imm::Direction::kResponse || !mailbox)
        return protocol_error(server_rank, "unexpected carrier immediate " + std::to_string(value));
    const uint8_t *data = nullptr;
    size_t len = 0;
    if (Status s = mailbox->read(imm::entry(value), &data, &len); !s) return protocol_error(server_rank, s.message());
    if (Status s = wire::decode(data, len, &decoded_); !s) return protocol_error(server_rank, s.message());
    on_response(server_rank, decoded_, imm::entry(value));
}

void WorkerEngine::on_response(int32_t server_rank, const wire::Response &response, int32_t entry) {
    Op &op = ops_[response.slot % kMaxOpsInFlight];
    auto part = std::find_if(op.parts.begin(), op.parts.end(), [&](const Part &p) { return p.server == server_rank; });
    if (!op.in_use || generation_of(op.sequence) != response.generation || part == op.parts.end() || part->lost ||
        !part->request_sent || part->response_arrived || response.pull_bytes.size() != part->pulls.size())
        return protocol_error(server_rank, "RESPONSE for no request in flight");
    if (part->imms > response.pull_writes || (part->aborted && response.pull_writes > 0))
        return protocol_error(server_rank, "RESPONSE announces fewer writes than arrived");
    if (response.eager && !part->eager_answers)
        return protocol_error(server_rank, "eager RESPONSE to a request that did not offer to take one");
    if (response.carried != (entry >= 0) || (entry >= 0 && entry != part->entry))
        return protocol_error(server_rank, "RESPONSE outside the mailbox entry of its request");
    for (size_t i = 0; i < part->pulls.size(); ++i) {
        PullSpec &pull = op.pulls[part->pulls[i]];
        if (response.pull_bytes[i] > pull.tensor.bytes)
            return protocol_error(server_rank, "RESPONSE longer than the pull buffer");
        pull.received_bytes = response.pull_bytes[i];
    }
    if (response.eager) take_eager_answers(op, *part, response);
    ctx_.counters.peer(server_rank).count(response);
    AFMESH_LOG(AFMESH_LOG_TRACE, "server %d, slot %u: %zu answers arrived in %u writes%s", server_rank,
               response.slot, response.pull_bytes.size(), response.pull_writes + response.carried,
               response.carried ? ", the last carrying the RESPONSE" : "");
    part->response_arrived = true;
    part->answer_writes = response.pull_writes;
    if (part->entry >= 0) servers_[server_rank].entries.give_back(part->entry);  // read: both sides' entry is free
    part->entry = -1;
    part->trace.arrived = response.arrived_ns;
    part->trace.processed = response.processed_ns;
    part->trace.responded = response.responded_ns;
    part->answer_failed = response.failed;
    if (response.failed)
        fail_op(response.slot, {Code::kError, "server " + std::to_string(server_rank) +
                                                  " could not send its whole answer (a device copy failed there; "
                                                  "see its log)"});
    complete_part_if_done(response.slot, *part);
}

void WorkerEngine::take_eager_answers(Op &op, const Part &part, const wire::Response &response) {
    const uint8_t *from = response.eager_data;
    for (size_t i = 0; i < part.pulls.size(); ++i) {
        const uint64_t n = response.pull_bytes[i];
        if (n) memcpy(op.pulls[part.pulls[i]].tensor.data, from, n);  // a staged pull's pinned buffer, or host memory
        from += n;
    }
}

void WorkerEngine::on_imm(int32_t server_rank, uint32_t value) {
    if (imm::is_carrier(value)) return on_carrier(server_rank, value);
    Op &op = ops_[imm::slot(value) % kMaxOpsInFlight];
    auto part = std::find_if(op.parts.begin(), op.parts.end(), [&](const Part &p) { return p.server == server_rank; });
    if (imm::direction(value) != imm::Direction::kResponse || !op.in_use ||
        generation_of(op.sequence) != imm::generation(value) || part == op.parts.end() || part->lost ||
        part->imms >= part->answers_expected())
        return protocol_error(server_rank, "unexpected immediate " + std::to_string(value));
    ++part->imms;
    complete_part_if_done(imm::slot(value), *part);
}

void WorkerEngine::complete_part_if_done(uint16_t slot, Part &part) {
    if (part.done || !part.response_arrived || part.imms < part.answers_expected()) return;
    part.done = true;
    part.trace.completed = monotonic_ns();
    Op &op = ops_[slot];
    Server &server = servers_[part.server];
    for (uint32_t i : part.pushes) {
        RemoteSlice &slice = server.slices[op.pushes[i].key];
        if (slice.busy_slot == slot) slice.busy_slot = -1;
    }
    finish_if_settled(slot);
    advance_parked(part.server);
}

void WorkerEngine::finish_if_settled(uint16_t slot) {
    Op &op = ops_[slot];
    if (op.state.load() != kPending) return;
    for (const Part &part : op.parts) {
        if (part.done || part.lost) continue;
        // Posted: the server owes an answer (and may still write into the
        // pull buffers). Not posted: it still will be, unless the op failed.
        if (part.request_sent || op.error.is_ok()) return;
    }
    // A waiting stream reads the pull buffers as soon as it is released:
    // they must hold the answers first (a copy under the lock, only then).
    if (op.error.is_ok() && op.flag_armed)
        if (Status s = deliver(op); !s) op.error = s;
    count_outcome(op);
    op.state.store(op.error.is_ok() ? kDone : kFailed);
    release_stream(slot);
    ctx_.progress.notify_waiters();
}

Status WorkerEngine::deliver(Op &op) {
    if (!op.staged || op.delivered.exchange(true)) return Status::ok();
    for (const PullSpec &pull : op.pulls)
        if (pull.device_data)
            if (Status s = ctx_.staging.copy(pull.device_data, pull.staged.ptr, pull.received_bytes); !s) return s;
    return Status::ok();
}

void WorkerEngine::release_staging(Op &op) {
    if (!op.staged) return;
    for (PushSpec &push : op.pushes) ctx_.staging.release(push.staged);
    for (PullSpec &pull : op.pulls) ctx_.staging.release(pull.staged);
    op.staged = false;
}

void WorkerEngine::fail_op(uint16_t slot, const Status &why) {
    Op &op = ops_[slot];
    if (op.error.is_ok()) op.error = why;
    // Parts part-way through their writes close them with an aborted
    // REQUEST, so their servers hand the slices back.
    for (Part &part : op.parts)
        if (part.claimed && !part.request_sent && !part.lost) post_ready(slot, part);
    finish_if_settled(slot);
}

void WorkerEngine::count_outcome(const Op &op) {
    auto outcome = [](OutcomeCounters &c, bool ok, bool peer_failed) -> Tally & {
        return ok ? c.completed : peer_failed ? c.peer_failed : c.failed;
    };
    NodeCounters &counters = ctx_.counters;
    outcome(counters.push_pulls, op.error.is_ok(), op.error.code() == Code::kPeerFailed).add();
    uint64_t completed = 0;  // an op ends OK when its last part completes: no clock read of its own
    for (const Part &part : op.parts) {
        const bool answered = part.done && !part.answer_failed;
        outcome(counters.peer(part.server).push_pulls, answered, part.lost).add();
        completed = std::max(completed, part.trace.completed);
    }
    if (op.error.is_ok()) counters.latency.record(completed - op.issued_ns);
}

void WorkerEngine::protocol_error(int32_t server, const std::string &what) {
    ctx_.counters.peer(server).protocol_errors.add();
    AFMESH_LOG(AFMESH_LOG_ERROR, "server %d violated the protocol: %s", server, what.c_str());
    if (Outbox *outbox = servers_[server].outbox.get()) ctx_.drop_connection(outbox->conn());
    fail_server(server, {Code::kPeerFailed, "protocol violation: " + what});
}

void WorkerEngine::fail_server(int32_t server_rank, const Status &why) {
    Server &server = servers_[server_rank];
    if (server.failed) return;
    server.failed = true;
    server.failure = why;
    server.parked.clear();
    ctx_.peer_failed(server_rank, why);
    Status status = peer_failure("server " + std::to_string(server_rank), why);
    for (size_t slot = 0; slot < ops_.size(); ++slot) {
        Op &op = ops_[slot];
        if (!op.in_use) continue;
        bool affected = false;
        for (Part &part : op.parts) {
            if (part.server != server_rank || part.done) continue;
            part.lost = true;
            affected = true;
        }
        if (affected && op.state.load() == kPending) fail_op(static_cast<uint16_t>(slot), status);
    }
}

void WorkerEngine::replace_server(int32_t server_rank) {
    fail_server(server_rank, {Code::kPeerFailed, "replaced by a new incarnation"});
    servers_[server_rank] = Server{};
}

bool WorkerEngine::flush() {
    bool drained = true;
    for (size_t s = 0; s < servers_.size(); ++s) {
        Server &server = servers_[s];
        if (server.failed || !server.outbox || server.outbox->empty()) continue;
        if (Status st = server.outbox->flush(); !st) fail_server(static_cast<int32_t>(s), st);
        drained = drained && (server.failed || server.outbox->empty());
    }
    return drained;
}

Status WorkerEngine::wait(afmesh_handle handle, int timeout_ms) {
    Op *op = nullptr;
    {
        MutexLock lock(&ctx_.mu);
        if (Status s = ops_.find(handle, &op); !s) return s;
    }
    auto deadline = timeout_ms < 0 ? Clock::time_point::max() : Clock::now() + std::chrono::milliseconds(timeout_ms);
    Status waited = ctx_.progress.wait_until([op] { return op->state.load() != kPending; }, deadline);
    if (waited.code() == Code::kTimeout)
        return {Code::kTimeout,
                "push-pull " + std::to_string(handle) + " did not complete in " + std::to_string(timeout_ms) + " ms"};
    if (!waited) return waited;
    // Settled, so this thread owns the op; device work happens without the lock:
    // the copy of staged pulls, and for an op that failed before its stream
    // ran, waiting out the copies that still write its staging buffers.
    Status delivered = op->state.load() == kDone ? deliver(*op) : Status::ok();
    release_gates(op->gates, true);
    MutexLock lock(&ctx_.mu);
    Status result = op->state.load() == kDone ? delivered : op->error;
    // The op has settled: no server will write into its buffers any more.
    release_staging(*op);
    ops_.retire(inflight::slot_of(handle));
    return result;
}

Status WorkerEngine::test(afmesh_handle handle) {
    ctx_.progress.poll_once();
    Op *op = nullptr;
    {
        MutexLock lock(&ctx_.mu);
        if (Status s = ops_.find(handle, &op); !s) return s;
        switch (op->state.load()) {
        case kDone: break;
        case kFailed: return op->error;
        default: return {Code::kAgain, "in progress"};
        }
    }
    return deliver(*op);  // without the lock, like wait()
}

Status WorkerEngine::pull_bytes(afmesh_handle handle, size_t index, uint64_t *bytes) {
    MutexLock lock(&ctx_.mu);
    Op *op = nullptr;
    if (Status s = ops_.find(handle, &op, true); !s) return s;
    if (op->state.load() != kDone) return {Code::kInvalidArgument, "the push-pull has not completed"};
    if (index >= op->pulls.size() || !bytes)
        return {Code::kInvalidArgument, "pull index " + std::to_string(index) + " out of range"};
    *bytes = op->pulls[index].received_bytes;
    return Status::ok();
}

Status WorkerEngine::trace(afmesh_handle handle, afmesh_trace *traces, size_t capacity, size_t *count) {
    MutexLock lock(&ctx_.mu);
    Op *op = nullptr;
    if (Status s = ops_.find(handle, &op, true); !s) return s;
    if (!count || (capacity && !traces)) return {Code::kInvalidArgument, "null trace output"};
    *count = op->parts.size();
    for (size_t i = 0; i < op->parts.size() && i < capacity; ++i) traces[i] = op->parts[i].trace;
    return Status::ok();
}

}  // namespace afmesh
