// SPDX-License-Identifier: Apache-2.0
// Registered bounce memory: each connection's receive ring, and the
// context's pool of send buffers for messages too large to go inline.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "thread_annotations.h"
#include "verbs_api.h"

namespace afmesh::ibverbs {

/** `count` slots of `slot_size` bytes in one registration. */
class SlotMemory {
public:
    SlotMemory(uint32_t count, uint32_t slot_size) : slot_size_(slot_size), bytes_(size_t{count} * slot_size) {}
    ~SlotMemory();
    SlotMemory(const SlotMemory &) = delete;
    SlotMemory &operator=(const SlotMemory &) = delete;

    /** Registers the memory (local write, for receives) ; false with `why`. */
    bool register_with(const VerbsApi &api, ibv_pd *pd, std::string *why);
    uint8_t *slot(uint32_t index) { return bytes_.data() + size_t{index} * slot_size_; }
    uint32_t lkey() const { return mr_->lkey; }
    uint32_t slot_size() const { return slot_size_; }

private:
    const VerbsApi *api_ = nullptr;
    uint32_t slot_size_;
    std::vector<uint8_t> bytes_;
    ibv_mr *mr_ = nullptr;
};

/** The context's send bounce buffers; any thread takes and returns slots. */
class SendPool {
public:
    SendPool(uint32_t count, uint32_t slot_size);
    bool register_with(const VerbsApi &api, ibv_pd *pd, std::string *why) { return memory_.register_with(api, pd, why); }
    /** A free slot index, or -1 when every slot is in flight. */
    int take();
    void give_back(uint32_t slot);
    uint8_t *slot(uint32_t index) { return memory_.slot(index); }
    uint32_t lkey() const { return memory_.lkey(); }

private:
    SlotMemory memory_;
    Mutex mu_;
    std::vector<uint32_t> free_ AFMESH_GUARDED_BY(mu_);
};

}  // namespace afmesh::ibverbs
