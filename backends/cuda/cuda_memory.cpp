// SPDX-License-Identifier: Apache-2.0
// Device and pinned host memory, pointer classification and copies.
#include <cstring>

#include "cuda_internal.h"

namespace afmesh::cuda {
namespace {

// The device that owns `ptr` (device or managed memory), or -1 for host memory.
cudaError_t owning_device(const void *ptr, int *device) {
    cudaPointerAttributes attr{};
    cudaError_t err = cudaPointerGetAttributes(&attr, ptr);
    if (err != cudaSuccess) return err;
    const bool on_device = attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged;
    *device = on_device ? attr.device : -1;
    return cudaSuccess;
}

// The module's own non-blocking stream on `device` for synchronous copies, created on first use.
cudaError_t copy_stream(Context &ctx, int device, cudaStream_t *stream) {
    DeviceState &state = ctx.devices[device];
    std::call_once(state.copy_stream_once, [&state, device] {
        ScopedDevice scope;
        state.copy_stream_error = scope.enter(device);
        if (state.copy_stream_error == cudaSuccess)
            state.copy_stream_error = cudaStreamCreateWithFlags(&state.copy_stream, cudaStreamNonBlocking);
    });
    *stream = state.copy_stream;
    return state.copy_stream_error;
}

}  // namespace

int mem_alloc(void *ctx, int device, uint32_t where, size_t bytes, void **ptr) {
    if (int rc = module::check_alloc_args(device, context(ctx).device_count, where, bytes, ptr)) return rc;
    ScopedDevice scope;
    if (cudaError_t err = scope.enter(device)) return fail_runtime(err, "cudaSetDevice(%d)", device);
    if (where == AFMESH_ALLOC_DEVICE) {
        // cudaMalloc aligns to at least 256 bytes.
        if (cudaError_t err = cudaMalloc(ptr, bytes))
            return fail_runtime(err, "cudaMalloc(%zu bytes) on device %d", bytes, device);
    } else {
        // Page-aligned; portable so the pinning holds for every device, not just `device`.
        if (cudaError_t err = cudaHostAlloc(ptr, bytes, cudaHostAllocPortable))
            return fail_runtime(err, "cudaHostAlloc(%zu bytes)", bytes);
    }
    return AFMESH_HAL_OK;
}

int mem_free(void *, uint32_t where, void *ptr) {
    if (where != AFMESH_ALLOC_DEVICE && where != AFMESH_ALLOC_HOST_PINNED)
        return host_error(AFMESH_HAL_INVALID_ARGUMENT, "mem_free: unknown placement %u", where);
    if (!ptr) return AFMESH_HAL_OK;
    if (where == AFMESH_ALLOC_DEVICE) {
        if (cudaError_t err = cudaFree(ptr)) return fail_runtime(err, "cudaFree(%p)", ptr);
    } else {
        if (cudaError_t err = cudaFreeHost(ptr)) return fail_runtime(err, "cudaFreeHost(%p)", ptr);
    }
    return AFMESH_HAL_OK;
}

int pointer_query(void *, const void *ptr, uint32_t *kind, int *device) {
    if (!ptr || !kind || !device) return host_error(AFMESH_HAL_INVALID_ARGUMENT, "pointer_query: null argument");
    int owner = -1;
    if (cudaError_t err = owning_device(ptr, &owner)) return fail_runtime(err, "cudaPointerGetAttributes(%p)", ptr);
    // Pinned and registered host memory is still host memory; managed memory
    // is reported as CUDA memory of the device it was allocated for.
    *kind = owner >= 0 ? AFMESH_MEM_CUDA : AFMESH_MEM_HOST;
    *device = owner;
    return AFMESH_HAL_OK;
}

// Not cudaMemcpy: it runs on the legacy default stream, which waits for every
// blocking stream of the device. A user stream parked on a flag that only our
// caller will release (after this very copy) would deadlock it. The module's
// own non-blocking stream on the device that owns the memory waits for nothing
// but the copy.
int memcpy_sync(void *ctx, void *dst, const void *src, size_t bytes) {
    if (bytes == 0) return AFMESH_HAL_OK;
    if (!dst || !src) return host_error(AFMESH_HAL_INVALID_ARGUMENT, "memcpy_sync: null pointer");
    int device = -1;
    if (cudaError_t err = owning_device(dst, &device)) return fail_runtime(err, "cudaPointerGetAttributes(%p)", dst);
    if (device < 0) {
        if (cudaError_t err = owning_device(src, &device))
            return fail_runtime(err, "cudaPointerGetAttributes(%p)", src);
    }
    if (device < 0) {  // host to host: no device involved
        memmove(dst, src, bytes);
        return AFMESH_HAL_OK;
    }
    cudaStream_t stream = nullptr;
    if (cudaError_t err = copy_stream(context(ctx), device, &stream))
        return fail_runtime(err, "creating the copy stream of device %d", device);
    if (cudaError_t err = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream))
        return fail_runtime(err, "cudaMemcpyAsync(%zu bytes)", bytes);
    if (cudaError_t err = cudaStreamSynchronize(stream)) return fail_runtime(err, "cudaStreamSynchronize");
    return AFMESH_HAL_OK;
}

int memcpy_async(void *, void *dst, const void *src, size_t bytes, void *stream) {
    if (bytes == 0) return AFMESH_HAL_OK;
    if (!dst || !src) return host_error(AFMESH_HAL_INVALID_ARGUMENT, "memcpy_async: null pointer");
    if (cudaError_t err = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, static_cast<cudaStream_t>(stream)))
        return fail_runtime(err, "cudaMemcpyAsync(%zu bytes)", bytes);
    return AFMESH_HAL_OK;
}

}  // namespace afmesh::cuda
