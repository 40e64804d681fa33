// SPDX-License-Identifier: Apache-2.0
// Streams (always non-blocking) and events (timing disabled: they only order work).
#include "cuda_internal.h"

namespace afmesh::cuda {

int stream_create(void *ctx, int device, void **stream) {
    if (!stream) return host_error(AFMESH_HAL_INVALID_ARGUMENT, "stream_create: null output");
    if (int rc = module::check_device(device, context(ctx).device_count, "stream_create")) return rc;
    ScopedDevice scope;
    if (cudaError_t err = scope.enter(device)) return fail_runtime(err, "cudaSetDevice(%d)", device);
    cudaStream_t s = nullptr;
    // Non-blocking: our streams must never serialise with the legacy default stream the user may use.
    if (cudaError_t err = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking))
        return fail_runtime(err, "cudaStreamCreateWithFlags on device %d", device);
    *stream = s;
    return AFMESH_HAL_OK;
}

int stream_destroy(void *, void *stream) {
    if (!stream)
        return host_error(AFMESH_HAL_INVALID_ARGUMENT, "stream_destroy: the default stream cannot be destroyed");
    if (cudaError_t err = cudaStreamDestroy(static_cast<cudaStream_t>(stream)))
        return fail_runtime(err, "cudaStreamDestroy");
    return AFMESH_HAL_OK;
}

int stream_sync(void *, void *stream) {
    if (cudaError_t err = cudaStreamSynchronize(static_cast<cudaStream_t>(stream)))
        return fail_runtime(err, "cudaStreamSynchronize");
    return AFMESH_HAL_OK;
}

int event_create(void *ctx, int device, void **event) {
    if (!event) return host_error(AFMESH_HAL_INVALID_ARGUMENT, "event_create: null output");
    if (int rc = module::check_device(device, context(ctx).device_count, "event_create")) return rc;
    ScopedDevice scope;
    if (cudaError_t err = scope.enter(device)) return fail_runtime(err, "cudaSetDevice(%d)", device);
    cudaEvent_t e = nullptr;
    if (cudaError_t err = cudaEventCreateWithFlags(&e, cudaEventDisableTiming))
        return fail_runtime(err, "cudaEventCreateWithFlags on device %d", device);
    *event = e;
    return AFMESH_HAL_OK;
}

int event_destroy(void *, void *event) {
    if (!event) return host_error(AFMESH_HAL_INVALID_ARGUMENT, "event_destroy: null event");
    if (cudaError_t err = cudaEventDestroy(static_cast<cudaEvent_t>(event)))
        return fail_runtime(err, "cudaEventDestroy");
    return AFMESH_HAL_OK;
}

int event_record(void *, void *event, void *stream) {
    if (!event) return host_error(AFMESH_HAL_INVALID_ARGUMENT, "event_record: null event");
    if (cudaError_t err = cudaEventRecord(static_cast<cudaEvent_t>(event), static_cast<cudaStream_t>(stream)))
        return fail_runtime(err, "cudaEventRecord");
    return AFMESH_HAL_OK;
}

int event_query(void *, void *event) {
    if (!event) return host_error(AFMESH_HAL_INVALID_ARGUMENT, "event_query: null event");
    const cudaError_t err = cudaEventQuery(static_cast<cudaEvent_t>(event));
    if (err == cudaSuccess) return AFMESH_HAL_OK;
    if (err == cudaErrorNotReady) return AFMESH_HAL_AGAIN;  // pending work is not an error
    return fail_runtime(err, "cudaEventQuery");
}

int event_sync(void *, void *event) {
    if (!event) return host_error(AFMESH_HAL_INVALID_ARGUMENT, "event_sync: null event");
    if (cudaError_t err = cudaEventSynchronize(static_cast<cudaEvent_t>(event)))
        return fail_runtime(err, "cudaEventSynchronize");
    return AFMESH_HAL_OK;
}

}  // namespace afmesh::cuda
