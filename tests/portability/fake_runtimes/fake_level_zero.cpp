// SPDX-License-Identifier: Apache-2.0
// A fake Level Zero loader (libze_loader.so.1) for tests: one GPU whose
// memory is host memory and whose command lists are in-order host queues.
// It implements exactly the entry points the ze module uses, with the
// semantics the specification gives them, so the module's logic (event
// recycling, the flag-to-event mapping, barriers, copies) runs in CI on hosts
// without an Intel GPU. Loaded instead of the real loader via LD_LIBRARY_PATH.
#include <level_zero/ze_api.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <vector>

#include "fake_allocations.h"
#include "fake_device_queue.h"

using afmesh::fake::Allocation;
using afmesh::fake::MemoryKind;

struct _ze_driver_handle_t {};
struct _ze_device_handle_t {};
struct _ze_context_handle_t {};
struct _ze_event_pool_handle_t {};
struct _ze_event_handle_t {
    std::atomic<bool> signalled{false};
};
struct _ze_command_list_handle_t {
    bool synchronous = false;
    afmesh::fake::DeviceQueue queue;
};

namespace {

_ze_driver_handle_t g_driver;
_ze_device_handle_t g_device;
afmesh::fake::Allocations g_memory;

constexpr uint64_t kDeviceMemory = 1ull << 30;

void submit(ze_command_list_handle_t list, std::function<void()> op) {
    list->queue.push(std::move(op));
    if (list->synchronous) list->queue.drain();
}

// Fills the chained ze_external_memory_export_fd_t, if any, with a stand-in
// dma-buf: a memfd is a real file descriptor the caller can close.
void export_fd_if_asked(const void *chain, bool exportable) {
    for (auto *base = static_cast<const ze_base_desc_t *>(chain); base;
         base = static_cast<const ze_base_desc_t *>(base->pNext)) {
        if (base->stype != ZE_STRUCTURE_TYPE_EXTERNAL_MEMORY_EXPORT_FD) continue;
        auto *exported = const_cast<ze_external_memory_export_fd_t *>(
            reinterpret_cast<const ze_external_memory_export_fd_t *>(base));
        exported->fd = exportable && (exported->flags & ZE_EXTERNAL_MEMORY_TYPE_FLAG_DMA_BUF)
                           ? memfd_create("afmesh-fake-dmabuf", MFD_CLOEXEC)
                           : -1;
    }
}

}  // namespace

extern "C" {

ZE_APIEXPORT ze_result_t ZE_APICALL zeInit(ze_init_flags_t) { return ZE_RESULT_SUCCESS; }

ZE_APIEXPORT ze_result_t ZE_APICALL zeDriverGet(uint32_t *count, ze_driver_handle_t *drivers) {
    if (drivers && *count >= 1) drivers[0] = &g_driver;
    *count = 1;
    return ZE_RESULT_SUCCESS;
}

ZE_APIEXPORT ze_result_t ZE_APICALL zeDeviceGet(ze_driver_handle_t, uint32_t *count, ze_device_handle_t *devices) {
    if (devices && *count >= 1) devices[0] = &g_device;
    *count = 1;
    return ZE_RESULT_SUCCESS;
}

ZE_APIEXPORT ze_result_t ZE_APICALL zeDeviceGetProperties(ze_device_handle_t, ze_device_properties_t *props) {
    props->type = ZE_DEVICE_TYPE_GPU;
    props->maxMemAllocSize = kDeviceMemory;
    snprintf(props->name, sizeof props->name, "afmesh fake Level Zero GPU");
    return ZE_RESULT_SUCCESS;
}

ZE_APIEXPORT ze_result_t ZE_APICALL zeDeviceGetCommandQueueGroupProperties(
    ze_device_handle_t, uint32_t *count, ze_command_queue_group_properties_t *groups) {
    if (groups && *count >= 1) {
        groups[0].flags = ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COMPUTE | ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COPY;
        groups[0].numQueues = 1;
    }
    *count = 1;
    return ZE_RESULT_SUCCESS;
}

ZE_APIEXPORT ze_result_t ZE_APICALL zeDeviceGetExternalMemoryProperties(
    ze_device_handle_t, ze_device_external_memory_properties_t *props) {
    props->memoryAllocationExportTypes = ZE_EXTERNAL_MEMORY_TYPE_FLAG_DMA_BUF;
    return ZE_RESULT_SUCCESS;
}

ZE_APIEXPORT ze_result_t ZE_APICALL zeDevicePciGetPropertiesExt(ze_device_handle_t, ze_pci_ext_properties_t *props) {
    props->address = {0, 0x3a, 0, 0};
    return ZE_RESULT_SUCCESS;
}

ZE_APIEXPORT ze_result_t ZE_APICALL zeDeviceGetMemoryProperties(ze_device_handle_t, uint32_t *count,
                                                               ze_device_memory_properties_t *props) {
    if (props && *count >= 1) props[0].totalSize = kDeviceMemory;
    *count = 1;
    return ZE_RESULT_SUCCESS;
}

ZE_APIEXPORT ze_result_t ZE_APICALL zeContextCreate(ze_driver_handle_t, const ze_context_desc_t *,
                                                   ze_context_handle_t *context) {
    *context = new _ze_context_handle_t;
    return ZE_RESULT_SUCCESS;
}

ZE_APIEXPORT ze_result_t ZE_APICALL zeContextDestroy(ze_context_handle_t context) {
    delete context;
    return ZE_RESULT_SUCCESS;
}

ZE_APIEXPORT ze_result_t ZE_APICALL zeCommandListCreateImmediate(ze_context_handle_t, ze_device_handle_t,
                                                                const ze_command_queue_desc_t *desc,
                                                                ze_command_list_handle_t *list) {
    *list = new _ze_command_list_handle_t;
    (*list)->synchronous = desc->mode == ZE_COMMAND_QUEUE_MODE_SYNCHRONOUS;
    return ZE_RESULT_SUCCESS;
}

ZE_APIEXPORT ze_result_t ZE_APICALL zeCommandListDestroy(ze_command_list_handle_t list) {
    delete list;  // joins the worker after it ran what was appended
    return ZE_RESULT_SUCCESS;
}

// In-order queue: a barrier without wait events is implicit. With wait events
// it waits for those, as the specification says, then signals.
ZE_APIEXPORT ze_result_t ZE_APICALL zeCommandListAppendBarrier(ze_command_list_handle_t list,
                                                              ze_event_handle_t signal, uint32_t wait_count,
                                                              ze_event_handle_t *waits) {
    std::vector<ze_event_handle_t> wait_for(waits, waits + wait_count);
    submit(list, [signal, wait_for] {
        for (ze_event_handle_t e : wait_for)
            afmesh::fake::spin_until([e] { return e->signalled.load(std::memory_order_acquire); });
        if (signal) signal->signalled.store(true, std::memory_order_release);
    });
    return ZE_RESULT_SUCCESS;
}

ZE_APIEXPORT ze_result_t ZE_APICALL zeCommandListAppendMemoryCopy(ze_command_list_handle_t list, void *dst,
                                                                 const void *src, size_t size,
                                                                 ze_event_handle_t signal, uint32_t wait_count,
                                                                 ze_event_handle_t *) {
    if (wait_count) return ZE_RESULT_ERROR_UNSUPPORTED_FEATURE;  // the module never asks
    submit(list, [dst, src, size, signal] {
        memmove(dst, src, size);
        if (signal) signal->signalled.store(true, std::memory_order_release);
    });
    return ZE_RESULT_SUCCESS;
}

ZE_APIEXPORT ze_result_t ZE_APICALL zeEventPoolCreate(ze_context_handle_t, const ze_event_pool_desc_t *desc,
                                                     uint32_t, ze_device_handle_t *, ze_event_pool_handle_t *pool) {
    if (!(desc->flags & ZE_EVENT_POOL_FLAG_HOST_VISIBLE)) return ZE_RESULT_ERROR_UNSUPPORTED_FEATURE;
    *pool = new _ze_event_pool_handle_t;
    return ZE_RESULT_SUCCESS;
}

ZE_APIEXPORT ze_result_t ZE_APICALL zeEventPoolDestroy(ze_event_pool_handle_t pool) {
    delete pool;
    return ZE_RESULT_SUCCESS;
}

ZE_APIEXPORT ze_result_t ZE_APICALL zeEventCreate(ze_event_pool_handle_t, const ze_event_desc_t *,
                                                 ze_event_handle_t *event) {
    *event = new _ze_event_handle_t;
    return ZE_RESULT_SUCCESS;
}

ZE_APIEXPORT ze_result_t ZE_APICALL zeEventDestroy(ze_event_handle_t event) {
    delete event;
    return ZE_RESULT_SUCCESS;
}

ZE_APIEXPORT ze_result_t ZE_APICALL zeEventHostSignal(ze_event_handle_t event) {
    event->signalled.store(true, std::memory_order_release);
    return ZE_RESULT_SUCCESS;
}

ZE_APIEXPORT ze_result_t ZE_APICALL zeEventHostReset(ze_event_handle_t event) {
    event->signalled.store(false, std::memory_order_release);
    return ZE_RESULT_SUCCESS;
}

ZE_APIEXPORT ze_result_t ZE_APICALL zeEventQueryStatus(ze_event_handle_t event) {
    return event->signalled.load(std::memory_order_acquire) ? ZE_RESULT_SUCCESS : ZE_RESULT_NOT_READY;
}

ZE_APIEXPORT ze_result_t ZE_APICALL zeEventHostSynchronize(ze_event_handle_t event, uint64_t timeout_ns) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::nanoseconds(
        timeout_ns > uint64_t{INT64_MAX} ? INT64_MAX / 2 : static_cast<int64_t>(timeout_ns));
    while (!event->signalled.load(std::memory_order_acquire)) {
        if (std::chrono::steady_clock::now() >= deadline) return ZE_RESULT_NOT_READY;
        std::this_thread::yield();
    }
    return ZE_RESULT_SUCCESS;
}

ZE_APIEXPORT ze_result_t ZE_APICALL zeMemAllocHost(ze_context_handle_t, const ze_host_mem_alloc_desc_t *, size_t size,
                                                  size_t alignment, void **ptr) {
    *ptr = g_memory.allocate(size, alignment, MemoryKind::kHost);
    return *ptr ? ZE_RESULT_SUCCESS : ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
}

ZE_APIEXPORT ze_result_t ZE_APICALL zeMemAllocDevice(ze_context_handle_t, const ze_device_mem_alloc_desc_t *,
                                                    size_t size, size_t alignment, ze_device_handle_t, void **ptr) {
    if (size > kDeviceMemory) return ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY;
    *ptr = g_memory.allocate(size, alignment, MemoryKind::kDevice);
    return *ptr ? ZE_RESULT_SUCCESS : ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY;
}

ZE_APIEXPORT ze_result_t ZE_APICALL zeMemFree(ze_context_handle_t, void *ptr) {
    return g_memory.release(ptr) ? ZE_RESULT_SUCCESS : ZE_RESULT_ERROR_INVALID_ARGUMENT;
}

ZE_APIEXPORT ze_result_t ZE_APICALL zeMemGetAllocProperties(ze_context_handle_t, const void *ptr,
                                                           ze_memory_allocation_properties_t *props,
                                                           ze_device_handle_t *device) {
    Allocation a;
    const bool known = g_memory.find(ptr, &a);
    props->type = !known ? ZE_MEMORY_TYPE_UNKNOWN
                  : a.kind == MemoryKind::kDevice ? ZE_MEMORY_TYPE_DEVICE
                                                  : ZE_MEMORY_TYPE_HOST;
    if (device) *device = known && a.kind == MemoryKind::kDevice ? &g_device : nullptr;
    export_fd_if_asked(props->pNext, known && a.kind == MemoryKind::kDevice);
    return ZE_RESULT_SUCCESS;
}

ZE_APIEXPORT ze_result_t ZE_APICALL zeMemGetAddressRange(ze_context_handle_t, const void *ptr, void **base,
                                                        size_t *size) {
    Allocation a;
    if (!g_memory.find(ptr, &a)) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    if (base) *base = reinterpret_cast<void *>(a.base);
    if (size) *size = a.size;
    return ZE_RESULT_SUCCESS;
}

}  // extern "C"
