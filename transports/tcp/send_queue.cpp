// SPDX-License-Identifier: Apache-2.0
#include "send_queue.h"

#include <algorithm>
#include <utility>

namespace afmesh::tcp {
namespace {

constexpr size_t kInitialDepth = 64;

}  // namespace

SendQueue::SendQueue(size_t max_depth) : slots_(std::min(kInitialDepth, max_depth)), max_depth_(max_depth) {}

SendOp &SendQueue::push() {
    if (tail_ - head_ == slots_.size()) grow();
    SendOp &op = slot(tail_++);
    op = SendOp{};
    return op;
}

void SendQueue::grow() {
    std::vector<SendOp> larger(slots_.size() * 2);
    for (size_t i = head_; i != tail_; ++i) larger[i & (larger.size() - 1)] = std::move(slot(i));
    slots_.swap(larger);
}

void SendQueue::advance(uint64_t bytes) {
    while (bytes > 0) {
        SendOp &op = slot(unsent_);
        const uint64_t take = std::min(bytes, op.size() - op.sent);
        op.sent += take;
        bytes -= take;
        if (op.sent == op.size()) ++unsent_;
    }
}

void SendQueue::pop() {
    SendOp &op = slot(head_++);
    op.source.reset();
}

void SendQueue::clear() {
    while (head_ != tail_) slot(head_++).source.reset();
    unsent_ = head_;
}

}  // namespace afmesh::tcp
