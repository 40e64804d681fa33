// SPDX-License-Identifier: Apache-2.0
#include "response_cursor.h"

#include <algorithm>

namespace afmesh {
namespace {

/** `base` advanced by `offset` bytes; `base` itself at offset 0 (it may be null: an empty tensor). */
const void *at(const void *base, uint64_t offset) {
    return offset ? static_cast<const uint8_t *>(base) + offset : base;
}

}  // namespace

ResponseCursor::ResponseCursor(const afmesh_tensor *tensors, size_t count, const std::vector<Staging::Buffer> &buffers,
                               const std::vector<const Registration *> &regs,
                               const std::vector<wire::PullMeta> &pulls, uint64_t chunk_bytes)
    : tensors_(tensors), count_(count), buffers_(buffers), regs_(regs), pulls_(pulls), chunk_bytes_(chunk_bytes) {}

uint64_t ResponseCursor::length(Position at) const {
    const uint64_t bytes = tensors_[at.tensor].bytes;
    return is_staged(at.tensor) ? std::min(chunk_bytes_, bytes - at.offset) : bytes;
}

ResponseCursor::Position ResponseCursor::next() const {
    Position after{tensor_, offset_};
    after.offset += length(after);
    if (after.offset >= tensors_[after.tensor].bytes) {
        ++after.tensor;
        after.offset = 0;
    }
    return after;
}

bool ResponseCursor::last() const { return next().tensor == count_; }

bool ResponseCursor::next_staged() const {
    const Position after = next();
    return after.tensor < count_ && is_staged(after.tensor);
}

Status ResponseCursor::copy(const Staging &staging) const {
    if (!staged()) return Status::ok();
    return staging.copy(static_cast<uint8_t *>(buffers_[tensor_].ptr) + offset_,
                        static_cast<const uint8_t *>(tensors_[tensor_].data) + offset_, length({tensor_, offset_}));
}

afmesh_net_write_seg ResponseCursor::segment() const {
    const size_t t = tensor_;
    const void *source = at(is_staged(t) ? buffers_[t].ptr : tensors_[t].data, offset_);
    return {source, regs_[t] ? regs_[t]->mr : nullptr, length({t, offset_}), &pulls_[t].rkey,
            pulls_[t].offset + offset_};
}

void ResponseCursor::step() {
    const Position after = next();
    tensor_ = after.tensor;
    offset_ = after.offset;
}

}  // namespace afmesh
