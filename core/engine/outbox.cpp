// SPDX-License-Identifier: Apache-2.0
#include "outbox.h"

#include "log.h"

namespace afmesh {

int Outbox::post(Entry &e) {
    if (e.segments == 0) return send_now(e.message);
    const afmesh_net_ops &ops = transport_->net();
    // The entry may have moved since it was made: point the segments at its own copies of their destinations.
    for (uint32_t i = 0; i < e.segments; ++i) e.seg[i].dst = &e.dst[i];
    int rc;
    if (e.segments == 1) {
        const afmesh_net_write_seg &s = e.seg[0];
        rc = ops.write_imm(transport_->ctx(), conn_, s.src, s.bytes, s.src_mr, s.dst, s.dst_offset, e.imm, e.flags,
                           e.cookie);
    } else {
        rc = ops.write_imm_v(transport_->ctx(), conn_, e.seg, e.segments, e.imm, e.flags, e.cookie);
    }
    count(rc, e.segments == 1 ? counters_->writes : counters_->gathered_writes);
    return rc;
}

int Outbox::send_now(const std::vector<uint8_t> &message) {
    const int rc = transport_->net().send(transport_->ctx(), conn_, message.data(), message.size(), 0, 0);
    count(rc, counters_->messages);
    return rc;
}

void Outbox::count(int rc, Tally &posted) {
    if (rc == AFMESH_HAL_OK) posted.add();
    else if (rc == AFMESH_HAL_AGAIN) counters_->queue_full.add();
}

Status Outbox::enqueue_or_post(Entry &&e) {
    if (queue_.empty()) {
        take_module_error();
        int rc = post(e);
        if (rc == AFMESH_HAL_OK) return Status::ok();
        if (rc != AFMESH_HAL_AGAIN) return {static_cast<Code>(rc), take_module_error()};
    }
    queue_.push_back(std::move(e));
    return Status::ok();
}

Status Outbox::write(const afmesh_net_write_seg *segs, uint32_t count, uint32_t imm, uint32_t flags,
                     uint64_t cookie) {
    if (count == 0 || count > kMaxSegments || (count > 1 && transport_->write_segs() < count))
        return {Code::kError, "a write of " + std::to_string(count) + " segments on transport " +
                                     transport_->name() + ", which gathers " +
                                     std::to_string(transport_->write_segs())};
    Entry e;
    e.segments = count;
    for (uint32_t i = 0; i < count; ++i) {
        e.seg[i] = segs[i];
        e.dst[i] = *segs[i].dst;
    }
    e.imm = imm;
    e.flags = (flags & ~AFMESH_NET_MORE) | (flags & more_);
    e.cookie = cookie;
    return enqueue_or_post(std::move(e));
}

Status Outbox::send(const std::vector<uint8_t> &message) {
    if (queue_.empty()) {
        take_module_error();
        int rc = send_now(message);
        if (rc == AFMESH_HAL_OK) return Status::ok();
        if (rc != AFMESH_HAL_AGAIN) return {static_cast<Code>(rc), take_module_error()};
    }
    Entry e;
    e.message = message;
    queue_.push_back(std::move(e));
    return Status::ok();
}

Status Outbox::flush() {
    while (!queue_.empty()) {
        take_module_error();
        int rc = post(queue_.front());
        if (rc == AFMESH_HAL_AGAIN) return Status::ok();
        if (rc != AFMESH_HAL_OK) return {static_cast<Code>(rc), take_module_error()};
        queue_.pop_front();
    }
    return Status::ok();
}

}  // namespace afmesh
