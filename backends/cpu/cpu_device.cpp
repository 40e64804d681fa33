// SPDX-License-Identifier: Apache-2.0
// The cpu device module: "device memory" is host memory. It lets every code
// path that takes a device run on a CPU-only host: pinned memory is
// page-aligned host memory, copies are memcpy, and since nothing runs
// asynchronously, streams and events are complete as soon as they exist.
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cstdio>
#include <new>

#include "afmesh/hal/device.h"
#include "module_binding.h"

namespace {

using afmesh::module::host_error;

constexpr const char *kName = "cpu";
constexpr size_t kDeviceAlignment = 256;

// The context carries nothing: host memory needs no runtime state. A
// non-null sentinel keeps "initialised" distinguishable from "not".
int g_context_tag = 0;

bool valid_device(int device) { return device == 0; }

int cpu_init(void **ctx) {
    *ctx = &g_context_tag;
    return AFMESH_HAL_OK;
}

void cpu_fini(void *) {}

int cpu_device_count(void *, int *count) {
    *count = 1;
    return AFMESH_HAL_OK;
}

int cpu_device_info(void *, int device, afmesh_dev_info *info) {
    if (!valid_device(device) || !info) return host_error(AFMESH_HAL_INVALID_ARGUMENT, "cpu: bad device index");
    snprintf(info->name, sizeof info->name, "host CPU (%ld online cores)", sysconf(_SC_NPROCESSORS_ONLN));
    info->bus_id[0] = '\0';
    info->total_memory = static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
    return AFMESH_HAL_OK;
}

int cpu_set_device(void *, int device) {
    return valid_device(device) ? AFMESH_HAL_OK : host_error(AFMESH_HAL_INVALID_ARGUMENT, "cpu: only device 0 exists");
}

int cpu_mem_alloc(void *, int device, uint32_t where, size_t bytes, void **ptr) {
    if (!valid_device(device) || bytes == 0 || !ptr || where > AFMESH_ALLOC_HOST_PINNED)
        return host_error(AFMESH_HAL_INVALID_ARGUMENT,
                          "cpu: mem_alloc needs device 0, a known placement and bytes > 0");
    // "Pinned" host memory is page-aligned so transports can register whole pages.
    size_t alignment = where == AFMESH_ALLOC_HOST_PINNED ? static_cast<size_t>(sysconf(_SC_PAGESIZE)) : kDeviceAlignment;
    void *p = nullptr;
    if (posix_memalign(&p, alignment, bytes) != 0)
        return host_error(AFMESH_HAL_NO_MEMORY, "cpu: posix_memalign failed");
    *ptr = p;
    return AFMESH_HAL_OK;
}

int cpu_mem_free(void *, uint32_t, void *ptr) {
    free(ptr);
    return AFMESH_HAL_OK;
}

int cpu_pointer_query(void *, const void *ptr, uint32_t *kind, int *device) {
    if (!ptr || !kind || !device) return host_error(AFMESH_HAL_INVALID_ARGUMENT, "cpu: pointer_query: null argument");
    *kind = AFMESH_MEM_HOST;
    *device = -1;
    return AFMESH_HAL_OK;
}

int cpu_memcpy_sync(void *, void *dst, const void *src, size_t bytes) {
    if (bytes && (!dst || !src)) return host_error(AFMESH_HAL_INVALID_ARGUMENT, "cpu: memcpy: null pointer");
    if (bytes) memmove(dst, src, bytes);
    return AFMESH_HAL_OK;
}

int cpu_memcpy_async(void *ctx, void *dst, const void *src, size_t bytes, void *) {
    return cpu_memcpy_sync(ctx, dst, src, bytes);
}

// Streams and events only need distinct non-null identities.
int cpu_create_token(void **out) {
    *out = new (std::nothrow) char;
    return *out ? AFMESH_HAL_OK : host_error(AFMESH_HAL_NO_MEMORY, "cpu: out of memory");
}

int cpu_destroy_token(void *, void *token) {
    delete static_cast<char *>(token);
    return AFMESH_HAL_OK;
}

int cpu_stream_create(void *, int device, void **stream) {
    if (!valid_device(device) || !stream)
        return host_error(AFMESH_HAL_INVALID_ARGUMENT, "cpu: bad stream_create arguments");
    return cpu_create_token(stream);
}

int cpu_event_create(void *, int device, void **event) {
    if (!valid_device(device) || !event)
        return host_error(AFMESH_HAL_INVALID_ARGUMENT, "cpu: bad event_create arguments");
    return cpu_create_token(event);
}

int cpu_complete(void *, void *) { return AFMESH_HAL_OK; }
int cpu_event_record(void *, void *event, void *) {
    return event ? AFMESH_HAL_OK : host_error(AFMESH_HAL_INVALID_ARGUMENT, "cpu: event_record: null event");
}

const afmesh_device_ops kOps = {
    sizeof(afmesh_device_ops),
    AFMESH_MEM_HOST,
    cpu_init,
    cpu_fini,
    cpu_device_count,
    cpu_device_info,
    cpu_set_device,
    cpu_mem_alloc,
    cpu_mem_free,
    cpu_pointer_query,
    cpu_memcpy_sync,
    cpu_memcpy_async,
    cpu_stream_create,
    cpu_destroy_token,
    cpu_complete,  // stream_sync
    cpu_event_create,
    cpu_destroy_token,
    cpu_event_record,
    cpu_complete,  // event_query
    cpu_complete,  // event_sync
    // No flags: with no asynchronous executor a stream cannot wait without
    // blocking its caller, so the engine waits on the host instead.
    nullptr,
    nullptr,
    nullptr,
    nullptr,
    nullptr,  // dmabuf_export: host memory needs no dma-buf
};

}  // namespace

extern "C" AFMESH_MODULE_EXPORT int afmesh_module_query(uint32_t host_abi_major, const afmesh_host_services *host,
                                                        afmesh_module_desc *out) {
    afmesh::module::bind_host(host, kName);
    return afmesh_module_describe(host_abi_major, out, AFMESH_MODULE_DEVICE, kName, "afmesh cpu " AFMESH_VERSION_STRING, &kOps);
}
