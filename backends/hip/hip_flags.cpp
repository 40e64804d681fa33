// SPDX-License-Identifier: Apache-2.0
// GPU-waits-on-host flags for HIP.
//
// A flag is one 64-bit word holding the zero-extended 32-bit value. Devices
// that can wait on memory (hipDeviceAttributeCanUseStreamWaitValue) get
// signal memory, the kind hipStreamWaitValue* documents it needs (HIP requires
// exactly 8 bytes, hence the 64-bit word), and the stream waits with
// hipStreamWaitValue64(Gte). HIP's Gte is a plain (*ptr & mask) >= value, so
// with every bit of the mask set and the value zero-extended it is exactly the
// HAL's "flag >= value"; no wrap-around window applies. Where signal memory
// cannot be had (some APUs refuse it), coherent mapped host memory is used: the
// runtime then waits with a small polling kernel instead of a barrier packet.
//
// Devices without wait-on-memory support fall back to a stream callback
// (hipStreamAddCallback; Debian's libamdhip64 5.2 declares hipLaunchHostFunc
// but does not export it): the stream runs a host function that polls the flag
// until it reaches the value, and a callback blocks later work on its stream
// until it returns. The price: while it waits, the callback holds the HIP
// runtime thread that runs callbacks (others queue behind it) and a CPU core
// polling with backoff. It is a correctness fallback, not a fast path.
#include <atomic>
#include <chrono>
#include <new>
#include <thread>

#include "hip_internal.h"

namespace afmesh::hip {
namespace {

enum class WaitBy {
    kDevice,        // hipStreamWaitValue64 on the flag's memory
    kHostCallback,  // a stream callback polling the flag
};

struct Flag {
    uint64_t *word = nullptr;
    bool signal_memory = false;  // freed with hipFree, else hipHostFree
    WaitBy wait_by = WaitBy::kDevice;
};

Flag *as_flag(void *flag) { return static_cast<Flag *>(flag); }

std::atomic_ref<uint64_t> flag_word(const Flag &f) { return std::atomic_ref<uint64_t>(*f.word); }

struct HostWait {
    Flag *flag;
    uint64_t value;
};

// Runs on the runtime's callback thread once earlier work on the stream is done.
void wait_on_host(hipStream_t, hipError_t, void *arg) {
    std::unique_ptr<HostWait> wait(static_cast<HostWait *>(arg));
    auto word = flag_word(*wait->flag);
    for (unsigned polls = 0; word.load(std::memory_order_acquire) < wait->value; ++polls) {
        if (polls < 1000)
            std::this_thread::yield();
        else
            std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
}

// Allocates the flag's word: signal memory when the device waits on memory,
// else (or when the runtime refuses signal memory) coherent mapped host memory.
hipError_t allocate_word(bool device_waits, Flag *f) {
    void *p = nullptr;
    if (device_waits && runtime().hipExtMallocWithFlags(&p, sizeof(uint64_t), hipMallocSignalMemory) == hipSuccess) {
        f->word = static_cast<uint64_t *>(p);
        f->signal_memory = true;
        return hipSuccess;
    }
    (void)runtime().hipGetLastError();
    hipError_t err = runtime().hipHostMalloc(&p, sizeof(uint64_t), hipHostMallocCoherent | hipHostMallocMapped);
    if (err == hipSuccess) f->word = static_cast<uint64_t *>(p);
    return err;
}

}  // namespace

int flag_create(void *ctx, int device, void **flag) {
    Context &c = context(ctx);
    if (!flag) return host_error(AFMESH_HAL_INVALID_ARGUMENT, "flag_create: null output");
    if (int rc = module::check_device(device, c.device_count, "flag_create")) return rc;
    ScopedDevice scope;
    if (hipError_t err = scope.enter(device)) return fail_hip(err, "hipSetDevice(%d)", device);
    auto f = std::make_unique<Flag>();
    f->wait_by = c.devices[device].can_wait_on_memory ? WaitBy::kDevice : WaitBy::kHostCallback;
    if (hipError_t err = allocate_word(f->wait_by == WaitBy::kDevice, f.get()))
        return fail_hip(err, "hipHostMalloc(flag)");
    *f->word = 0;
    *flag = f.release();
    return AFMESH_HAL_OK;
}

// The caller destroys a flag only once every stream that waited on it has
// passed the wait (as with any memory a stream still uses).
int flag_destroy(void *, void *flag) {
    std::unique_ptr<Flag> f(as_flag(flag));
    if (!f) return host_error(AFMESH_HAL_INVALID_ARGUMENT, "flag_destroy: null flag");
    const hipError_t err = f->signal_memory ? runtime().hipFree(f->word) : runtime().hipHostFree(f->word);
    return err == hipSuccess ? AFMESH_HAL_OK : fail_hip(err, "freeing the flag's memory");
}

int flag_write(void *, void *flag, uint32_t value) {
    Flag *f = as_flag(flag);
    if (!f) return host_error(AFMESH_HAL_INVALID_ARGUMENT, "flag_write: null flag");
    auto word = flag_word(*f);
    uint64_t current = word.load(std::memory_order_relaxed);
    do {
        if (value == current) return AFMESH_HAL_OK;
        if (value < current)
            return host_error(AFMESH_HAL_INVALID_ARGUMENT,
                              "flag_write: %u is below the flag's value %llu; flags only increase", value,
                              static_cast<unsigned long long>(current));
        // Release: what the host wrote before publishing `value` is visible to whoever observes it.
    } while (!word.compare_exchange_weak(current, value, std::memory_order_release, std::memory_order_relaxed));
    return AFMESH_HAL_OK;
}

int stream_wait_flag(void *, void *stream, void *flag, uint32_t value) {
    Flag *f = as_flag(flag);
    if (!f) return host_error(AFMESH_HAL_INVALID_ARGUMENT, "stream_wait_flag: null flag");
    auto *s = static_cast<hipStream_t>(stream);
    if (f->wait_by == WaitBy::kDevice) {
        if (hipError_t err = runtime().hipStreamWaitValue64(s, f->word, value, hipStreamWaitValueGte, ~uint64_t{0}))
            return fail_hip(err, "hipStreamWaitValue64");
        return AFMESH_HAL_OK;
    }
    // Already reached: the callback would return at once, so skip it.
    if (flag_word(*f).load(std::memory_order_acquire) >= value) return AFMESH_HAL_OK;
    auto *wait = new (std::nothrow) HostWait{f, value};
    if (!wait) return host_error(AFMESH_HAL_NO_MEMORY, "stream_wait_flag: out of memory");
    if (hipError_t err = runtime().hipStreamAddCallback(s, wait_on_host, wait, 0)) {
        delete wait;
        return fail_hip(err, "hipStreamAddCallback");
    }
    return AFMESH_HAL_OK;
}

}  // namespace afmesh::hip
