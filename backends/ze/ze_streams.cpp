// SPDX-License-Identifier: Apache-2.0
// Streams as immediate command lists, and events from the module's slab.
//
// An immediate list executes what is appended to it at once, like a CUDA
// stream; its commands may overlap unless a barrier separates them, so every
// operation that must observe earlier work is (or follows) a barrier. A HAL
// event is a host-visible Level Zero event: recording it appends a barrier
// that signals it when all earlier work on the list is done.
#include <cstdint>

#include "ze_internal.h"

namespace afmesh::ze {
namespace {

// Signals `event` once everything enqueued on `list` so far has finished.
ze_result_t append_marker(Context &c, ze_command_list_handle_t list, ze_event_handle_t event) {
    std::lock_guard<std::mutex> lock(c.list_locks.of(list));
    return zeCommandListAppendBarrier(list, event, 0, nullptr);
}

int sync_list(Context &c, ze_command_list_handle_t list) {
    ze_event_handle_t done = nullptr;
    if (ze_result_t res = c.events->take(&done)) return fail_ze(res, "creating an event");
    ze_result_t res = append_marker(c, list, done);
    if (res == ZE_RESULT_SUCCESS) res = zeEventHostSynchronize(done, UINT64_MAX);
    c.events->give(done);
    return res == ZE_RESULT_SUCCESS ? AFMESH_HAL_OK : fail_ze(res, "synchronising a command list");
}

}  // namespace

ze_result_t create_immediate_list(const Context &c, const DeviceState &d, ze_command_queue_mode_t mode,
                                  ze_command_list_handle_t *list) {
    const ze_command_queue_desc_t desc = {ZE_STRUCTURE_TYPE_COMMAND_QUEUE_DESC, nullptr, d.compute_ordinal, 0, 0, mode,
                                          ZE_COMMAND_QUEUE_PRIORITY_NORMAL};
    return zeCommandListCreateImmediate(c.context, d.handle, &desc, list);
}

int stream_create(void *ctx, int device, void **stream) {
    Context &c = context(ctx);
    if (!stream) return host_error(AFMESH_HAL_INVALID_ARGUMENT, "stream_create: null output");
    if (int rc = module::check_device(device, c.device_count(), "stream_create")) return rc;
    ze_command_list_handle_t list = nullptr;
    if (ze_result_t res = create_immediate_list(c, *c.devices[device], ZE_COMMAND_QUEUE_MODE_ASYNCHRONOUS, &list))
        return fail_ze(res, "zeCommandListCreateImmediate on device %d", device);
    *stream = list;
    return AFMESH_HAL_OK;
}

// Level Zero requires that the device no longer references a list when it is
// destroyed; CUDA lets a destroyed stream finish its work. Waiting for the
// list first gives the CUDA behaviour without the undefined one.
int stream_destroy(void *ctx, void *stream) {
    Context &c = context(ctx);
    if (!stream)
        return host_error(AFMESH_HAL_INVALID_ARGUMENT, "stream_destroy: the default stream cannot be destroyed");
    auto list = static_cast<ze_command_list_handle_t>(stream);
    if (int rc = sync_list(c, list)) return rc;
    std::lock_guard<std::mutex> lock(c.list_locks.of(list));
    if (ze_result_t res = zeCommandListDestroy(list)) return fail_ze(res, "zeCommandListDestroy");
    return AFMESH_HAL_OK;
}

int stream_sync(void *ctx, void *stream) {
    Context &c = context(ctx);
    return sync_list(c, c.list_for(stream));
}

int event_create(void *ctx, int device, void **event) {
    Context &c = context(ctx);
    if (!event) return host_error(AFMESH_HAL_INVALID_ARGUMENT, "event_create: null output");
    if (int rc = module::check_device(device, c.device_count(), "event_create")) return rc;
    ze_event_handle_t e = nullptr;
    if (ze_result_t res = c.events->take(&e)) return fail_ze(res, "creating an event");
    // Created complete: like a CUDA event, one never recorded reads as done.
    if (ze_result_t res = zeEventHostSignal(e)) {
        c.events->give(e);
        return fail_ze(res, "zeEventHostSignal");
    }
    *event = e;
    return AFMESH_HAL_OK;
}

// CUDA lets an event be destroyed while its record is pending; a Level Zero
// event must not go back to the slab while a list may still signal it, so a
// pending event is waited for first (event destruction is off the hot path).
int event_destroy(void *ctx, void *event) {
    if (!event) return host_error(AFMESH_HAL_INVALID_ARGUMENT, "event_destroy: null event");
    auto e = static_cast<ze_event_handle_t>(event);
    if (zeEventQueryStatus(e) == ZE_RESULT_NOT_READY) {
        if (ze_result_t res = zeEventHostSynchronize(e, UINT64_MAX))
            return fail_ze(res, "event_destroy: waiting for the pending record");
    }
    context(ctx).events->give(e);
    return AFMESH_HAL_OK;
}

// Re-recording resets the event from the host first, so, as in Level Zero
// generally, an event must not be re-recorded while its previous record is
// still pending on a list.
int event_record(void *ctx, void *event, void *stream) {
    Context &c = context(ctx);
    if (!event) return host_error(AFMESH_HAL_INVALID_ARGUMENT, "event_record: null event");
    auto e = static_cast<ze_event_handle_t>(event);
    if (ze_result_t res = zeEventHostReset(e)) return fail_ze(res, "zeEventHostReset");
    if (ze_result_t res = append_marker(c, c.list_for(stream), e)) return fail_ze(res, "zeCommandListAppendBarrier");
    return AFMESH_HAL_OK;
}

int event_query(void *, void *event) {
    if (!event) return host_error(AFMESH_HAL_INVALID_ARGUMENT, "event_query: null event");
    const ze_result_t res = zeEventQueryStatus(static_cast<ze_event_handle_t>(event));
    if (res == ZE_RESULT_SUCCESS) return AFMESH_HAL_OK;
    if (res == ZE_RESULT_NOT_READY) return AFMESH_HAL_AGAIN;
    return fail_ze(res, "zeEventQueryStatus");
}

int event_sync(void *, void *event) {
    if (!event) return host_error(AFMESH_HAL_INVALID_ARGUMENT, "event_sync: null event");
    if (ze_result_t res = zeEventHostSynchronize(static_cast<ze_event_handle_t>(event), UINT64_MAX))
        return fail_ze(res, "zeEventHostSynchronize");
    return AFMESH_HAL_OK;
}

}  // namespace afmesh::ze
