#include "outbox.h"

#include "log.h"

namespace afmesh {

int Outbox::post(const Entry &e) {
    const afmesh_net_ops &ops = transport_->net();
    if (e.is_write)
        return ops.write_imm(transport_->ctx(), conn_, e.src, e.bytes, e.mr, &e.dst, e.offset, e.imm, e.flags,
                             e.cookie);
    return ops.send(transport_->ctx(), conn_, e.message.data(), e.message.size(), e.flags, e.cookie);
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

Status Outbox::write(const void *src, uint64_t bytes, afmesh_net_mr *mr, const afmesh_net_rkey &dst, uint64_t offset,
                     uint32_t imm, uint32_t flags, uint64_t cookie) {
    Entry e;
    e.is_write = true;
    e.src = src;
    e.bytes = bytes;
    e.mr = mr;
    e.dst = dst;
    e.offset = offset;
    e.imm = imm;
    e.flags = (flags & ~AFMESH_NET_MORE) | (flags & more_);
    e.cookie = cookie;
    return enqueue_or_post(std::move(e));
}

Status Outbox::send(const std::vector<uint8_t> &message) {
    if (queue_.empty()) {
        take_module_error();
        int rc = transport_->net().send(transport_->ctx(), conn_, message.data(), message.size(), 0, 0);
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
