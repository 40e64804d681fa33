// SPDX-License-Identifier: Apache-2.0
// The worker's push-pulls on a device stream (worker.h): staging device
// tensors behind the caller's stream, the gates (events recorded on that
// stream) that hold a push back until the stream has produced it, and the
// flags that make a stream wait for a push-pull (stream_wait).
//
// Given a stream, the caller never blocks on the device: stage() only
// queues the copies, chunk by chunk, each followed by a gate (without a
// stream, it copies at once). The progress thread polls the gates of each
// watched op in stream order (open_gates), and each gate that opens lets
// the op's claimed parts post what is now ready (post_ready, worker.cpp).
#include "worker.h"

#include <algorithm>

namespace afmesh {

Status WorkerEngine::stage(const afmesh_push *push, size_t num_push, const afmesh_pull *pull, size_t num_pull,
                           void *stream, std::vector<Staging::Buffer> *staged, std::vector<Gate> *gates) {
    Staging &staging = ctx_.staging;
    bool reads_device = false;  // a device push the transport reads itself
    Status s;
    for (size_t i = 0; i < num_push + num_pull && s; ++i) {
        const bool is_push = i < num_push;
        const afmesh_tensor &t = is_push ? push[i].tensor : pull[i - num_push].tensor;
        if (t.bytes == 0 || !staging.needed(t.kind)) {
            reads_device |= is_push && t.bytes > 0 && t.kind != AFMESH_MEM_HOST;
            continue;
        }
        s = staging.check_kind(t.kind, (is_push ? "push " : "pull ") + std::to_string(is_push ? i : i - num_push));
        if (!s) break;
        if (staged->empty()) staged->resize(num_push + num_pull);
        Staging::Buffer &buffer = (*staged)[i];
        s = staging.acquire(t.bytes, &buffer);
        if (s && is_push)
            s = stream ? stage_in_chunks(static_cast<uint32_t>(i), t, buffer, stream, gates)
                       : staging.copy(buffer.ptr, t.data, t.bytes);
    }
    // Every gate is recorded behind the work that produces the pushes, so any one will do.
    if (s && reads_device && stream && gates->empty()) {
        void *event = nullptr;
        s = staging.record(stream, &event);
        if (s) gates->push_back({event, kEveryDirectPush, 0});
    }
    if (!s) {
        release_gates(*gates, true);  // the queued copies may still write the buffers
        for (Staging::Buffer &buffer : *staged) staging.release(buffer);
    }
    return s;
}

Status WorkerEngine::stage_in_chunks(uint32_t push, const afmesh_tensor &tensor, const Staging::Buffer &buffer,
                                     void *stream, std::vector<Gate> *gates) {
    const uint64_t chunk = ctx_.staging.chunk_bytes();
    for (uint64_t offset = 0; offset < tensor.bytes; offset += chunk) {
        const uint64_t bytes = std::min(chunk, tensor.bytes - offset);
        // On the caller's stream the copy runs behind the work that produces the tensor.
        if (Status s = ctx_.staging.copy_async(static_cast<uint8_t *>(buffer.ptr) + offset,
                                               static_cast<const uint8_t *>(tensor.data) + offset, bytes, stream);
            !s)
            return s;
        void *event = nullptr;
        if (Status s = ctx_.staging.record(stream, &event); !s) return s;
        gates->push_back({event, push, offset + bytes});
    }
    return Status::ok();
}

void WorkerEngine::release_gates(std::vector<Gate> &gates, bool wait) {
    for (Gate &gate : gates) ctx_.staging.release_event(gate.event, wait);
    gates.clear();
}

void WorkerEngine::watch_gates(uint16_t slot) {
    Op &op = ops_[slot];
    // With a stream every device push is gated: nothing of it goes before its gate opens.
    for (PushSpec &push : op.pushes)
        if (push.tensor.kind != AFMESH_MEM_HOST) push.ready_bytes = 0;
    // The NetRecv thread watches the gates from now on.
    gated_.push_back({slot, 0, op.sequence});
    num_gated_.store(gated_.size());
    ctx_.progress.wake_netrecv();
}

void WorkerEngine::open_gate(Op &op, Gate &gate, bool first) {
    ctx_.staging.release_event(gate.event, false);
    gate.event = nullptr;
    if (gate.push != kEveryDirectPush) op.pushes[gate.push].ready_bytes = gate.ready_bytes;
    // Every gate is behind the work that produces the pushes: the first opens the direct ones.
    if (first)
        for (PushSpec &push : op.pushes)
            if (!push.staged.ptr) push.ready_bytes = push.tensor.bytes;
}

bool WorkerEngine::open_gates() {
    if (num_gated_.load() == 0) return false;
    MutexLock lock(&ctx_.mu);
    std::erase_if(gated_, [&](const Parked &g) AFMESH_REQUIRES(ctx_.mu) {
        Op &op = ops_[g.slot];
        // Settled or failed without it (a server failed): wait() gives the gates back.
        if (!op.in_use || op.sequence != g.sequence || op.state.load() != kPending || !op.error.is_ok()) return true;
        while (op.next_gate < op.gates.size()) {
            Gate &gate = op.gates[op.next_gate];
            bool done = false;
            if (Status s = ctx_.staging.query(gate.event, &done); !s) {
                ctx_.staging.release_event(gate.event, false);  // its work has ended, in failure
                gate.event = nullptr;
                fail_op(g.slot, s);
                return true;
            }
            if (!done) return false;
            open_gate(op, gate, op.next_gate++ == 0);
            for (Part &part : op.parts)
                if (part.claimed) post_ready(g.slot, part);
            // Posting failed and the op settled: wait() may own it now.
            if (op.state.load() != kPending || !op.error.is_ok()) return true;
        }
        return true;
    });
    num_gated_.store(gated_.size());
    return !gated_.empty();
}

Status WorkerEngine::stream_wait(afmesh_handle handle, void *stream) {
    if (!stream)
        return {Code::kInvalidArgument, "afmesh_stream_wait needs a stream (the device module's stream handle)"};
    MutexLock lock(&ctx_.mu);
    Op *op = nullptr;
    if (Status s = ops_.find(handle, &op); !s) return s;
    const uint16_t slot = inflight::slot_of(handle);
    if (Status s = flags_.wait(slot, stream, op->sequence); !s) return s;
    op->flag_armed = true;
    if (op->state.load() == kPending) return Status::ok();
    // Settled before the stream started waiting: release it now (even if the copy fails: it must not hang).
    Status delivered = op->state.load() == kDone ? deliver(*op) : Status::ok();
    release_stream(slot);
    return delivered;
}

void WorkerEngine::release_stream(uint16_t slot) {
    const Op &op = ops_[slot];
    if (!op.flag_armed) return;
    // Flag values are the op's sequence: they grow with every reuse of the slot.
    flags_.release(slot, op.sequence);
}

}  // namespace afmesh
