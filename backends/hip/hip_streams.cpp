// SPDX-License-Identifier: Apache-2.0
// Streams (always non-blocking) and events (timing disabled: they only order work).
#include "hip_internal.h"

namespace afmesh::hip {

int stream_create(void *ctx, int device, void **stream) {
    if (!stream) return host_error(AFMESH_HAL_INVALID_ARGUMENT, "stream_create: null output");
    if (int rc = module::check_device(device, context(ctx).device_count, "stream_create")) return rc;
    ScopedDevice scope;
    if (hipError_t err = scope.enter(device)) return fail_hip(err, "hipSetDevice(%d)", device);
    hipStream_t s = nullptr;
    // Non-blocking: our streams must never serialise with the null stream the user may use.
    if (hipError_t err = runtime().hipStreamCreateWithFlags(&s, hipStreamNonBlocking))
        return fail_hip(err, "hipStreamCreateWithFlags on device %d", device);
    *stream = s;
    return AFMESH_HAL_OK;
}

int stream_destroy(void *, void *stream) {
    if (!stream) return host_error(AFMESH_HAL_INVALID_ARGUMENT, "stream_destroy: the null stream cannot be destroyed");
    if (hipError_t err = runtime().hipStreamDestroy(static_cast<hipStream_t>(stream)))
        return fail_hip(err, "hipStreamDestroy");
    return AFMESH_HAL_OK;
}

int stream_sync(void *, void *stream) {
    if (hipError_t err = runtime().hipStreamSynchronize(static_cast<hipStream_t>(stream)))
        return fail_hip(err, "hipStreamSynchronize");
    return AFMESH_HAL_OK;
}

int event_create(void *ctx, int device, void **event) {
    if (!event) return host_error(AFMESH_HAL_INVALID_ARGUMENT, "event_create: null output");
    if (int rc = module::check_device(device, context(ctx).device_count, "event_create")) return rc;
    ScopedDevice scope;
    if (hipError_t err = scope.enter(device)) return fail_hip(err, "hipSetDevice(%d)", device);
    hipEvent_t e = nullptr;
    if (hipError_t err = runtime().hipEventCreateWithFlags(&e, hipEventDisableTiming))
        return fail_hip(err, "hipEventCreateWithFlags on device %d", device);
    *event = e;
    return AFMESH_HAL_OK;
}

int event_destroy(void *, void *event) {
    if (!event) return host_error(AFMESH_HAL_INVALID_ARGUMENT, "event_destroy: null event");
    if (hipError_t err = runtime().hipEventDestroy(static_cast<hipEvent_t>(event)))
        return fail_hip(err, "hipEventDestroy");
    return AFMESH_HAL_OK;
}

int event_record(void *, void *event, void *stream) {
    if (!event) return host_error(AFMESH_HAL_INVALID_ARGUMENT, "event_record: null event");
    if (hipError_t err = runtime().hipEventRecord(static_cast<hipEvent_t>(event), static_cast<hipStream_t>(stream)))
        return fail_hip(err, "hipEventRecord");
    return AFMESH_HAL_OK;
}

int event_query(void *, void *event) {
    if (!event) return host_error(AFMESH_HAL_INVALID_ARGUMENT, "event_query: null event");
    const hipError_t err = runtime().hipEventQuery(static_cast<hipEvent_t>(event));
    if (err == hipSuccess) return AFMESH_HAL_OK;
    if (err == hipErrorNotReady) {  // pending work is not an error
        (void)runtime().hipGetLastError();
        return AFMESH_HAL_AGAIN;
    }
    return fail_hip(err, "hipEventQuery");
}

int event_sync(void *, void *event) {
    if (!event) return host_error(AFMESH_HAL_INVALID_ARGUMENT, "event_sync: null event");
    if (hipError_t err = runtime().hipEventSynchronize(static_cast<hipEvent_t>(event)))
        return fail_hip(err, "hipEventSynchronize");
    return AFMESH_HAL_OK;
}

}  // namespace afmesh::hip
