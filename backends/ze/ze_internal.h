// SPDX-License-Identifier: Apache-2.0
// What the files of the ze module share: the module context (one driver, one
// context, its GPU devices), per-command-list locking, error reporting, and
// the operations each file implements for the table in ze_module.cpp.
#pragma once

#include <level_zero/ze_api.h>

#include <array>
#include <memory>
#include <mutex>
#include <vector>

#include "afmesh/hal/device.h"
#include "module_support.h"
#include "ze_event_slab.h"

namespace afmesh::ze {

using module::host_error;

struct DeviceState {
    ze_device_handle_t handle = nullptr;
    /** A command queue group that can run compute and copies (user kernels share our streams). */
    uint32_t compute_ordinal = 0;
    /** Stands in for the "default stream" (a NULL stream handle) of this device. */
    ze_command_list_handle_t default_list = nullptr;
    /** A synchronous-mode immediate list: appending a copy returns once the copy is done. */
    ze_command_list_handle_t sync_list = nullptr;
    std::mutex sync_list_mutex;
    /** Device memory can be exported as a dma-buf (zeDeviceGetExternalMemoryProperties). */
    bool dmabuf_export = false;
};

/**
 * Level Zero forbids appending to one command list from two threads at once,
 * while HAL streams, like CUDA streams, are shared (the caller's thread and
 * the NetSend thread). Appends take the lock of the list's stripe; streams are
 * native handles the user may have created, so the lock cannot live in them.
 */
class CommandListLocks {
public:
    std::mutex &of(ze_command_list_handle_t list) {
        return stripes_[(reinterpret_cast<uintptr_t>(list) >> 4) % stripes_.size()];
    }

private:
    std::array<std::mutex, 64> stripes_;
};

/** The ctx returned by init(). */
struct Context {
    ~Context();

    ze_driver_handle_t driver = nullptr;
    ze_context_handle_t context = nullptr;
    std::vector<std::unique_ptr<DeviceState>> devices;
    std::unique_ptr<EventSlab> events;
    CommandListLocks list_locks;

    int device_count() const { return static_cast<int>(devices.size()); }
    /** Index of `handle` among our devices, or -1. */
    int index_of(ze_device_handle_t handle) const;
    /** The list for a HAL stream: the stream itself, or the current device's default list for NULL. */
    ze_command_list_handle_t list_for(void *stream) const;
};

inline Context &context(void *ctx) { return *static_cast<Context *>(ctx); }

/** An immediate command list on `device`'s compute queue group (`mode`: asynchronous for streams). */
ze_result_t create_immediate_list(const Context &ctx, const DeviceState &device, ze_command_queue_mode_t mode,
                                  ze_command_list_handle_t *list);

/** The device set_device made current on this thread (0 until then). */
int current_device();

/** The name of a ze_result_t, e.g. "ZE_RESULT_ERROR_UNINITIALIZED". */
const char *result_name(ze_result_t res);
/** Reports a failed Level Zero call as "<call>: <result name>" and returns the matching HAL status. */
__attribute__((format(printf, 2, 3))) int fail_ze(ze_result_t res, const char *call_fmt, ...);

// ze_devices.cpp
int init(void **ctx);
void fini(void *ctx);
int device_count(void *ctx, int *count);
int device_info(void *ctx, int device, afmesh_dev_info *info);
int set_device(void *ctx, int device);

// ze_memory.cpp
int mem_alloc(void *ctx, int device, uint32_t where, size_t bytes, void **ptr);
int mem_free(void *ctx, uint32_t where, void *ptr);
int pointer_query(void *ctx, const void *ptr, uint32_t *kind, int *device);
int memcpy_sync(void *ctx, void *dst, const void *src, size_t bytes);
int memcpy_async(void *ctx, void *dst, const void *src, size_t bytes, void *stream);

// ze_streams.cpp
int stream_create(void *ctx, int device, void **stream);
int stream_destroy(void *ctx, void *stream);
int stream_sync(void *ctx, void *stream);
int event_create(void *ctx, int device, void **event);
int event_destroy(void *ctx, void *event);
int event_record(void *ctx, void *event, void *stream);
int event_query(void *ctx, void *event);
int event_sync(void *ctx, void *event);

// ze_flags.cpp
int flag_create(void *ctx, int device, void **flag);
int flag_destroy(void *ctx, void *flag);
int flag_write(void *ctx, void *flag, uint32_t value);
int stream_wait_flag(void *ctx, void *stream, void *flag, uint32_t value);

// ze_dmabuf.cpp
int dmabuf_export(void *ctx, const void *ptr, size_t bytes, int *fd, uint64_t *offset);

}  // namespace afmesh::ze
