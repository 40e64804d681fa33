// SPDX-License-Identifier: Apache-2.0
// GPU-waits-on-host flags: a 32-bit word in mapped, pinned host memory that
// the host writes and a stream waits on with cuStreamWaitValue32.
//
// Why the HAL's contract holds although the driver compares cyclically.
// CU_STREAM_WAIT_VALUE_GEQ completes when (int32_t)(*addr - target) >= 0, not
// when *addr >= target. For two 32-bit values whose distance is below 2^31 the
// two tests agree; they differ only when the flag and the target are 2^31 or
// more apart. The module keeps every pending wait inside that window:
//  - flag_write only moves a flag forward (the HAL says values strictly
//    increase and never wrap; a smaller value is refused), and refuses a
//    single step of 2^31 or more, so a "release everything" write of
//    UINT32_MAX fails with a reason instead of silently looking like the past
//    to waits still pending;
//  - stream_wait_flag reads the flag first. A target already reached is
//    replaced by the flag's current value (same meaning: complete at once, and
//    no stale target that later writes could push 2^31 behind); a target 2^31
//    or more ahead of the current value is refused.
// So at enqueue time every target is within 2^31 - 1 of the flag. What remains
// is that the host must not advance a flag by 2^31 in total while a wait on it
// is still queued on a stream behind other work (a wait at the head of a
// stream is polled continuously). Flags count layers or micro-batches, so that
// is about two billion completions published while a stream is stalled.
#include <atomic>
#include <new>

#include "cuda_internal.h"

namespace afmesh::cuda {
namespace {

constexpr uint32_t kCyclicWindow = 1u << 31;

struct Flag {
    uint32_t *word = nullptr;        // host address, written by flag_write
    CUdeviceptr device_address = 0;  // the same word as the GPU addresses it
};

Flag *as_flag(void *flag) { return static_cast<Flag *>(flag); }

int require_stream_mem_ops(const Context &c) {
    if (c.driver.stream_wait_value32) return AFMESH_HAL_OK;
    return host_error(AFMESH_HAL_NOT_SUPPORTED,
                      "the NVIDIA driver has no cuStreamWaitValue32 (stream memory operations)");
}

}  // namespace

int flag_create(void *ctx, int device, void **flag) {
    Context &c = context(ctx);
    if (!flag) return host_error(AFMESH_HAL_INVALID_ARGUMENT, "flag_create: null output");
    if (int rc = module::check_device(device, c.device_count, "flag_create")) return rc;
    if (int rc = require_stream_mem_ops(c)) return rc;
    ScopedDevice scope;
    if (cudaError_t err = scope.enter(device)) return fail_runtime(err, "cudaSetDevice(%d)", device);

    // One page per flag: flags are few (one per pipeline slot) and made off the hot path.
    void *host = nullptr;
    if (cudaError_t err = cudaHostAlloc(&host, sizeof(uint32_t), cudaHostAllocPortable | cudaHostAllocMapped))
        return fail_runtime(err, "cudaHostAlloc(flag)");
    *static_cast<uint32_t *>(host) = 0;
    void *device_address = nullptr;
    if (cudaError_t err = cudaHostGetDevicePointer(&device_address, host, 0)) {
        int rc = fail_runtime(err, "cudaHostGetDevicePointer(flag)");
        cudaFreeHost(host);
        return rc;
    }
    Flag *f = new (std::nothrow) Flag{static_cast<uint32_t *>(host), reinterpret_cast<CUdeviceptr>(device_address)};
    if (!f) {
        cudaFreeHost(host);
        return host_error(AFMESH_HAL_NO_MEMORY, "flag_create: out of memory");
    }
    *flag = f;
    return AFMESH_HAL_OK;
}

// The caller destroys a flag only once every stream that waited on it has
// passed the wait (as with any memory a stream still uses).
int flag_destroy(void *, void *flag) {
    Flag *f = as_flag(flag);
    if (!f) return host_error(AFMESH_HAL_INVALID_ARGUMENT, "flag_destroy: null flag");
    const cudaError_t err = cudaFreeHost(f->word);
    delete f;
    return err == cudaSuccess ? AFMESH_HAL_OK : fail_runtime(err, "cudaFreeHost(flag)");
}

int flag_write(void *, void *flag, uint32_t value) {
    Flag *f = as_flag(flag);
    if (!f) return host_error(AFMESH_HAL_INVALID_ARGUMENT, "flag_write: null flag");
    std::atomic_ref<uint32_t> word(*f->word);
    uint32_t current = word.load(std::memory_order_relaxed);
    do {
        if (value == current) return AFMESH_HAL_OK;
        if (value < current)
            return host_error(AFMESH_HAL_INVALID_ARGUMENT,
                              "flag_write: %u is below the flag's value %u; flags only increase", value, current);
        if (value - current >= kCyclicWindow)
            return host_error(AFMESH_HAL_INVALID_ARGUMENT,
                              "flag_write: %u is 2^31 or more ahead of the flag's value %u, which the driver's cyclic "
                              "comparison (cuStreamWaitValue32 GEQ) would read as the past",
                              value, current);
        // Release: whatever the host wrote before publishing `value` is visible to
        // anyone (the GPU included) that observes it.
    } while (!word.compare_exchange_weak(current, value, std::memory_order_release, std::memory_order_relaxed));
    return AFMESH_HAL_OK;
}

int stream_wait_flag(void *ctx, void *stream, void *flag, uint32_t value) {
    Context &c = context(ctx);
    Flag *f = as_flag(flag);
    if (!f) return host_error(AFMESH_HAL_INVALID_ARGUMENT, "stream_wait_flag: null flag");
    if (int rc = require_stream_mem_ops(c)) return rc;
    const uint32_t current = std::atomic_ref<uint32_t>(*f->word).load(std::memory_order_acquire);
    uint32_t target = value;
    if (value <= current) {
        target = current;
    } else if (value - current >= kCyclicWindow) {
        return host_error(AFMESH_HAL_INVALID_ARGUMENT,
                          "stream_wait_flag: %u is 2^31 or more ahead of the flag's value %u, beyond what the driver's "
                          "cyclic comparison (cuStreamWaitValue32 GEQ) can order",
                          value, current);
    }
    unsigned int flags = CU_STREAM_WAIT_VALUE_GEQ;
    if (c.flush_remote_writes_on_wait) flags |= CU_STREAM_WAIT_VALUE_FLUSH;
    CUresult res = c.driver.stream_wait_value32(static_cast<CUstream>(stream), f->device_address, target, flags);
    return res == CUDA_SUCCESS ? AFMESH_HAL_OK : fail_driver(c.driver, res, "cuStreamWaitValue32");
}

}  // namespace afmesh::cuda
