// SPDX-License-Identifier: Apache-2.0
// Turning HIP runtime errors into HAL statuses with a reason.
#include <cstdarg>
#include <cstdio>
#include <cstring>

#include "hip_internal.h"

namespace afmesh::hip {
namespace {

int status_of(hipError_t err) {
    switch (err) {
    case hipErrorOutOfMemory:
        return AFMESH_HAL_NO_MEMORY;
    case hipErrorInvalidValue:
    case hipErrorInvalidDevice:
    case hipErrorInvalidDevicePointer:
    case hipErrorInvalidHandle:
        return AFMESH_HAL_INVALID_ARGUMENT;
    case hipErrorNotSupported:
        return AFMESH_HAL_NOT_SUPPORTED;
    default:
        return AFMESH_HAL_ERROR;
    }
}

}  // namespace

int fail_hip(hipError_t err, const char *call_fmt, ...) {
    char call[256];
    va_list ap;
    va_start(ap, call_fmt);
    vsnprintf(call, sizeof call, call_fmt, ap);
    va_end(ap);
    (void)runtime().hipGetLastError();
    const char *name = runtime().hipGetErrorName(err);
    const char *description = runtime().hipGetErrorString(err);
    // Some HIP releases return the name again as the description.
    if (!description || strcmp(description, name) == 0) return host_error(status_of(err), "%s: %s", call, name);
    return host_error(status_of(err), "%s: %s: %s", call, name, description);
}

}  // namespace afmesh::hip
