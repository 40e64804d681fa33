// SPDX-License-Identifier: Apache-2.0
#include "copy_fifo.h"

namespace afmesh::tcp {

uint8_t *CopyFifo::allocate(size_t bytes, size_t *charge) {
    if (bytes > capacity_) return nullptr;
    if (!buffer_) buffer_ = std::make_unique_for_overwrite<uint8_t[]>(capacity_);
    if (used_ == 0) head_ = tail_ = 0;  // empty: the whole buffer is one free run
    size_t skip = 0;
    if (used_ == 0 || tail_ > head_) {
        // Free space is [tail_, capacity_) followed by [0, head_).
        if (capacity_ - tail_ < bytes) {
            if (head_ < bytes) return nullptr;
            skip = capacity_ - tail_;
            tail_ = 0;
        }
    } else if (head_ - tail_ < bytes) {
        return nullptr;  // free space is [tail_, head_) only
    }
    uint8_t *p = buffer_.get() + tail_;
    tail_ += bytes;
    used_ += skip + bytes;
    *charge = skip + bytes;
    return p;
}

void CopyFifo::release(size_t charge) {
    head_ += charge;
    if (head_ >= capacity_) head_ -= capacity_;
    used_ -= charge;
}

}  // namespace afmesh::tcp
