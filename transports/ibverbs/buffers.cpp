// SPDX-License-Identifier: Apache-2.0
#include "buffers.h"

#include <cerrno>
#include <cstring>

namespace afmesh::ibverbs {

SlotMemory::~SlotMemory() {
    if (mr_) api_->dereg_mr(mr_);
}

bool SlotMemory::register_with(const VerbsApi &api, ibv_pd *pd, std::string *why) {
    api_ = &api;
    mr_ = api.reg_mr(pd, bytes_.data(), bytes_.size(), IBV_ACCESS_LOCAL_WRITE);
    if (mr_) return true;
    *why = std::string("ibv_reg_mr of ") + std::to_string(bytes_.size()) + " bounce bytes: " + strerror(errno);
    return false;
}

SendPool::SendPool(uint32_t count, uint32_t slot_size) : memory_(count, slot_size) {
    free_.reserve(count);
    for (uint32_t i = count; i-- > 0;) free_.push_back(i);
}

int SendPool::take() {
    MutexLock lock(&mu_);
    if (free_.empty()) return -1;
    const uint32_t slot = free_.back();
    free_.pop_back();
    return static_cast<int>(slot);
}

void SendPool::give_back(uint32_t slot) {
    MutexLock lock(&mu_);
    free_.push_back(slot);
}

}  // namespace afmesh::ibverbs
