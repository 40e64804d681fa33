// SPDX-License-Identifier: Apache-2.0
#include "server.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "clock.h"
#include "imm.h"
#include "inflight_table.h"
#include "log.h"
#include "response_cursor.h"

namespace afmesh {
namespace {

std::string worker_name(int32_t w) { return "worker " + std::to_string(w); }

}  // namespace

ServerEngine::ServerEngine(EngineContext ctx, int32_t rank, int32_t num_workers)
    : ctx_(ctx), rank_(rank), num_workers_(static_cast<size_t>(num_workers)) {
    for (int32_t i = 0; i < num_workers; ++i) workers_.push_back(std::make_unique<Worker>(ctx_.counters.peer(i)));
}

ServerEngine::~ServerEngine() {
    // The requests, handed out or ready, go with requests_.
    for (auto &worker : workers_)
        for (auto &[key, slice] : worker->slices) free_slice(slice);
}

void ServerEngine::free_slice(Slice &slice) {
    if (!slice.owned) return;
    (void)ctx_.registry.remove(slice.reg);
    ctx_.device.device().mem_free(ctx_.device.ctx(), slice.where, slice.ptr);
    slice = Slice{};
}

bool ServerEngine::all_workers_attached() const {
    return std::all_of(workers_.begin(), workers_.end(), [](const auto &w) { return w->outbox || w->failed.load(); });
}

Status ServerEngine::attach_worker(const wire::Ident &ident, afmesh_net_conn *conn) {
    const int32_t worker_rank = ident.worker_rank;
    if (worker_rank < 0 || worker_rank >= static_cast<int32_t>(workers_.size()))
        return {Code::kInvalidArgument, "IDENT from unknown " + worker_name(worker_rank)};
    Worker &worker = *workers_[worker_rank];
    if (worker.outbox) return {Code::kInvalidArgument, "second connection from " + worker_name(worker_rank)};
    worker.outbox = std::make_unique<Outbox>(ctx_.transport, conn, ctx_.counters.peer(worker_rank));
    for (const auto &[key, slice] : worker.slices) advertise(worker_rank, key, slice);
    if (ctx_.mailbox_entries == 0 || ident.mailbox.entries == 0) return Status::ok();
    if (Status s = Mailbox::create(ctx_.registry, ctx_.mailbox_entries, &worker.mailbox); !s) {
        AFMESH_LOG(AFMESH_LOG_WARN, "%s: no mailbox (%s): REQUESTs and RESPONSEs go as messages",
                   worker_name(worker_rank).c_str(), s.message().c_str());
        return Status::ok();
    }
    worker.worker_mailbox = ident.mailbox;
    scratch_.clear();
    wire::encode(worker.mailbox->address(), scratch_);
    if (Status s = worker.outbox->send(scratch_); !s) fail_worker(worker_rank, s);
    return Status::ok();
}

void ServerEngine::advertise(int32_t worker_rank, uint64_t key, const Slice &slice) {
    Worker &worker = *workers_[worker_rank];
    if (!worker.outbox || worker.failed.load()) return;  // sent when the worker attaches
    wire::Advert advert;
    advert.key = key;
    advert.rkey = slice.reg->rkey;
    advert.offset = slice.reg->offset_of(reinterpret_cast<uintptr_t>(slice.ptr));
    advert.capacity = slice.capacity;
    scratch_.clear();
    wire::encode(advert, scratch_);
    if (Status s = worker.outbox->send(scratch_); !s) fail_worker(worker_rank, s);
}

Status ServerEngine::register_recv_buffer(void *ptr, uint64_t bytes, uint32_t kind, int device,
                                          const int32_t *worker_ranks, const uint64_t *keys, size_t count) {
    if (count == 0 || !worker_ranks || !keys) return {Code::kInvalidArgument, "need at least one (worker, key) pair"};
    if (bytes % count != 0)
        return {Code::kInvalidArgument, std::to_string(bytes) + " bytes do not split into " + std::to_string(count) +
                                            " equal slices"};
    const bool staged = ctx_.staging.needed(kind);
    if (staged)
        if (Status s = ctx_.staging.check_kind(kind, "receive buffer"); !s) return s;
    MutexLock lock(&ctx_.mu);
    for (size_t i = 0; i < count; ++i) {
        if (worker_ranks[i] < 0 || worker_ranks[i] >= static_cast<int32_t>(workers_.size()))
            return {Code::kInvalidArgument, worker_name(worker_ranks[i]) + " does not exist"};
        auto &slices = workers_[worker_ranks[i]]->slices;
        if (slices.count(keys[i]))
            return {Code::kInvalidArgument, "key " + std::to_string(keys[i]) + " of " + worker_name(worker_ranks[i]) +
                                                " already has a receive slice (registered, or created by an "
                                                "earlier push); register receive buffers before the first push"};
        for (size_t j = 0; j < i; ++j)
            if (worker_ranks[j] == worker_ranks[i] && keys[j] == keys[i])
                return {Code::kInvalidArgument, "key " + std::to_string(keys[i]) + " of " +
                                                    worker_name(worker_ranks[i]) + " is listed twice"};
    }
    // A staged buffer's pinned twin lives as long as the node, like the registration of a host one.
    Staging::Buffer twin;
    const Registration *reg = nullptr;
    if (Status s = staged ? ctx_.staging.acquire(bytes, &twin) : ctx_.registry.add(ptr, bytes, kind, device, &reg); !s)
        return s;
    const uint64_t slice_bytes = bytes / count;
    for (size_t i = 0; i < count; ++i) {
        Slice slice;
        slice.ptr = static_cast<uint8_t *>(staged ? twin.ptr : ptr) + i * slice_bytes;
        slice.capacity = slice_bytes;
        slice.reg = staged ? twin.reg : reg;
        if (staged) {
            slice.device_ptr = static_cast<uint8_t *>(ptr) + i * slice_bytes;
            slice.device_kind = kind;
            slice.device = device;
        }
        workers_[worker_ranks[i]]->slices[keys[i]] = slice;
        advertise(worker_ranks[i], keys[i], slice);
    }
    return Status::ok();
}

void ServerEngine::begin_serving() {
    if (serving_) return;
    serving_ = true;
    for (const HeldAlloc &held : std::exchange(held_allocs_, {})) {
        Worker &worker = *workers_[held.worker];
        if (worker.failed.load() || worker.incarnation.load() != held.incarnation) continue;
        // A slice a request already reads was advertised while this waited (a
        // buffer registered meanwhile, and the worker wrote into it): it is
        // advertised again, which is harmless, rather than made anew.
        if (auto it = worker.slices.find(held.req.key); it != worker.slices.end() && it->second.readers > 0) {
            advertise(held.worker, held.req.key, it->second);
            continue;
        }
        handle_alloc(held.worker, held.req);
    }
    (void)flush();
}

void ServerEngine::handle_alloc(int32_t worker_rank, const wire::AllocReq &req) {
    Worker &worker = *workers_[worker_rank];
    Slice &slice = worker.slices[req.key];
    if (slice.readers > 0) return protocol_error(worker_rank, "ALLOC_REQ for a slice a request still reads");
    // A user's slice cannot grow: advertise it as it is and let the worker report the mismatch.
    if (!slice.ptr || (slice.owned && slice.capacity < req.bytes)) {
        free_slice(slice);
        const afmesh_device_ops &dev = ctx_.device.device();
        // Device memory the transport cannot register would need staging; pinned host memory serves directly.
        const uint32_t where = ctx_.staging.needed(dev.mem_kind) ? AFMESH_ALLOC_HOST_PINNED : AFMESH_ALLOC_DEVICE;
        const uint32_t kind = where == AFMESH_ALLOC_DEVICE ? dev.mem_kind : static_cast<uint32_t>(AFMESH_MEM_HOST);
        void *ptr = nullptr;
        take_module_error();
        if (dev.mem_alloc(ctx_.device.ctx(), ctx_.device_id, where, std::max<uint64_t>(req.bytes, 1), &ptr) !=
            AFMESH_HAL_OK) {
            AFMESH_LOG(AFMESH_LOG_ERROR, "cannot allocate %llu bytes for key %llu of worker %d: %s",
                       static_cast<unsigned long long>(req.bytes), static_cast<unsigned long long>(req.key),
                       worker_rank, take_module_error().c_str());
            worker.slices.erase(req.key);
            return fail_worker(worker_rank, {Code::kNoMemory, "server could not allocate a receive slice"});
        }
        const Registration *reg = nullptr;
        if (Status s = ctx_.registry.add(ptr, std::max<uint64_t>(req.bytes, 1), kind, ctx_.device_id, &reg); !s) {
            dev.mem_free(ctx_.device.ctx(), where, ptr);
            worker.slices.erase(req.key);
            return fail_worker(worker_rank, s);
        }
        slice.ptr = ptr;
        slice.capacity = req.bytes;
        slice.reg = reg;
        slice.owned = true;
        slice.where = where;
    }
    advertise(worker_rank, req.key, slice);
}

ServerEngine::Inbound *ServerEngine::inbound_slot(int32_t worker_rank, uint16_t slot) {
    std::vector<Inbound> &inbound = workers_[worker_rank]->inbound;
    if (slot >= kMaxOpsInFlight) {
        protocol_error(worker_rank, "slot " + std::to_string(slot) + " beyond the " +
                                        std::to_string(kMaxOpsInFlight) + " a worker has in flight");
        return nullptr;
    }
    if (slot >= inbound.size()) inbound.resize(slot + 1u);
    return &inbound[slot];
}

void ServerEngine::handle_request(int32_t worker_rank, wire::Request &req, int32_t entry) {
    Worker &worker = *workers_[worker_rank];
    if (req.carried != (entry >= 0)) return protocol_error(worker_rank, "REQUEST outside a mailbox entry");
    if (entry >= 0 && static_cast<uint32_t>(entry) >= worker.worker_mailbox.entries)
        return protocol_error(worker_rank, "REQUEST in mailbox entry " + std::to_string(entry) +
                                               ", beyond the worker's own mailbox");
    for (const wire::TensorMeta &t : req.pushes) {
        auto it = worker.slices.find(t.key);
        if (it == worker.slices.end() || !it->second.ptr || it->second.capacity < t.bytes)
            return protocol_error(worker_rank, "REQUEST pushes key " + std::to_string(t.key) +
                                                   " beyond its receive slice");
    }
    Inbound *slot = inbound_slot(worker_rank, req.slot);
    if (!slot) return;
    Inbound &in = *slot;
    if (in.have_request) return protocol_error(worker_rank, "two REQUESTs for one slot");
    worker.counters.count(req);
    if (req.eager) {
        // The bytes are the message's, lent until this returns: into the slices now.
        const uint8_t *from = req.eager_data;
        for (const wire::TensorMeta &t : req.pushes) {
            const Slice &slice = worker.slices[t.key];
            if (Status s = place_eager(slice, from, t.bytes); !s) {
                AFMESH_LOG(AFMESH_LOG_ERROR, "%s, slot %u: copying the push of key %llu into its receive slice "
                           "failed: %s (the push-pull fails; answered empty)", worker_name(worker_rank).c_str(),
                           req.slot, static_cast<unsigned long long>(t.key), s.message().c_str());
                in.reset();
                return answer_empty(worker_rank, req);
            }
            from += t.bytes;
        }
        req.eager_data = nullptr;  // the message's no longer
    }
    in.have_request = true;
    std::swap(in.request, req);  // req takes the slot's old vectors, to decode into next
    in.entry = entry;
    complete_if_ready(worker_rank, in.request.slot);
}

Status ServerEngine::place_eager(const Slice &slice, const uint8_t *bytes, uint64_t count) {
    if (count == 0) return Status::ok();
    // A staged slice's ptr is its pinned host twin; otherwise the slice is
    // the registered memory itself, which may be the device's.
    if (slice.device_ptr || slice.reg->kind == AFMESH_MEM_HOST) {
        memcpy(slice.ptr, bytes, count);
        return Status::ok();
    }
    return ctx_.staging.copy(slice.ptr, bytes, count);
}

void ServerEngine::on_message(int32_t worker_rank, const void *data, size_t len) {
    // A failed worker's late traffic (the scheduler declared it dead, its
    // connection still delivers) could only refill what its failure emptied.
    if (workers_[worker_rank]->failed.load()) return;
    switch (wire::peek_type(data, len).value_or(wire::Type::kIdent)) {
    case wire::Type::kRequest:
        if (Status s = wire::decode(data, len, &decoded_); !s) return protocol_error(worker_rank, s.message());
        return handle_request(worker_rank, decoded_, -1);
    case wire::Type::kAllocReq: {
        wire::AllocReq req;
        if (Status s = wire::decode(data, len, &req); !s) return protocol_error(worker_rank, s.message());
        if (!serving_) return held_allocs_.push_back({worker_rank, workers_[worker_rank]->incarnation.load(), req});
        return handle_alloc(worker_rank, req);
    }
    default:
        return protocol_error(worker_rank, "unexpected message type");
    }
}

void ServerEngine::on_carrier(int32_t worker_rank, uint32_t value) {
    const Mailbox *mailbox = workers_[worker_rank]->mailbox.get();
    if (!mailbox) return protocol_error(worker_rank, "carrier immediate without a mailbox");
    const uint8_t *data = nullptr;
    size_t len = 0;
    if (Status s = mailbox->read(imm::entry(value), &data, &len); !s) return protocol_error(worker_rank, s.message());
    if (Status s = wire::decode(data, len, &decoded_); !s) return protocol_error(worker_rank, s.message());
    handle_request(worker_rank, decoded_, imm::entry(value));
}

void ServerEngine::on_imm(int32_t worker_rank, uint32_t value) {
    if (workers_[worker_rank]->failed.load()) return;  // as in on_message
    if (imm::direction(value) != imm::Direction::kPush)
        return protocol_error(worker_rank, "response immediate sent to a server");
    if (imm::is_carrier(value)) return on_carrier(worker_rank, value);
    Inbound *in = inbound_slot(worker_rank, imm::slot(value));
    if (!in) return;
    ++in->imms;
    complete_if_ready(worker_rank, imm::slot(value));
}

void ServerEngine::complete_if_ready(int32_t worker_rank, uint16_t slot) {
    Worker &worker = *workers_[worker_rank];
    Inbound &in = worker.inbound[slot];
    if (!in.have_request) return;
    if (in.imms > in.request.push_writes) return protocol_error(worker_rank, "more immediates than announced writes");
    if (in.imms < in.request.push_writes) return;
    if (in.request.aborted) {
        // The worker's stream failed part-way: answer empty at once, handing
        // the slices back, and hand out nothing half-written.
        in.reset();
        return answer_aborted(worker_rank, in.request);
    }
    AFMESH_LOG(AFMESH_LOG_TRACE, "%s, slot %u: %zu pushes arrived in %u writes%s", worker_name(worker_rank).c_str(),
               slot, in.request.pushes.size(), in.request.push_writes + in.request.carried,
               in.request.carried ? ", the last carrying the REQUEST" : "");
    afmesh_request *request = requests_.take();
    request->worker = worker_rank;
    request->slot = slot;
    request->generation = in.request.generation;
    request->arrived_ns = monotonic_ns();
    for (const wire::TensorMeta &t : in.request.pushes) {
        Slice &slice = worker.slices[t.key];
        ++slice.readers;
        afmesh_tensor view{};
        view.data = slice.ptr;
        view.bytes = t.bytes;
        view.kind = static_cast<afmesh_mem_kind>(slice.reg->kind);
        view.device = slice.reg->device;
        if (slice.device_ptr) {
            request->to_device.push_back({slice.device_ptr, slice.ptr, t.bytes});
            view.data = slice.device_ptr;
            view.kind = static_cast<afmesh_mem_kind>(slice.device_kind);
            view.device = slice.device;
        }
        view.dtype = t.dtype;
        view.ndim = t.ndim;
        std::copy(t.shape, t.shape + t.ndim, view.shape);
        request->pushes.emplace_back(t.key, view);
    }
    request->incarnation = worker.incarnation.load();
    request->pulls.swap(in.request.pulls);
    request->eager_answers = in.request.eager_answers;
    request->entry = in.entry;
    in.reset();
    worker.ready.push_back(request);
    update_ready_counters();
    ctx_.progress.notify_waiters();
}

void ServerEngine::update_ready_counters() {
    int with = 0, failed = 0, unreported = 0;
    for (const auto &w : workers_) {
        with += !w->ready.empty();
        failed += w->failed.load();
        // A worker that stopped cleanly is no news for ANY mode, only a real failure is.
        unreported += w->failed.load() && !w->failure_reported && w->failure.code() != Code::kClosed;
    }
    workers_with_requests_.store(with);
    failed_workers_.store(failed);
    unreported_failures_.store(unreported);
}

void ServerEngine::protocol_error(int32_t worker_rank, const std::string &what) {
    workers_[worker_rank]->counters.protocol_errors.add();
    AFMESH_LOG(AFMESH_LOG_ERROR, "%s violated the protocol: %s", worker_name(worker_rank).c_str(), what.c_str());
    if (Outbox *outbox = workers_[worker_rank]->outbox.get()) ctx_.drop_connection(outbox->conn());
    fail_worker(worker_rank, {Code::kPeerFailed, "protocol violation: " + what});
}

void ServerEngine::fail_worker(int32_t worker_rank, const Status &why) {
    Worker &worker = *workers_[worker_rank];
    if (worker.failed.load()) return;
    AFMESH_LOG(AFMESH_LOG_INFO, "%s failed: %s", worker_name(worker_rank).c_str(), why.message().c_str());
    worker.failure = why;
    worker.failed.store(true);
    worker.inbound.clear();
    ctx_.peer_failed(worker_rank, why);
    update_ready_counters();
    ctx_.progress.notify_waiters();
}

void ServerEngine::replace_worker(int32_t worker_rank) {
    fail_worker(worker_rank, {Code::kPeerFailed, "replaced by a new incarnation"});
    Worker &worker = *workers_[worker_rank];
    for (afmesh_request *r : worker.ready) {
        for (const auto &[key, view] : r->pushes)
            if (Slice &slice = worker.slices[key]; slice.readers) --slice.readers;
        requests_.give_back(r);
    }
    worker.ready.clear();
    worker.inbound.clear();
    // Requests of the old incarnation still handed out no longer hold its
    // slices: they will be answered PEER_FAILED, and the new one must not
    // be refused a slice for them (respond() leaves these counts alone).
    for (auto &[key, slice] : worker.slices) slice.readers = 0;
    worker.outbox.reset();
    worker.mailbox.reset();
    worker.worker_mailbox = {};
    worker.failure_reported = false;
    worker.failure = Status::ok();
    worker.incarnation.fetch_add(1);
    worker.failed.store(false);
    update_ready_counters();
}

void ServerEngine::on_write_done(int32_t worker_rank, uint64_t cookie) {
    std::atomic<uint64_t> &done = workers_[worker_rank]->responses_completed;
    if (cookie > done.load()) done.store(cookie);
    ctx_.progress.notify_waiters();
}

bool ServerEngine::flush() {
    bool drained = true;
    for (size_t w = 0; w < workers_.size(); ++w) {
        Worker &worker = *workers_[w];
        if (worker.failed.load() || !worker.outbox || worker.outbox->empty()) continue;
        if (Status s = worker.outbox->flush(); !s) fail_worker(static_cast<int32_t>(w), s);
        drained = drained && (worker.failed.load() || worker.outbox->empty());
    }
    return drained;
}

bool ServerEngine::batch_ready(afmesh_batch_mode mode) const {
    if (mode == AFMESH_BATCH_ANY)
        return workers_with_requests_.load() > 0 || unreported_failures_.load() > 0 ||
               failed_workers_.load() == static_cast<int>(num_workers_);
    return workers_with_requests_.load() == static_cast<int>(num_workers_) || failed_workers_.load() > 0;
}

Status ServerEngine::get_batch(afmesh_batch_mode mode, int timeout_ms, afmesh_request **requests, size_t capacity,
                               size_t *count) {
    if (!requests || !count) return {Code::kInvalidArgument, "null output"};
    if (mode != AFMESH_BATCH_ALL_WORKERS && mode != AFMESH_BATCH_ANY)
        return {Code::kInvalidArgument, "unknown batch mode " + std::to_string(mode)};
    if (mode == AFMESH_BATCH_ALL_WORKERS && capacity < num_workers_)
        return {Code::kInvalidArgument, "capacity " + std::to_string(capacity) + " cannot hold one request from each of " +
                                            std::to_string(num_workers_) + " workers"};
    if (capacity == 0) return {Code::kInvalidArgument, "capacity 0"};
    *count = 0;
    {
        MutexLock lock(&ctx_.mu);
        begin_serving();
    }
    // A request is handed out as soon as it is both here and asked for:
    // stamped with the later of its arrival and this call, read now, not
    // after the wait, where a clock read would delay every hand-out.
    const uint64_t called_ns = monotonic_ns();
    auto deadline = timeout_ms < 0 ? Clock::time_point::max() : Clock::now() + std::chrono::milliseconds(timeout_ms);
    Status waited = ctx_.progress.wait_until([&] { return batch_ready(mode); }, deadline);
    if (waited.code() == Code::kTimeout)
        return {Code::kTimeout, mode == AFMESH_BATCH_ANY ? "no request arrived in " + std::to_string(timeout_ms) + " ms"
                                                         : "not every worker sent a request within " +
                                                               std::to_string(timeout_ms) + " ms"};
    if (!waited) return waited;
    MutexLock lock(&ctx_.mu);
    auto take = [&](Worker &worker) AFMESH_REQUIRES(ctx_.mu) {
        afmesh_request *r = worker.ready.front();
        worker.ready.pop_front();
        r->processed_ns = std::max(called_ns, r->arrived_ns);
        r->handed_out = true;
        requests[(*count)++] = r;
    };
    if (mode == AFMESH_BATCH_ALL_WORKERS) {
        // Ready with a worker missing means one failed (batch_ready): name
        // it, not a live worker whose request is merely still on its way.
        const bool whole = std::none_of(workers_.begin(), workers_.end(), [](const auto &w) { return w->ready.empty(); });
        for (size_t w = 0; w < workers_.size() && !whole; ++w)
            if (workers_[w]->failed.load())
                return peer_failure(worker_name(static_cast<int32_t>(w)), workers_[w]->failure);
        for (auto &worker : workers_) take(*worker);
    } else {
        for (bool progress = true; progress && *count < capacity;) {
            progress = false;
            for (auto &worker : workers_)
                if (!worker->ready.empty() && *count < capacity) take(*worker), progress = true;
        }
        if (*count == 0) {
            for (size_t w = 0; w < workers_.size(); ++w) {
                Worker &worker = *workers_[w];
                if (worker.failed.load() && !worker.failure_reported && worker.failure.code() != Code::kClosed) {
                    worker.failure_reported = true;
                    update_ready_counters();
                    return peer_failure(worker_name(static_cast<int32_t>(w)), worker.failure);
                }
            }
            if (failed_workers_.load() == static_cast<int>(workers_.size()))
                return {Code::kClosed, "every worker has stopped or failed"};
        }
    }
    update_ready_counters();
    lock.unlock();
    // Staged pushes reach the device before the caller sees them; their
    // slices stay held (readers) until respond, so no worker overwrites them.
    for (size_t i = 0; i < *count; ++i)
        for (const afmesh_request::Copy &c : requests[i]->to_device)
            if (Status s = ctx_.staging.copy(c.dst, c.src, c.bytes); !s) {
                put_back(requests, *count);
                *count = 0;
                return {s.code(), "copying a push to the device receive buffer: " + s.message() +
                                      " (the batch stays queued: get_batch again)"};
            }
    return Status::ok();
}

void ServerEngine::put_back(afmesh_request *const *requests, size_t count) {
    MutexLock lock(&ctx_.mu);
    // In reverse, so each worker's requests return to the front in their order.
    for (size_t i = count; i-- > 0;) {
        afmesh_request *r = requests[i];
        r->handed_out = false;
        workers_[r->worker]->ready.push_front(r);
    }
    update_ready_counters();
}

Status ServerEngine::acquire_staging(const afmesh_tensor *tensors, size_t count,
                                     std::vector<Staging::Buffer> *buffers) {
    for (size_t i = 0; i < count; ++i) {
        const afmesh_tensor &t = tensors[i];
        if (t.bytes == 0 || !t.data || !ctx_.staging.needed(t.kind)) continue;
        if (Status s = ctx_.staging.check_kind(t.kind, "response tensor " + std::to_string(i)); !s) return s;
        if (buffers->empty()) buffers->resize(count);
        if (Status s = ctx_.staging.acquire(t.bytes, &(*buffers)[i]); !s) return s;
    }
    return Status::ok();
}

Status ServerEngine::check_response(afmesh_request *request, const afmesh_tensor *tensors, size_t count,
                                    const std::vector<Staging::Buffer> &buffers) {
    if (!requests_.owns(request) || !request->handed_out)
        return {Code::kInvalidArgument, "not a request this server handed out, or one already answered"};
    if (count != request->pulls.size())
        return {Code::kInvalidArgument, "the request has " + std::to_string(request->pulls.size()) +
                                            " pull slots, the response " + std::to_string(count) + " tensors"};
    std::vector<const Registration *> *regs = &request->regs;
    regs->assign(count, nullptr);
    for (size_t i = 0; i < count; ++i) {
        const afmesh_tensor &t = tensors[i];
        if (t.bytes > request->pulls[i].tensor.bytes)
            return {Code::kInvalidArgument, "response tensor " + std::to_string(i) + " (" + std::to_string(t.bytes) +
                                                " bytes) exceeds the worker's pull buffer of " +
                                                std::to_string(request->pulls[i].tensor.bytes) + " bytes"};
        if (t.bytes && !t.data) return {Code::kInvalidArgument, "response tensor " + std::to_string(i) + " has no data"};
        if (!buffers.empty() && buffers[i].ptr) (*regs)[i] = buffers[i].reg;
        else if (t.bytes)
            if (Status s = ctx_.registry.find_or_add(t.data, t.bytes, t.kind, t.device, &(*regs)[i]); !s) return s;
    }
    return Status::ok();
}

Status ServerEngine::respond(afmesh_request *request, const afmesh_tensor *tensors, size_t count) {
    if (!request) return {Code::kInvalidArgument, "null request"};
    if (count && !tensors) return {Code::kInvalidArgument, "null tensors"};
    // Device tensors go out from pinned buffers, acquired without the lock
    // and given back once respond returns (then the writes have completed).
    // Stays empty, without allocating, for host tensors.
    std::vector<Staging::Buffer> buffers;
    struct Unstage {
        Staging &staging;
        std::vector<Staging::Buffer> &buffers;
        ~Unstage() {
            for (Staging::Buffer &b : buffers) staging.release(b);
        }
    } unstage{ctx_.staging, buffers};
    if (Status s = acquire_staging(tensors, count, &buffers); !s) return s;
    Worker *worker = nullptr;
    {
        MutexLock lock(&ctx_.mu);
        if (Status s = check_response(request, tensors, count, buffers); !s) return s;
        // From here on this call owns the request: it is answered, one way or another.
        request->handed_out = false;
        worker = workers_[request->worker].get();
        if (request->incarnation == worker->incarnation.load()) {
            for (const auto &[key, view] : request->pushes) {
                Slice &slice = worker->slices[key];
                if (slice.readers) --slice.readers;
            }
        }
        // Nothing to copy or write first: the RESPONSE goes out under this lock, at once.
        if (eager_answer(*request, tensors, count, buffers)) {
            Status answered = post_eager(*request, *worker, tensors, count);
            requests_.give_back(request);
            return answered;
        }
    }
    Status answered = answer(*request, *worker, tensors, count, buffers);
    MutexLock lock(&ctx_.mu);
    requests_.give_back(request);
    return answered;
}

Status ServerEngine::answer(afmesh_request &request, Worker &worker, const afmesh_tensor *tensors, size_t count,
                            const std::vector<Staging::Buffer> &buffers) {
    uint64_t cookie = 0;  // of the last write posted
    Status posted = post_response(request, worker, tensors, count, buffers, &cookie);
    if (cookie == 0) return posted;
    // Return only once the response buffers may be reused. Handed over by
    // reference: the std::function wait_until takes would allocate a copy.
    auto done = [&worker, cookie, incarnation = request.incarnation] {
        return worker.responses_completed.load() >= cookie || worker.failed.load() ||
               worker.incarnation.load() != incarnation;
    };
    (void)ctx_.progress.wait_until(std::cref(done), Clock::time_point::max());
    return posted;
}

Status ServerEngine::still_there(const afmesh_request &request, const Worker &worker) const {
    if (worker.incarnation.load() != request.incarnation)
        return {Code::kPeerFailed, worker_name(request.worker) +
                                       " failed and was replaced since this request came: the new incarnation "
                                       "did not send it"};
    if (worker.failed.load()) return peer_failure(worker_name(request.worker), worker.failure);
    return Status::ok();
}

Status ServerEngine::post_response(afmesh_request &request, Worker &worker, const afmesh_tensor *tensors,
                                   size_t count, const std::vector<Staging::Buffer> &buffers, uint64_t *cookie) {
    wire::Response &response = start_response(request, tensors, count);
    const uint32_t imm = imm::encode(imm::Direction::kResponse, request.slot, request.generation);
    // What goes out, in order, piece by piece: response_cursor.h.
    ResponseCursor piece(tensors, count, buffers, request.regs, request.pulls, ctx_.staging.chunk_bytes());
    for (;;) {
        Status copied = piece.copy(ctx_.staging);
        MutexLock lock(&ctx_.mu);
        if (Status s = still_there(request, worker); !s) return s;
        if (!copied) {
            // The worker's push-pull fails; it still gets its slices back.
            response.failed = true;
            if (Status s = send_response(worker, response); !s) fail_worker(request.worker, s);
            return {copied.code(), "copying response tensor " + std::to_string(piece.tensor()) +
                                       " to pinned memory failed: " + copied.message() +
                                       " (the worker's push-pull fails with this error)"};
        }
        // This piece, and every one after it that needs no copy first, go out together.
        for (bool first = true; !piece.done() && (first || !piece.staged()); first = false) {
            const bool last = piece.last();
            // MORE: another write or the RESPONSE follows at once. SIGNAL
            // before a copy and at the end: respond must know when the
            // writes posted so far have left the buffers.
            const bool more = last || !piece.next_staged();
            const uint32_t flags = (more ? AFMESH_NET_MORE : 0) | (last || !more ? AFMESH_NET_SIGNAL : 0);
            if (flags & AFMESH_NET_SIGNAL) *cookie = ++worker.responses_posted;
            const afmesh_net_write_seg segment = piece.segment();
            if (last && carries(request, count)) return conclude(request, worker, response, &segment, *cookie);
            Status s = worker.outbox->write(&segment, 1, imm, flags, *cookie);
            if (!s) {
                fail_worker(request.worker, s);
                return peer_failure(worker_name(request.worker), s);
            }
            ++response.pull_writes;
            piece.step();
        }
        if (piece.done()) return conclude(request, worker, response);
    }
}

wire::Response &ServerEngine::start_response(afmesh_request &request, const afmesh_tensor *tensors, size_t count) {
    wire::Response &response = request.response;  // fresh from the pool, its vector's capacity kept
    response.slot = request.slot;
    response.generation = request.generation;
    response.arrived_ns = request.arrived_ns;
    response.processed_ns = request.processed_ns;
    for (size_t i = 0; i < count; ++i) response.pull_bytes.push_back(tensors[i].bytes);
    return response;
}

Status ServerEngine::post_eager(afmesh_request &request, Worker &worker, const afmesh_tensor *tensors, size_t count) {
    if (Status s = still_there(request, worker); !s) return s;
    wire::Response &response = start_response(request, tensors, count);
    response.eager = true;
    response.eager_data =
        wire::gather_eager(count, [&](size_t i) -> const afmesh_tensor & { return tensors[i]; }, &eager_).data();
    return conclude(request, worker, response);
}

bool ServerEngine::eager_answer(const afmesh_request &request, const afmesh_tensor *tensors, size_t count,
                                const std::vector<Staging::Buffer> &buffers) const {
    if (!request.eager_answers || !buffers.empty()) return false;
    uint64_t bytes = 0;
    for (size_t i = 0; i < count; ++i) {
        if (tensors[i].bytes && tensors[i].kind != AFMESH_MEM_HOST) return false;
        bytes += tensors[i].bytes;
    }
    return ctx_.eager.admits(wire::response_size(count), bytes);
}

bool ServerEngine::carries(const afmesh_request &request, size_t count) const {
    return request.entry >= 0 && wire::response_size(count) <= Mailbox::kMaxMessageBytes;
}

Status ServerEngine::conclude(const afmesh_request &request, Worker &worker, wire::Response &response,
                              const afmesh_net_write_seg *last, uint64_t cookie) {
    Status s;
    if (last) {
        response.carried = true;
        encode_response(response);
        afmesh_net_write_seg segs[2];
        uint32_t n = 0;
        if (last->bytes) segs[n++] = *last;
        const auto entry = static_cast<uint32_t>(request.entry);
        segs[n++] = worker.mailbox->stage(entry, scratch_, worker.worker_mailbox);
        const uint32_t carrier = imm::encode_carrier(imm::Direction::kResponse, static_cast<uint16_t>(entry));
        s = worker.outbox->write(segs, n, carrier, AFMESH_NET_SIGNAL, cookie);
        if (s) worker.counters.count(response);
    } else {
        s = send_response(worker, response);
    }
    if (!s) {
        fail_worker(request.worker, s);
        return peer_failure(worker_name(request.worker), s);
    }
    return Status::ok();
}

void ServerEngine::encode_response(wire::Response &response) {
    response.responded_ns = monotonic_ns();
    scratch_.clear();
    wire::encode(response, scratch_);
}

Status ServerEngine::send_response(Worker &worker, wire::Response &response) {
    encode_response(response);
    Status s = worker.outbox->send(scratch_);
    if (s) worker.counters.count(response);
    return s;
}

void ServerEngine::answer_aborted(int32_t worker_rank, const wire::Request &request) {
    AFMESH_LOG(AFMESH_LOG_INFO, "%s aborted the push-pull in slot %u after %u writes (its stream failed); answered empty",
               worker_name(worker_rank).c_str(), request.slot, request.push_writes);
    answer_empty(worker_rank, request);
}

void ServerEngine::answer_empty(int32_t worker_rank, const wire::Request &request) {
    wire::Response response;
    response.slot = request.slot;
    response.generation = request.generation;
    response.arrived_ns = response.processed_ns = monotonic_ns();
    response.pull_bytes.assign(request.pulls.size(), 0);
    response.failed = true;  // no answer at all
    if (Status s = send_response(*workers_[worker_rank], response); !s) fail_worker(worker_rank, s);
}

Status ServerEngine::respond_vec(const afmesh_tensor &buffer, const int64_t *counts, afmesh_request *const *requests,
                                 size_t num_requests) {
    if (!counts || !requests) return {Code::kInvalidArgument, "null counts or requests"};
    if (buffer.ndim == 0 || buffer.shape[0] <= 0)
        return {Code::kInvalidArgument, "respond_vec needs a buffer with rows (shape[0] > 0)"};
    const uint64_t rows = static_cast<uint64_t>(buffer.shape[0]);
    if (buffer.bytes % rows != 0) return {Code::kInvalidArgument, "buffer bytes are not a whole number of rows"};
    const uint64_t row_bytes = buffer.bytes / rows;
    uint64_t offset = 0;
    for (size_t i = 0; i < num_requests; ++i) {
        if (counts[i] < 0 || offset + static_cast<uint64_t>(counts[i]) > rows)
            return {Code::kInvalidArgument, "counts exceed the buffer's " + std::to_string(rows) + " rows"};
        offset += static_cast<uint64_t>(counts[i]);
    }
    offset = 0;
    for (size_t i = 0; i < num_requests; ++i) {
        afmesh_tensor slice = buffer;
        slice.data = static_cast<uint8_t *>(buffer.data) + offset * row_bytes;
        slice.shape[0] = counts[i];
        slice.bytes = static_cast<uint64_t>(counts[i]) * row_bytes;
        offset += static_cast<uint64_t>(counts[i]);
        if (Status s = respond(requests[i], &slice, 1); !s)
            return {s.code(), "request " + std::to_string(i) + ": " + s.message()};
    }
    return Status::ok();
}

}  // namespace afmesh
