// SPDX-License-Identifier: Apache-2.0
// Turning CUDA runtime and driver errors into HAL statuses with a reason.
#include <cstdarg>
#include <cstdio>

#include "cuda_internal.h"

namespace afmesh::cuda {
namespace {

int status_of(cudaError_t err) {
    switch (err) {
    case cudaErrorMemoryAllocation:
        return AFMESH_HAL_NO_MEMORY;
    case cudaErrorInvalidValue:
    case cudaErrorInvalidDevice:
    case cudaErrorInvalidDevicePointer:
    case cudaErrorInvalidResourceHandle:
        return AFMESH_HAL_INVALID_ARGUMENT;
    case cudaErrorNotSupported:
        return AFMESH_HAL_NOT_SUPPORTED;
    default:
        return AFMESH_HAL_ERROR;
    }
}

int status_of(CUresult res) {
    switch (res) {
    case CUDA_ERROR_OUT_OF_MEMORY:
        return AFMESH_HAL_NO_MEMORY;
    case CUDA_ERROR_INVALID_VALUE:
    case CUDA_ERROR_INVALID_HANDLE:
        return AFMESH_HAL_INVALID_ARGUMENT;
    case CUDA_ERROR_NOT_SUPPORTED:
        return AFMESH_HAL_NOT_SUPPORTED;
    default:
        return AFMESH_HAL_ERROR;
    }
}

}  // namespace

int fail_runtime(cudaError_t err, const char *call_fmt, ...) {
    char call[256];
    va_list ap;
    va_start(ap, call_fmt);
    vsnprintf(call, sizeof call, call_fmt, ap);
    va_end(ap);
    (void)cudaGetLastError();
    return host_error(status_of(err), "%s: %s: %s", call, cudaGetErrorName(err), cudaGetErrorString(err));
}

int fail_driver(const DriverApi &driver, CUresult res, const char *call) {
    const char *name = nullptr;
    if (!driver.get_error_name || driver.get_error_name(res, &name) != CUDA_SUCCESS || !name) name = "CUresult";
    return host_error(status_of(res), "%s: %s (%d)", call, name, static_cast<int>(res));
}

}  // namespace afmesh::cuda
