// SPDX-License-Identifier: Apache-2.0
// Device and pinned host memory, pointer classification and copies.
#include <cstring>

#include "hip_internal.h"

namespace afmesh::hip {
namespace {

// The device that owns `ptr`, or -1 for host memory. HIP 5.2 answers
// hipErrorInvalidValue for host memory it does not know (later releases say
// "unregistered"), so that error means "plain host memory" here.
hipError_t owning_device(const void *ptr, int *device) {
    hipPointerAttribute_t attr{};
    hipError_t err = runtime().hipPointerGetAttributes(&attr, ptr);
    if (err == hipErrorInvalidValue) {
        (void)runtime().hipGetLastError();
        *device = -1;
        return hipSuccess;
    }
    if (err != hipSuccess) return err;
    *device = attr.memoryType == hipMemoryTypeHost && !attr.isManaged ? -1 : attr.device;
    return hipSuccess;
}

// The module's own non-blocking stream on `device` for synchronous copies, created on first use.
hipError_t copy_stream(Context &ctx, int device, hipStream_t *stream) {
    DeviceState &state = ctx.devices[device];
    std::call_once(state.copy_stream_once, [&state, device] {
        ScopedDevice scope;
        state.copy_stream_error = scope.enter(device);
        if (state.copy_stream_error == hipSuccess)
            state.copy_stream_error = runtime().hipStreamCreateWithFlags(&state.copy_stream, hipStreamNonBlocking);
    });
    *stream = state.copy_stream;
    return state.copy_stream_error;
}

}  // namespace

int mem_alloc(void *ctx, int device, uint32_t where, size_t bytes, void **ptr) {
    if (int rc = module::check_alloc_args(device, context(ctx).device_count, where, bytes, ptr)) return rc;
    ScopedDevice scope;
    if (hipError_t err = scope.enter(device)) return fail_hip(err, "hipSetDevice(%d)", device);
    if (where == AFMESH_ALLOC_DEVICE) {
        if (hipError_t err = runtime().hipMalloc(ptr, bytes))
            return fail_hip(err, "hipMalloc(%zu bytes) on device %d", bytes, device);
    } else {
        // Page-aligned, and portable to every device (ROCm pins for all agents).
        if (hipError_t err = runtime().hipHostMalloc(ptr, bytes, hipHostMallocPortable))
            return fail_hip(err, "hipHostMalloc(%zu bytes)", bytes);
    }
    return AFMESH_HAL_OK;
}

int mem_free(void *, uint32_t where, void *ptr) {
    if (where != AFMESH_ALLOC_DEVICE && where != AFMESH_ALLOC_HOST_PINNED)
        return host_error(AFMESH_HAL_INVALID_ARGUMENT, "mem_free: unknown placement %u", where);
    if (!ptr) return AFMESH_HAL_OK;
    if (where == AFMESH_ALLOC_DEVICE) {
        if (hipError_t err = runtime().hipFree(ptr)) return fail_hip(err, "hipFree(%p)", ptr);
    } else {
        if (hipError_t err = runtime().hipHostFree(ptr)) return fail_hip(err, "hipHostFree(%p)", ptr);
    }
    return AFMESH_HAL_OK;
}

int pointer_query(void *, const void *ptr, uint32_t *kind, int *device) {
    if (!ptr || !kind || !device) return host_error(AFMESH_HAL_INVALID_ARGUMENT, "pointer_query: null argument");
    int owner = -1;
    if (hipError_t err = owning_device(ptr, &owner)) return fail_hip(err, "hipPointerGetAttributes(%p)", ptr);
    *kind = owner >= 0 ? AFMESH_MEM_HIP : AFMESH_MEM_HOST;
    *device = owner;
    return AFMESH_HAL_OK;
}

// Not hipMemcpy: it runs on the null stream, which waits for the device's
// blocking streams; a user stream parked on a flag that our caller releases
// only after this copy would deadlock it. The module's own non-blocking
// stream on the device that owns the memory waits for nothing but the copy.
int memcpy_sync(void *ctx, void *dst, const void *src, size_t bytes) {
    if (bytes == 0) return AFMESH_HAL_OK;
    if (!dst || !src) return host_error(AFMESH_HAL_INVALID_ARGUMENT, "memcpy_sync: null pointer");
    int device = -1;
    if (hipError_t err = owning_device(dst, &device)) return fail_hip(err, "hipPointerGetAttributes(%p)", dst);
    if (device < 0) {
        if (hipError_t err = owning_device(src, &device)) return fail_hip(err, "hipPointerGetAttributes(%p)", src);
    }
    if (device < 0) {  // host to host: no device involved
        memmove(dst, src, bytes);
        return AFMESH_HAL_OK;
    }
    hipStream_t stream = nullptr;
    if (hipError_t err = copy_stream(context(ctx), device, &stream))
        return fail_hip(err, "creating the copy stream of device %d", device);
    if (hipError_t err = runtime().hipMemcpyAsync(dst, src, bytes, hipMemcpyDefault, stream))
        return fail_hip(err, "hipMemcpyAsync(%zu bytes)", bytes);
    if (hipError_t err = runtime().hipStreamSynchronize(stream)) return fail_hip(err, "hipStreamSynchronize");
    return AFMESH_HAL_OK;
}

int memcpy_async(void *, void *dst, const void *src, size_t bytes, void *stream) {
    if (bytes == 0) return AFMESH_HAL_OK;
    if (!dst || !src) return host_error(AFMESH_HAL_INVALID_ARGUMENT, "memcpy_async: null pointer");
    if (hipError_t err = runtime().hipMemcpyAsync(dst, src, bytes, hipMemcpyDefault, static_cast<hipStream_t>(stream)))
        return fail_hip(err, "hipMemcpyAsync(%zu bytes)", bytes);
    return AFMESH_HAL_OK;
}

}  // namespace afmesh::hip
