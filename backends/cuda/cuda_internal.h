// SPDX-License-Identifier: Apache-2.0
// What the files of the cuda module share: the module context, the driver
// entry points resolved at run time, error reporting, and the operations each
// file implements for the table in cuda_module.cpp.
#pragma once

// cuda.h and cudaTypedefs.h are used for driver API *types* only (CUstream,
// CUdeviceptr, CUresult, PFN_*): the functions come from
// cudaGetDriverEntryPointByVersion, so nothing links libcuda.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

#include <memory>
#include <mutex>

#include "afmesh/hal/device.h"
#include "module_support.h"

namespace afmesh::cuda {

using module::host_error;

/** Driver API functions the runtime API lacks; null when the installed driver has none. */
struct DriverApi {
    PFN_cuGetErrorName_v6000 get_error_name = nullptr;
    PFN_cuStreamWaitValue32_v11070 stream_wait_value32 = nullptr;
    PFN_cuMemGetHandleForAddressRange_v11070 get_handle_for_address_range = nullptr;
};

/** Resolves DriverApi through cudaGetDriverEntryPointByVersion (after the runtime found a driver). */
DriverApi resolve_driver_api();

/** Per-device state created on first use, so a process touching one GPU never creates contexts on the others. */
struct DeviceState {
    std::once_flag copy_stream_once;
    cudaStream_t copy_stream = nullptr;
    cudaError_t copy_stream_error = cudaSuccess;
};

/** The ctx returned by init(). Immutable after init apart from DeviceState's once-initialised members. */
struct Context {
    int device_count = 0;
    DriverApi driver;
    /** Every device can flush outstanding GPUDirect RDMA writes when a flag wait completes. */
    bool flush_remote_writes_on_wait = false;
    std::unique_ptr<DeviceState[]> devices;
};

inline Context &context(void *ctx) { return *static_cast<Context *>(ctx); }

/**
 * Reports a failed runtime call: maps the error to a HAL status, records
 * "<call>: <cudaErrorName>: <description>" as the reason and clears the
 * runtime's last-error slot (so the caller's next cudaGetLastError() after its
 * own kernel launch does not report our failure). `call_fmt` is printf-style.
 */
__attribute__((format(printf, 2, 3))) int fail_runtime(cudaError_t err, const char *call_fmt, ...);
/** The same for a driver API call made through DriverApi. */
int fail_driver(const DriverApi &driver, CUresult res, const char *call);

/**
 * Makes `device` current for the calling thread until the scope ends, then
 * restores the caller's device: operations that take a device must not change
 * which device the user's thread works on (only set_device does that).
 */
class ScopedDevice {
public:
    ScopedDevice() = default;
    ScopedDevice(const ScopedDevice &) = delete;
    ScopedDevice &operator=(const ScopedDevice &) = delete;
    ~ScopedDevice() {
        if (switched_) cudaSetDevice(previous_);
    }
    cudaError_t enter(int device) {
        cudaError_t err = cudaGetDevice(&previous_);
        if (err != cudaSuccess || previous_ == device) return err;
        err = cudaSetDevice(device);
        switched_ = err == cudaSuccess;
        return err;
    }

private:
    int previous_ = 0;
    bool switched_ = false;
};

// cuda_devices.cpp
int init(void **ctx);
void fini(void *ctx);
int device_count(void *ctx, int *count);
int device_info(void *ctx, int device, afmesh_dev_info *info);
int set_device(void *ctx, int device);

// cuda_memory.cpp
int mem_alloc(void *ctx, int device, uint32_t where, size_t bytes, void **ptr);
int mem_free(void *ctx, uint32_t where, void *ptr);
int pointer_query(void *ctx, const void *ptr, uint32_t *kind, int *device);
int memcpy_sync(void *ctx, void *dst, const void *src, size_t bytes);
int memcpy_async(void *ctx, void *dst, const void *src, size_t bytes, void *stream);

// cuda_streams.cpp
int stream_create(void *ctx, int device, void **stream);
int stream_destroy(void *ctx, void *stream);
int stream_sync(void *ctx, void *stream);
int event_create(void *ctx, int device, void **event);
int event_destroy(void *ctx, void *event);
int event_record(void *ctx, void *event, void *stream);
int event_query(void *ctx, void *event);
int event_sync(void *ctx, void *event);

// cuda_flags.cpp
int flag_create(void *ctx, int device, void **flag);
int flag_destroy(void *ctx, void *flag);
int flag_write(void *ctx, void *flag, uint32_t value);
int stream_wait_flag(void *ctx, void *stream, void *flag, uint32_t value);

// cuda_dmabuf.cpp
int dmabuf_export(void *ctx, const void *ptr, size_t bytes, int *fd, uint64_t *offset);

}  // namespace afmesh::cuda
