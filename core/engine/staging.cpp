// SPDX-License-Identifier: Apache-2.0
#include "staging.h"

#include "log.h"
#include "mem_kind_names.h"
#include "topology/memory_node.h"

namespace afmesh {

Staging::~Staging() {
    for (const Buffer &b : all_) {
        (void)registry_.remove(b.reg);
        dev().mem_free(device_.ctx(), AFMESH_ALLOC_HOST_PINNED, b.ptr);
    }
    for (void *event : events_) dev().event_destroy(device_.ctx(), event);
}

Status Staging::check_kind(uint32_t kind, const std::string &what) const {
    if (kind < AFMESH_MEM_KIND_COUNT && kind == dev().mem_kind) return Status::ok();
    return {Code::kNotSupported,
            what + ": transport '" + transport_.name() + "' cannot register " + mem_kind_display_name(kind) +
                " memory, and device module '" + device_.name() + "' cannot stage it (it handles " +
                mem_kind_display_name(dev().mem_kind) + " memory): set AFMESH_DEVICE to the module of that memory"};
}

Status Staging::acquire(uint64_t bytes, Buffer *out) {
    uint64_t capacity = kMinCapacity;
    while (capacity < bytes) capacity <<= 1;
    MutexLock lock(&mu_);
    auto it = free_.find(capacity);
    if (it != free_.end()) {
        *out = it->second;
        free_.erase(it);
        return Status::ok();
    }
    Buffer b;
    b.capacity = capacity;
    take_module_error();
    int rc;
    {
        // Pinned memory takes its pages now: on the NIC's node, which reads and writes them.
        const topology::MemoryNodeScope on_nic_node(numa_node_);
        if (!on_nic_node.ok() && !numa_refused_) {
            numa_refused_ = true;
            AFMESH_LOG(AFMESH_LOG_INFO, "staging memory goes where the kernel puts it: %s", on_nic_node.error().c_str());
        }
        rc = dev().mem_alloc(device_.ctx(), device_id_, AFMESH_ALLOC_HOST_PINNED, capacity, &b.ptr);
    }
    if (rc != AFMESH_HAL_OK)
        return {static_cast<Code>(rc), "cannot allocate " + std::to_string(capacity) +
                                           " bytes of pinned staging memory: " + take_module_error()};
    if (Status s = registry_.add(b.ptr, capacity, AFMESH_MEM_HOST, -1, &b.reg); !s) {
        dev().mem_free(device_.ctx(), AFMESH_ALLOC_HOST_PINNED, b.ptr);
        return s;
    }
    all_.push_back(b);
    *out = b;
    return Status::ok();
}

void Staging::release(Buffer &b) {
    if (!b.ptr) return;
    MutexLock lock(&mu_);
    free_.emplace(b.capacity, b);
    b = Buffer{};
}

Status Staging::copy(void *dst, const void *src, uint64_t bytes) const {
    if (bytes == 0) return Status::ok();
    take_module_error();
    int rc = dev().memcpy_sync(device_.ctx(), dst, src, bytes);
    count_copy(bytes);
    return rc == AFMESH_HAL_OK ? Status::ok() : Status(static_cast<Code>(rc), "staging copy failed: " + take_module_error());
}

Status Staging::copy_async(void *dst, const void *src, uint64_t bytes, void *stream) const {
    take_module_error();
    int rc = dev().memcpy_async(device_.ctx(), dst, src, bytes, stream);
    count_copy(bytes);
    return rc == AFMESH_HAL_OK ? Status::ok()
                               : Status(static_cast<Code>(rc), "staging copy on the caller's stream failed: " + take_module_error());
}

Status Staging::record(void *stream, void **event) {
    *event = nullptr;
    {
        MutexLock lock(&mu_);
        if (!events_.empty()) {
            *event = events_.back();
            events_.pop_back();
        }
    }
    take_module_error();
    if (!*event)
        if (int rc = dev().event_create(device_.ctx(), device_id_, event); rc != AFMESH_HAL_OK) {
            *event = nullptr;
            return {static_cast<Code>(rc), "cannot create a device event: " + take_module_error()};
        }
    if (int rc = dev().event_record(device_.ctx(), *event, stream); rc != AFMESH_HAL_OK) {
        Status failed(static_cast<Code>(rc), "cannot record an event on the caller's stream: " + take_module_error());
        release_event(*event, false);
        *event = nullptr;
        return failed;
    }
    return Status::ok();
}

Status Staging::query(void *event, bool *done) const {
    take_module_error();
    const int rc = dev().event_query(device_.ctx(), event);
    *done = rc == AFMESH_HAL_OK;
    if (rc == AFMESH_HAL_OK || rc == AFMESH_HAL_AGAIN) return Status::ok();
    return {static_cast<Code>(rc), "the caller's stream failed before the push could be sent: " + take_module_error()};
}

void Staging::release_event(void *event, bool wait) {
    if (!event) return;
    // Work behind the event may still write into pooled staging buffers.
    if (wait && dev().event_sync(device_.ctx(), event) != AFMESH_HAL_OK)
        AFMESH_LOG(AFMESH_LOG_WARN, "waiting for a device event failed: %s", take_module_error().c_str());
    MutexLock lock(&mu_);
    events_.push_back(event);
}

}  // namespace afmesh
