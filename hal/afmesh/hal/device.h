/* SPDX-License-Identifier: Apache-2.0 */
/*
 * afmesh device module ABI (libafmesh_dev_<name>.so).
 *
 * A device module wraps one accelerator runtime (CUDA, HIP, Level Zero, or
 * plain host memory for "cpu") behind a table of C function pointers. The
 * core uses it to allocate memory, copy between host and device, wait for
 * the caller's stream work before sending, and make a stream wait for
 * network completion without blocking the CPU.
 *
 * Conventions for every function below:
 *  - returns an afmesh_hal_status; on NOT_PRESENT or a negative status the
 *    module has described the reason with host->set_error();
 *  - `ctx` is the value init() returned;
 *  - all functions are thread-safe unless stated otherwise;
 *  - streams are the runtime's native stream handles (cudaStream_t,
 *    hipStream_t, ze_command_list_handle_t), passed as void*; NULL is the
 *    runtime's default stream. Events and flags are module-owned opaque
 *    pointers.
 * Optional entries may be NULL; the core checks before calling them and
 * checks struct_size before reading any entry appended after ABI 1.0.
 */
#ifndef AFMESH_HAL_DEVICE_H
#define AFMESH_HAL_DEVICE_H

#include "afmesh/hal/module.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Where mem_alloc places memory. */
typedef enum afmesh_dev_alloc_where {
    AFMESH_ALLOC_DEVICE = 0,      /**< device memory of `device` */
    AFMESH_ALLOC_HOST_PINNED = 1, /**< page-locked host memory usable by the device's DMA engines */
} afmesh_dev_alloc_where;

/** Static description of one device, for `afmesh info` and logs. */
typedef struct afmesh_dev_info {
    uint32_t struct_size;  /**< set by the caller */
    char name[64];         /**< marketing name, NUL-terminated */
    char bus_id[32];       /**< PCI bus id "dddd:bb:dd.f", or "" */
    uint64_t total_memory; /**< bytes of device memory (host RAM for cpu) */
} afmesh_dev_info;

typedef struct afmesh_device_ops {
    uint32_t struct_size; /**< sizeof(afmesh_device_ops) the module was built with */
    /** The afmesh_mem_kind of the memory this module allocates on devices. */
    uint32_t mem_kind;

    /**
     * Probes the runtime and creates the module context.
     * @return OK; NOT_PRESENT when there is no driver or no device (a normal
     *         outcome on hosts without this accelerator: the reason names the
     *         runtime's error, e.g. "cudaErrorInsufficientDriver"); ERROR when
     *         the runtime is present but broken.
     */
    int (*init)(void **ctx);
    /** Releases everything init() created. Never fails. */
    void (*fini)(void *ctx);

    /** Number of usable devices (>= 1 after a successful init). */
    int (*device_count)(void *ctx, int *count);
    /** Fills `info` (whose struct_size the caller set) for device `device`. INVALID_ARGUMENT for a bad index. */
    int (*device_info)(void *ctx, int device, afmesh_dev_info *info);
    /** Makes `device` current for the calling thread. INVALID_ARGUMENT for a bad index. */
    int (*set_device)(void *ctx, int device);

    /**
     * Allocates `bytes` (> 0) of memory, aligned to at least 256 bytes.
     * NO_MEMORY when the allocation fails, INVALID_ARGUMENT for a bad device
     * or zero size.
     */
    int (*mem_alloc)(void *ctx, int device, uint32_t where, size_t bytes, void **ptr);
    /** Frees memory from mem_alloc with the same `where`. NULL is a no-op. */
    int (*mem_free)(void *ctx, uint32_t where, void *ptr);

    /**
     * Classifies a pointer, to validate a caller's claim; never used to guess.
     * Sets *kind to the afmesh_mem_kind of the allocation and *device to its
     * device (or -1 for host memory). Host memory unknown to the runtime is
     * reported as AFMESH_MEM_HOST.
     */
    int (*pointer_query)(void *ctx, const void *ptr, uint32_t *kind, int *device);

    /** Copies `bytes` between any two of host, pinned host and device memory; returns when done. */
    int (*memcpy_sync)(void *ctx, void *dst, const void *src, size_t bytes);
    /** Enqueues the same copy on `stream`; completion is observed through an event or stream_sync. */
    int (*memcpy_async)(void *ctx, void *dst, const void *src, size_t bytes, void *stream);

    /** Creates a non-blocking stream on `device`. */
    int (*stream_create)(void *ctx, int device, void **stream);
    int (*stream_destroy)(void *ctx, void *stream);
    /** Blocks until all work enqueued on `stream` has finished. */
    int (*stream_sync)(void *ctx, void *stream);

    /** Creates an event usable on `device`'s streams. Event creation is off the hot path. */
    int (*event_create)(void *ctx, int device, void **event);
    int (*event_destroy)(void *ctx, void *event);
    /** Captures the work enqueued on `stream` so far. */
    int (*event_record)(void *ctx, void *event, void *stream);
    /** OK when the recorded work has finished, AGAIN while it is pending. Never blocks. */
    int (*event_query)(void *ctx, void *event);
    /** Blocks until the recorded work has finished. */
    int (*event_sync)(void *ctx, void *event);

    /*
     * GPU-waits-on-host (optional: all four NULL when unsupported).
     * A flag is a 32-bit value in memory the host writes and a stream can
     * wait on without a CPU thread blocking (cuStreamWaitValue32,
     * hipStreamWaitValue32, a host-signalled ze event). Values written to one
     * flag strictly increase and never wrap during the flag's life, so a
     * wait for `value` completes once the flag holds any value >= `value`.
     */
    int (*flag_create)(void *ctx, int device, void **flag);
    int (*flag_destroy)(void *ctx, void *flag);
    /** Host side: publishes `value` to the flag (with a release fence). */
    int (*flag_write)(void *ctx, void *flag, uint32_t value);
    /** Enqueues on `stream` a wait until the flag holds a value >= `value`. */
    int (*stream_wait_flag)(void *ctx, void *stream, void *flag, uint32_t value);

    /**
     * Exports a dma-buf file descriptor covering [ptr, ptr+bytes) for
     * GPUDirect RDMA registration (optional; NULL when unsupported).
     * *offset is the offset of `ptr` inside the dma-buf. The caller closes *fd.
     * NOT_SUPPORTED when the driver cannot export this range.
     */
    int (*dmabuf_export)(void *ctx, const void *ptr, size_t bytes, int *fd, uint64_t *offset);
} afmesh_device_ops;

#ifdef __cplusplus
}
#endif

#endif /* AFMESH_HAL_DEVICE_H */
