// SPDX-License-Identifier: Apache-2.0
// Helpers every device module needs beyond its binding to the core
// (common/module_binding.h): argument checks whose reasons are the same in
// every module, and copying a runtime's strings into the HAL's fields.
// Header-only, like the binding, so no module ever links another.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "afmesh/hal/device.h"
#include "module_binding.h"

namespace afmesh::module {

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
    return host_error(AFMESH_HAL_INVALID_ARGUMENT, "%s: device %d out of range [0, %d)", what, device, device_count);
}

/** Argument checks shared by every mem_alloc (device.h: INVALID_ARGUMENT for these). */
inline int check_alloc_args(int device, int device_count, uint32_t where, size_t bytes, void **ptr) {
    if (!ptr) return host_error(AFMESH_HAL_INVALID_ARGUMENT, "mem_alloc: null output pointer");
    *ptr = nullptr;
    if (int rc = check_device(device, device_count, "mem_alloc")) return rc;
    if (bytes == 0) return host_error(AFMESH_HAL_INVALID_ARGUMENT, "mem_alloc: zero bytes");
    if (where != AFMESH_ALLOC_DEVICE && where != AFMESH_ALLOC_HOST_PINNED)
        return host_error(AFMESH_HAL_INVALID_ARGUMENT, "mem_alloc: unknown placement %u", where);
    return AFMESH_HAL_OK;
}

}  // namespace afmesh::module
