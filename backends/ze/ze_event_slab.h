// SPDX-License-Identifier: Apache-2.0
// Level Zero events come from fixed-size pools; the slab hands out events of
// host-visible pools and takes them back for reuse, so event creation (for
// HAL events, stream syncs and flag waits) is a free-list pop, not a pool
// allocation per event.
#pragma once

#include <level_zero/ze_api.h>

#include <mutex>
#include <vector>

namespace afmesh::ze {

class EventSlab {
public:
    explicit EventSlab(ze_context_handle_t context) : context_(context) {}
    EventSlab(const EventSlab &) = delete;
    EventSlab &operator=(const EventSlab &) = delete;
    ~EventSlab();

    /** An unsignalled event, visible to the host and every device of the context. */
    ze_result_t take(ze_event_handle_t *event);
    /** Resets `event` and keeps it for a later take(). No command may still reference it. */
    void give(ze_event_handle_t event);

private:
    ze_result_t grow();

    static constexpr uint32_t kEventsPerPool = 64;
    ze_context_handle_t context_;
    std::mutex mutex_;
    std::vector<ze_event_pool_handle_t> pools_;
    std::vector<ze_event_handle_t> events_;  // every event created, for the destructor
    std::vector<ze_event_handle_t> free_;
};

}  // namespace afmesh::ze
