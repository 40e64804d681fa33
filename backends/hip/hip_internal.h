// SPDX-License-Identifier: Apache-2.0
// What the files of the hip module share: the module context, the runtime's
// functions (called through runtime(), see hip_runtime_table.h), error
// reporting, and the operations each file implements for the table in
// hip_module.cpp.
#pragma once

#include <memory>
#include <mutex>

#include "afmesh/hal/device.h"
#include "hip_runtime_table.h"
#include "module_support.h"

namespace afmesh::hip {

using module::host_error;

/** Per-device state; the copy stream is created on first use so untouched devices stay untouched. */
struct DeviceState {
    /** hipDeviceAttributeCanUseStreamWaitValue: the GPU itself can wait on a flag. */
    bool can_wait_on_memory = false;
    std::once_flag copy_stream_once;
    hipStream_t copy_stream = nullptr;
    hipError_t copy_stream_error = hipSuccess;
};

/** The ctx returned by init(). */
struct Context {
    int device_count = 0;
    std::unique_ptr<DeviceState[]> devices;
};

inline Context &context(void *ctx) { return *static_cast<Context *>(ctx); }

/**
 * Reports a failed runtime call: maps the error to a HAL status, records
 * "<call>: <hipErrorName>: <description>" and clears the runtime's last error
 * so the caller's own hipGetLastError() does not report our failure.
 */
__attribute__((format(printf, 2, 3))) int fail_hip(hipError_t err, const char *call_fmt, ...);

/** Makes `device` current until the scope ends, then restores the caller's device. */
class ScopedDevice {
public:
    ScopedDevice() = default;
    ScopedDevice(const ScopedDevice &) = delete;
    ScopedDevice &operator=(const ScopedDevice &) = delete;
    ~ScopedDevice() {
        if (switched_) (void)runtime().hipSetDevice(previous_);
    }
    hipError_t enter(int device) {
        hipError_t err = runtime().hipGetDevice(&previous_);
        if (err != hipSuccess || previous_ == device) return err;
        err = runtime().hipSetDevice(device);
        switched_ = err == hipSuccess;
        return err;
    }

private:
    int previous_ = 0;
    bool switched_ = false;
};

// hip_devices.cpp
int init(void **ctx);
void fini(void *ctx);
int device_count(void *ctx, int *count);
int device_info(void *ctx, int device, afmesh_dev_info *info);
int set_device(void *ctx, int device);

// hip_memory.cpp
int mem_alloc(void *ctx, int device, uint32_t where, size_t bytes, void **ptr);
int mem_free(void *ctx, uint32_t where, void *ptr);
int pointer_query(void *ctx, const void *ptr, uint32_t *kind, int *device);
int memcpy_sync(void *ctx, void *dst, const void *src, size_t bytes);
int memcpy_async(void *ctx, void *dst, const void *src, size_t bytes, void *stream);

// hip_streams.cpp
int stream_create(void *ctx, int device, void **stream);
int stream_destroy(void *ctx, void *stream);
int stream_sync(void *ctx, void *stream);
int event_create(void *ctx, int device, void **event);
int event_destroy(void *ctx, void *event);
int event_record(void *ctx, void *event, void *stream);
int event_query(void *ctx, void *event);
int event_sync(void *ctx, void *event);

// hip_flags.cpp
int flag_create(void *ctx, int device, void **flag);
int flag_destroy(void *ctx, void *flag);
int flag_write(void *ctx, void *flag, uint32_t value);
int stream_wait_flag(void *ctx, void *stream, void *flag, uint32_t value);

}  // namespace afmesh::hip
