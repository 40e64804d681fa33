// SPDX-License-Identifier: Apache-2.0
// Prepared push-pulls: a description checked and built once, started many
// times (worker.h says what a start skips).
#include <algorithm>

#include "worker.h"

namespace afmesh {

Status WorkerEngine::prepare(const afmesh_push *push, size_t num_push, const afmesh_pull *pull, size_t num_pull,
                             Prepared **out) {
    if (!out) return {Code::kInvalidArgument, "null prepared push-pull pointer"};
    if (Status s = validate(push, num_push, pull, num_pull); !s) return s;
    auto prepared = std::make_unique<Prepared>();
    Prepared &p = *prepared;
    p.owner = this;
    p.push.assign(push, push + num_push);
    p.pull.assign(pull, pull + num_pull);
    size_t servers = 0;
    for (const afmesh_push &one : p.push) servers += one.num_servers;
    p.servers.reserve(servers);
    for (afmesh_push &one : p.push) {
        const int32_t *listed = one.servers;
        if (one.num_servers) one.servers = p.servers.data() + p.servers.size();
        p.servers.insert(p.servers.end(), listed, listed + one.num_servers);
    }
    const auto host = [](const afmesh_tensor &t) { return t.bytes == 0 || t.kind == AFMESH_MEM_HOST; };
    p.host = std::all_of(p.push.begin(), p.push.end(), [&](const afmesh_push &x) { return host(x.tensor); }) &&
             std::all_of(p.pull.begin(), p.pull.end(), [&](const afmesh_pull &x) { return host(x.tensor); });
    MutexLock lock(&ctx_.mu);
    // What build_op() refuses (a key pushed twice to a server, a request
    // over the message limit) is refused here, not at the first start.
    if (p.host)
        if (Status s = build_prepared(p); !s) return s;
    *out = prepared.get();
    prepared_.emplace(prepared.get(), std::move(prepared));
    return Status::ok();
}

Status WorkerEngine::release_prepared(Prepared *prepared) {
    MutexLock lock(&ctx_.mu);
    if (!prepared_.erase(prepared)) return {Code::kNotFound, "not a push-pull prepared by this node, or freed already"};
    return Status::ok();
}

Status WorkerEngine::build_prepared(Prepared &p) {
    p.built = false;
    // Read first: a registration that goes while build_op() runs shows at the next start.
    const uint64_t epoch = ctx_.registry.epoch();
    if (Status s = build_op(p.op, p.push.data(), p.push.size(), p.pull.data(), p.pull.size(), {}); !s) return s;
    for (Part &part : p.op.parts) {
        describe_tensors(p.op, part, &request_);
        part.encoded_tensors.clear();
        wire::encode_tensors(request_, part.encoded_tensors);
    }
    p.built = true;
    p.epoch = epoch;
    return Status::ok();
}

Status WorkerEngine::start(Prepared &p, void *stream, afmesh_handle *handle) {
    if (!handle) return {Code::kInvalidArgument, "null handle pointer"};
    if (p.owner != this) return {Code::kInvalidArgument, "a push-pull prepared by another node"};
    // Staging and gates are made at each push-pull: a prepared one that needs them is one.
    if (stream || !p.host) return push_pull(p.push.data(), p.push.size(), p.pull.data(), p.pull.size(), stream, handle);
    MutexLock lock(&ctx_.mu);
    if (Status s = room_for_op(); !s) return s;
    if (!p.built || p.epoch != ctx_.registry.epoch())
        if (Status s = build_prepared(p); !s) return s;
    if (Status s = servers_ready(p.op); !s) return s;
    Op &op = ops_.next_to_build();
    // Copy-assigned: the slot's vectors keep their capacity.
    op.pushes = p.op.pushes;
    op.pulls = p.op.pulls;
    op.parts = p.op.parts;
    op.staged = false;
    op.delivered.store(false);
    op.flag_armed = false;
    issue(ops_.next_free(), {}, handle);
    return Status::ok();
}

}  // namespace afmesh
