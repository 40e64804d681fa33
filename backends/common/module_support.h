// SPDX-License-Identifier: Apache-2.0
// Helpers every device module needs and that only depend on the HAL headers:
// keeping the host services the query call handed over, reporting a failure
// reason through them, and logging. Header-only so each module (its own
// shared object, built with hidden visibility) gets a private copy and no
// module ever links another.
#pragma once

#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "afmesh/hal/device.h"

namespace afmesh::module {

struct HostBinding {
    const afmesh_host_services *services = nullptr;
    const char *module_name = "";
};

/** This module's binding to the core, filled in by afmesh_module_query. */
inline HostBinding &host_binding() {
    static HostBinding binding;
    return binding;
}

inline void bind_host(const afmesh_host_services *services, const char *module_name) {
    host_binding() = {services, module_name};
}

/**
 * Records why the current call fails (host->set_error, read by the core right
 * after the call returns) and returns `status`, so error paths are one line:
 * `return fail(AFMESH_HAL_INVALID_ARGUMENT, "bad device %d", device);`
 */
__attribute__((format(printf, 2, 3))) inline int fail(int status, const char *fmt, ...) {
    char reason[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, sizeof reason, fmt, ap);
    va_end(ap);
    if (const afmesh_host_services *host = host_binding().services) host->set_error("%s", reason);
    return status;
}

/** Logs through the core's logger (which applies AFMESH_LOG_LEVEL). */
__attribute__((format(printf, 2, 3))) inline void log(int level, const char *fmt, ...) {
    const HostBinding &binding = host_binding();
    if (!binding.services || !binding.services->log) return;
    char message[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    binding.services->log(level, binding.module_name, "%s", message);
}

inline bool valid_index(int index, int count) { return index >= 0 && index < count; }

/** Copies NUL-terminated `src` into dst[capacity], truncating: runtimes' device names outgrow the HAL's field. */
inline void copy_truncated(char *dst, size_t capacity, const char *src) {
    const size_t n = strnlen(src, capacity - 1);
    memcpy(dst, src, n);
    dst[n] = '\0';
}

/** INVALID_ARGUMENT with a reason unless 0 <= device < device_count. */
inline int check_device(int device, int device_count, const char *what) {
    if (valid_index(device, device_count)) return AFMESH_HAL_OK;
    return fail(AFMESH_HAL_INVALID_ARGUMENT, "%s: device %d out of range [0, %d)", what, device, device_count);
}

/** Argument checks shared by every mem_alloc (device.h: INVALID_ARGUMENT for these). */
inline int check_alloc_args(int device, int device_count, uint32_t where, size_t bytes, void **ptr) {
    if (!ptr) return fail(AFMESH_HAL_INVALID_ARGUMENT, "mem_alloc: null output pointer");
    *ptr = nullptr;
    if (int rc = check_device(device, device_count, "mem_alloc")) return rc;
    if (bytes == 0) return fail(AFMESH_HAL_INVALID_ARGUMENT, "mem_alloc: zero bytes");
    if (where != AFMESH_ALLOC_DEVICE && where != AFMESH_ALLOC_HOST_PINNED)
        return fail(AFMESH_HAL_INVALID_ARGUMENT, "mem_alloc: unknown placement %u", where);
    return AFMESH_HAL_OK;
}

}  // namespace afmesh::module
