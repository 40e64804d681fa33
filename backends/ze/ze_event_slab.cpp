// SPDX-License-Identifier: Apache-2.0
#include "ze_event_slab.h"

namespace afmesh::ze {

EventSlab::~EventSlab() {
    for (ze_event_handle_t event : events_) zeEventDestroy(event);
    for (ze_event_pool_handle_t pool : pools_) zeEventPoolDestroy(pool);
}

ze_result_t EventSlab::grow() {
    const ze_event_pool_desc_t pool_desc = {ZE_STRUCTURE_TYPE_EVENT_POOL_DESC, nullptr,
                                            ZE_EVENT_POOL_FLAG_HOST_VISIBLE, kEventsPerPool};
    ze_event_pool_handle_t pool = nullptr;
    // No device list: the pool is usable by every device of the context.
    if (ze_result_t res = zeEventPoolCreate(context_, &pool_desc, 0, nullptr, &pool)) return res;
    pools_.push_back(pool);
    for (uint32_t index = 0; index < kEventsPerPool; ++index) {
        // Host scope on both sides: a signal makes the device's writes visible
        // to the host, and a wait makes the host's (or a NIC's) writes visible
        // to the work the wait releases.
        const ze_event_desc_t desc = {ZE_STRUCTURE_TYPE_EVENT_DESC, nullptr, index, ZE_EVENT_SCOPE_FLAG_HOST,
                                      ZE_EVENT_SCOPE_FLAG_HOST};
        ze_event_handle_t event = nullptr;
        if (ze_result_t res = zeEventCreate(pool, &desc, &event)) return res;
        events_.push_back(event);
        free_.push_back(event);
    }
    return ZE_RESULT_SUCCESS;
}

ze_result_t EventSlab::take(ze_event_handle_t *event) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (free_.empty()) {
        if (ze_result_t res = grow(); res != ZE_RESULT_SUCCESS && free_.empty()) return res;
    }
    *event = free_.back();
    free_.pop_back();
    return ZE_RESULT_SUCCESS;
}

void EventSlab::give(ze_event_handle_t event) {
    // An event that cannot be reset stays out of circulation (the destructor still frees it).
    if (zeEventHostReset(event) != ZE_RESULT_SUCCESS) return;
    std::lock_guard<std::mutex> lock(mutex_);
    free_.push_back(event);
}

}  // namespace afmesh::ze
