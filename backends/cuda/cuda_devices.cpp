// SPDX-License-Identifier: Apache-2.0
// Probing the CUDA runtime (init/fini) and describing and selecting devices.
#include <cstdio>
#include <new>

#include "cuda_internal.h"

namespace afmesh::cuda {
namespace {

// Every device can flush outstanding GPUDirect RDMA writes as part of a
// stream memory wait (CU_STREAM_WAIT_VALUE_FLUSH). A flag is written by the
// host after the NIC reported a write into device memory complete; the flush
// makes that data visible to the kernels the wait releases.
bool all_devices_flush_remote_writes(int count) {
    for (int device = 0; device < count; ++device) {
        int can_flush = 0;
        if (cudaDeviceGetAttribute(&can_flush, cudaDevAttrCanFlushRemoteWrites, device) != cudaSuccess) {
            (void)cudaGetLastError();
            return false;
        }
        if (!can_flush) return false;
    }
    return true;
}

}  // namespace

int init(void **ctx) {
    if (!ctx) return host_error(AFMESH_HAL_INVALID_ARGUMENT, "init: null ctx");
    *ctx = nullptr;
    int count = 0;  // cudaGetDeviceCount leaves it untouched when it fails
    const cudaError_t err = cudaGetDeviceCount(&count);
    switch (err) {
    case cudaSuccess:
        break;
    case cudaErrorInsufficientDriver:  // no libcuda.so.1 at all, or one older than this runtime
    case cudaErrorStubLibrary:         // the toolkit's stub libcuda.so was found instead of a driver
        (void)cudaGetLastError();
        return host_error(AFMESH_HAL_NOT_PRESENT, "no NVIDIA driver: %s: %s", cudaGetErrorName(err),
                          cudaGetErrorString(err));
    case cudaErrorNoDevice:  // a driver, but no GPU (or CUDA_VISIBLE_DEVICES hides them all)
        (void)cudaGetLastError();
        return host_error(AFMESH_HAL_NOT_PRESENT, "no NVIDIA GPU: %s: %s", cudaGetErrorName(err),
                          cudaGetErrorString(err));
    default:  // a driver that is present but broken (version mismatch, failed init...)
        return fail_runtime(err, "cudaGetDeviceCount");
    }
    if (count == 0) return host_error(AFMESH_HAL_NOT_PRESENT, "no NVIDIA GPU: cudaGetDeviceCount found 0 devices");

    auto *c = new (std::nothrow) Context;
    if (c) c->devices.reset(new (std::nothrow) DeviceState[static_cast<size_t>(count)]);
    if (!c || !c->devices) {
        delete c;
        return host_error(AFMESH_HAL_NO_MEMORY, "init: out of memory");
    }
    c->device_count = count;
    c->driver = resolve_driver_api();
    c->flush_remote_writes_on_wait = all_devices_flush_remote_writes(count);
    int runtime = 0, driver = 0;
    cudaRuntimeGetVersion(&runtime);
    cudaDriverGetVersion(&driver);
    module::host_log(AFMESH_LOG_DEBUG, "%d device(s), runtime %d, driver %d, flags %s, dma-buf export %s", count,
                     runtime, driver, c->driver.stream_wait_value32 ? "yes" : "no",
                     c->driver.get_handle_for_address_range ? "yes" : "no");
    *ctx = c;
    return AFMESH_HAL_OK;
}

void fini(void *ctx) {
    Context *c = static_cast<Context *>(ctx);
    if (!c) return;
    for (int device = 0; device < c->device_count; ++device) {
        if (!c->devices[device].copy_stream) continue;
        ScopedDevice scope;
        if (scope.enter(device) == cudaSuccess) cudaStreamDestroy(c->devices[device].copy_stream);
    }
    (void)cudaGetLastError();
    delete c;
}

int device_count(void *ctx, int *count) {
    if (!count) return host_error(AFMESH_HAL_INVALID_ARGUMENT, "device_count: null output");
    *count = context(ctx).device_count;
    return AFMESH_HAL_OK;
}

int device_info(void *ctx, int device, afmesh_dev_info *info) {
    if (int rc = module::check_device(device, context(ctx).device_count, "device_info")) return rc;
    if (!info || info->struct_size < sizeof(afmesh_dev_info))
        return host_error(AFMESH_HAL_INVALID_ARGUMENT, "device_info: null info or struct_size too small");
    cudaDeviceProp prop{};
    if (cudaError_t err = cudaGetDeviceProperties(&prop, device))
        return fail_runtime(err, "cudaGetDeviceProperties(%d)", device);
    module::copy_truncated(info->name, sizeof info->name, prop.name);
    snprintf(info->bus_id, sizeof info->bus_id, "%04x:%02x:%02x.0", static_cast<unsigned>(prop.pciDomainID),
             static_cast<unsigned>(prop.pciBusID), static_cast<unsigned>(prop.pciDeviceID));
    info->total_memory = prop.totalGlobalMem;
    return AFMESH_HAL_OK;
}

int set_device(void *ctx, int device) {
    if (int rc = module::check_device(device, context(ctx).device_count, "set_device")) return rc;
    if (cudaError_t err = cudaSetDevice(device)) return fail_runtime(err, "cudaSetDevice(%d)", device);
    return AFMESH_HAL_OK;
}

}  // namespace afmesh::cuda
