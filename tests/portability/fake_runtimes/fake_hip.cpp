// SPDX-License-Identifier: Apache-2.0
// A fake HIP runtime (libamdhip64.so.5) for tests: one GPU whose memory is
// host memory and whose streams are in-order host queues. It implements the
// entry points the hip module uses, with HIP's semantics, so the module's
// logic runs in CI on hosts without an AMD GPU. Loaded instead of the real
// runtime via LD_LIBRARY_PATH; fake_hip.map gives the symbols the version
// nodes Debian's libamdhip64 uses.
//
// FAKE_HIP_NO_STREAM_WAIT_VALUE=1 makes the device report no
// wait-on-memory support, to exercise the module's host-callback fallback.
#include <hip/hip_runtime_api.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "fake_allocations.h"
#include "fake_device_queue.h"

using afmesh::fake::Allocation;
using afmesh::fake::MemoryKind;

struct ihipStream_t {
    afmesh::fake::DeviceQueue queue;
};
struct ihipEvent_t {
    std::atomic<bool> complete{true};  // never recorded reads as complete
};

namespace {

afmesh::fake::Allocations g_memory;
thread_local hipError_t t_last_error = hipSuccess;
thread_local int t_device = 0;

constexpr size_t kDeviceMemory = size_t{1} << 30;

ihipStream_t &null_stream() {
    static ihipStream_t stream;
    return stream;
}

ihipStream_t &queue_of(hipStream_t stream) { return stream ? *stream : null_stream(); }

hipError_t result(hipError_t err) {
    if (err != hipSuccess) t_last_error = err;
    return err;
}

}  // namespace

extern "C" {

hipError_t hipGetDeviceCount(int *count) {
    *count = 1;
    return hipSuccess;
}

hipError_t hipGetDevice(int *device) {
    *device = t_device;
    return hipSuccess;
}

hipError_t hipSetDevice(int device) {
    if (device != 0) return result(hipErrorInvalidDevice);
    t_device = device;
    return hipSuccess;
}

hipError_t hipGetDeviceProperties(hipDeviceProp_t *prop, int device) {
    if (device != 0) return result(hipErrorInvalidDevice);
    memset(prop, 0, sizeof *prop);
    snprintf(prop->name, sizeof prop->name, "afmesh fake HIP GPU");
    prop->totalGlobalMem = kDeviceMemory;
    prop->pciBusID = 0x3b;
    return hipSuccess;
}

hipError_t hipDeviceGetAttribute(int *value, hipDeviceAttribute_t attribute, int device) {
    if (device != 0) return result(hipErrorInvalidDevice);
    if (attribute != hipDeviceAttributeCanUseStreamWaitValue) return result(hipErrorInvalidValue);
    const char *no_wait = getenv("FAKE_HIP_NO_STREAM_WAIT_VALUE");
    *value = no_wait && strcmp(no_wait, "1") == 0 ? 0 : 1;
    return hipSuccess;
}

const char *hipGetErrorName(hipError_t err) {
    switch (err) {
    case hipSuccess: return "hipSuccess";
    case hipErrorInvalidValue: return "hipErrorInvalidValue";
    case hipErrorOutOfMemory: return "hipErrorOutOfMemory";
    case hipErrorInvalidDevice: return "hipErrorInvalidDevice";
    case hipErrorNotReady: return "hipErrorNotReady";
    default: return "hipErrorUnknown";
    }
}

const char *hipGetErrorString(hipError_t err) { return hipGetErrorName(err); }

hipError_t hipGetLastError() {
    const hipError_t err = t_last_error;
    t_last_error = hipSuccess;
    return err;
}

hipError_t hipMalloc(void **ptr, size_t size) {
    *ptr = size > kDeviceMemory ? nullptr : g_memory.allocate(size, 256, MemoryKind::kDevice);
    return *ptr ? hipSuccess : result(hipErrorOutOfMemory);
}

// Signal memory is host-coherent memory the device can wait on.
hipError_t hipExtMallocWithFlags(void **ptr, size_t size, unsigned int flags) {
    if (flags != hipMallocSignalMemory || size != 8) return result(hipErrorInvalidValue);
    *ptr = g_memory.allocate(size, 8, MemoryKind::kHost);
    return *ptr ? hipSuccess : result(hipErrorOutOfMemory);
}

hipError_t hipHostMalloc(void **ptr, size_t size, unsigned int) {
    *ptr = g_memory.allocate(size, 4096, MemoryKind::kHost);
    return *ptr ? hipSuccess : result(hipErrorOutOfMemory);
}

hipError_t hipFree(void *ptr) { return !ptr || g_memory.release(ptr) ? hipSuccess : result(hipErrorInvalidValue); }

hipError_t hipHostFree(void *ptr) { return hipFree(ptr); }

// As HIP 5.2: memory the runtime does not know is an invalid value.
hipError_t hipPointerGetAttributes(hipPointerAttribute_t *attr, const void *ptr) {
    Allocation a;
    if (!g_memory.find(ptr, &a)) return result(hipErrorInvalidValue);
    memset(attr, 0, sizeof *attr);
    attr->memoryType = a.kind == MemoryKind::kDevice ? hipMemoryTypeDevice : hipMemoryTypeHost;
    attr->device = 0;
    return hipSuccess;
}

hipError_t hipMemcpyAsync(void *dst, const void *src, size_t size, hipMemcpyKind, hipStream_t stream) {
    queue_of(stream).queue.push([dst, src, size] { memmove(dst, src, size); });
    return hipSuccess;
}

hipError_t hipStreamCreateWithFlags(hipStream_t *stream, unsigned int) {
    *stream = new ihipStream_t;
    return hipSuccess;
}

hipError_t hipStreamDestroy(hipStream_t stream) {
    if (!stream) return result(hipErrorInvalidHandle);
    delete stream;  // runs what was enqueued, then joins
    return hipSuccess;
}

hipError_t hipStreamSynchronize(hipStream_t stream) {
    queue_of(stream).queue.drain();
    return hipSuccess;
}

hipError_t hipEventCreateWithFlags(hipEvent_t *event, unsigned int) {
    *event = new ihipEvent_t;
    return hipSuccess;
}

hipError_t hipEventDestroy(hipEvent_t event) {
    delete event;
    return hipSuccess;
}

hipError_t hipEventRecord(hipEvent_t event, hipStream_t stream) {
    event->complete.store(false, std::memory_order_release);
    queue_of(stream).queue.push([event] { event->complete.store(true, std::memory_order_release); });
    return hipSuccess;
}

hipError_t hipEventQuery(hipEvent_t event) {
    return event->complete.load(std::memory_order_acquire) ? hipSuccess : result(hipErrorNotReady);
}

hipError_t hipEventSynchronize(hipEvent_t event) {
    afmesh::fake::spin_until([event] { return event->complete.load(std::memory_order_acquire); });
    return hipSuccess;
}

hipError_t hipStreamWaitValue64(hipStream_t stream, void *ptr, uint64_t value, unsigned int flags, uint64_t mask) {
    if (flags != hipStreamWaitValueGte) return result(hipErrorInvalidValue);
    auto *word = static_cast<uint64_t *>(ptr);
    queue_of(stream).queue.push([word, value, mask] {
        afmesh::fake::spin_until(
            [&] { return (std::atomic_ref<uint64_t>(*word).load(std::memory_order_acquire) & mask) >= value; });
    });
    return hipSuccess;
}

hipError_t hipStreamAddCallback(hipStream_t stream, hipStreamCallback_t callback, void *user_data, unsigned int) {
    queue_of(stream).queue.push([stream, callback, user_data] { callback(stream, hipSuccess, user_data); });
    return hipSuccess;
}

}  // extern "C"
