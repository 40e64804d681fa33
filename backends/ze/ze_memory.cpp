// SPDX-License-Identifier: Apache-2.0
// Device and host (pinned) memory, pointer classification and copies.
#include <cstring>

#include "ze_internal.h"

namespace afmesh::ze {
namespace {

// Level Zero guarantees no particular alignment unless asked; the HAL promises
// 256 bytes, and host memory is page-aligned so transports register whole pages.
constexpr size_t kDeviceAlignment = 256;
constexpr size_t kHostAlignment = 4096;

// The device that owns `ptr` (device or shared memory), or -1 for memory the
// host can access directly (Level Zero host memory, or memory Level Zero does
// not know). Shared memory made without a device belongs to the current one.
ze_result_t owning_device(const Context &c, const void *ptr, int *device) {
    ze_memory_allocation_properties_t props{};
    props.stype = ZE_STRUCTURE_TYPE_MEMORY_ALLOCATION_PROPERTIES;
    ze_device_handle_t handle = nullptr;
    if (ze_result_t res = zeMemGetAllocProperties(c.context, ptr, &props, &handle)) return res;
    if (props.type != ZE_MEMORY_TYPE_DEVICE && props.type != ZE_MEMORY_TYPE_SHARED) {
        *device = -1;
        return ZE_RESULT_SUCCESS;
    }
    const int index = handle ? c.index_of(handle) : -1;
    *device = index >= 0 ? index : current_device();
    return ZE_RESULT_SUCCESS;
}

}  // namespace

int mem_alloc(void *ctx, int device, uint32_t where, size_t bytes, void **ptr) {
    Context &c = context(ctx);
    if (int rc = module::check_alloc_args(device, c.device_count(), where, bytes, ptr)) return rc;
    if (where == AFMESH_ALLOC_HOST_PINNED) {
        const ze_host_mem_alloc_desc_t desc = {ZE_STRUCTURE_TYPE_HOST_MEM_ALLOC_DESC, nullptr, 0};
        if (ze_result_t res = zeMemAllocHost(c.context, &desc, bytes, kHostAlignment, ptr))
            return fail_ze(res, "zeMemAllocHost(%zu bytes)", bytes);
        return AFMESH_HAL_OK;
    }
    const DeviceState &d = *c.devices[device];
    // Device memory is made exportable as a dma-buf where the device supports
    // it: Level Zero can only export allocations that asked for it up front.
    const ze_external_memory_export_desc_t exportable = {ZE_STRUCTURE_TYPE_EXTERNAL_MEMORY_EXPORT_DESC, nullptr,
                                                         ZE_EXTERNAL_MEMORY_TYPE_FLAG_DMA_BUF};
    const ze_device_mem_alloc_desc_t desc = {ZE_STRUCTURE_TYPE_DEVICE_MEM_ALLOC_DESC,
                                             d.dmabuf_export ? &exportable : nullptr, 0, 0};
    if (ze_result_t res = zeMemAllocDevice(c.context, &desc, bytes, kDeviceAlignment, d.handle, ptr))
        return fail_ze(res, "zeMemAllocDevice(%zu bytes) on device %d", bytes, device);
    return AFMESH_HAL_OK;
}

int mem_free(void *ctx, uint32_t where, void *ptr) {
    if (where != AFMESH_ALLOC_DEVICE && where != AFMESH_ALLOC_HOST_PINNED)
        return host_error(AFMESH_HAL_INVALID_ARGUMENT, "mem_free: unknown placement %u", where);
    if (!ptr) return AFMESH_HAL_OK;
    if (ze_result_t res = zeMemFree(context(ctx).context, ptr)) return fail_ze(res, "zeMemFree(%p)", ptr);
    return AFMESH_HAL_OK;
}

int pointer_query(void *ctx, const void *ptr, uint32_t *kind, int *device) {
    if (!ptr || !kind || !device) return host_error(AFMESH_HAL_INVALID_ARGUMENT, "pointer_query: null argument");
    int owner = -1;
    if (ze_result_t res = owning_device(context(ctx), ptr, &owner))
        return fail_ze(res, "zeMemGetAllocProperties(%p)", ptr);
    *kind = owner >= 0 ? AFMESH_MEM_ZE : AFMESH_MEM_HOST;
    *device = owner;
    return AFMESH_HAL_OK;
}

// On the owning device's synchronous-mode immediate list, appending the copy
// returns once the copy is done (Level Zero 1.4 has no command list host
// synchronize). The list is the module's own, so the copy waits for nothing
// the user enqueued.
int memcpy_sync(void *ctx, void *dst, const void *src, size_t bytes) {
    Context &c = context(ctx);
    if (bytes == 0) return AFMESH_HAL_OK;
    if (!dst || !src) return host_error(AFMESH_HAL_INVALID_ARGUMENT, "memcpy_sync: null pointer");
    int device = -1;
    if (ze_result_t res = owning_device(c, dst, &device)) return fail_ze(res, "zeMemGetAllocProperties(%p)", dst);
    if (device < 0) {
        if (ze_result_t res = owning_device(c, src, &device))
            return fail_ze(res, "zeMemGetAllocProperties(%p)", src);
    }
    if (device < 0) {  // both sides host-accessible: no device involved
        memmove(dst, src, bytes);
        return AFMESH_HAL_OK;
    }
    DeviceState &d = *c.devices[device];
    std::lock_guard<std::mutex> lock(d.sync_list_mutex);
    if (ze_result_t res = zeCommandListAppendMemoryCopy(d.sync_list, dst, src, bytes, nullptr, 0, nullptr))
        return fail_ze(res, "zeCommandListAppendMemoryCopy(%zu bytes, synchronous)", bytes);
    return AFMESH_HAL_OK;
}

// Commands of a Level Zero list may overlap unless a barrier separates them;
// HAL streams are in order, so the copy starts behind a barrier. (Later work
// the module enqueues, events and flag waits, are barriers themselves.)
int memcpy_async(void *ctx, void *dst, const void *src, size_t bytes, void *stream) {
    Context &c = context(ctx);
    if (bytes == 0) return AFMESH_HAL_OK;
    if (!dst || !src) return host_error(AFMESH_HAL_INVALID_ARGUMENT, "memcpy_async: null pointer");
    ze_command_list_handle_t list = c.list_for(stream);
    std::lock_guard<std::mutex> lock(c.list_locks.of(list));
    if (ze_result_t res = zeCommandListAppendBarrier(list, nullptr, 0, nullptr))
        return fail_ze(res, "zeCommandListAppendBarrier");
    if (ze_result_t res = zeCommandListAppendMemoryCopy(list, dst, src, bytes, nullptr, 0, nullptr))
        return fail_ze(res, "zeCommandListAppendMemoryCopy(%zu bytes)", bytes);
    return AFMESH_HAL_OK;
}

}  // namespace afmesh::ze
