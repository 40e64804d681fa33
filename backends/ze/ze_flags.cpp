// SPDX-License-Identifier: Apache-2.0
// GPU-waits-on-host flags for Level Zero, built from host-signalled events.
//
// Level Zero has no "wait until memory >= value" command, only waits on
// events, and an event is a one-shot latch (signalled or not). A flag that
// holds a monotonically increasing 32-bit value maps onto events like this:
//  - The flag keeps its value on the host and a list of pending waits.
//  - stream_wait_flag(v) takes two events from the slab, `release` and
//    `passed`, and appends two barriers: a plain one, so what follows waits
//    for all earlier work (a barrier with wait events waits only for those),
//    then one that waits for `release` and signals `passed`. Later commands
//    cannot start before both complete. If the flag already holds v or more,
//    `release` is signalled at once and the wait costs only the ordering.
//  - flag_write(v) stores v and signals, from the host, the `release` event of
//    every pending wait whose value is now reached: one event per pending
//    wait, signalled exactly once, never reset while a list may still wait on it.
//  - An event pair goes back to the slab (which resets it) only once its
//    `passed` event is signalled, i.e. once the device has finished with both.
//    Pairs are reclaimed lazily by the next write or wait on the same flag, so
//    the number of events a flag holds is bounded by its waits in flight.
#include <new>

#include "ze_internal.h"

namespace afmesh::ze {
namespace {

struct PendingWait {
    uint32_t value;
    ze_event_handle_t release;  // signalled by the host once the flag reaches `value`
    ze_event_handle_t passed;   // signalled by the device when the barrier completes
    bool released;
};

struct Flag {
    std::mutex mutex;
    uint32_t value = 0;
    std::vector<PendingWait> waits;
};

Flag *as_flag(void *flag) { return static_cast<Flag *>(flag); }

// Returns the events of every wait the device has passed to the slab, in one
// pass: giving an event back resets it, so "passed" cannot be asked twice.
// Caller holds f.mutex.
void reclaim_passed(Context &c, Flag &f) {
    auto kept = f.waits.begin();
    for (const PendingWait &w : f.waits) {
        if (w.released && zeEventQueryStatus(w.passed) == ZE_RESULT_SUCCESS) {
            c.events->give(w.release);
            c.events->give(w.passed);
        } else {
            *kept++ = w;
        }
    }
    f.waits.erase(kept, f.waits.end());
}

}  // namespace

int flag_create(void *ctx, int device, void **flag) {
    if (!flag) return host_error(AFMESH_HAL_INVALID_ARGUMENT, "flag_create: null output");
    if (int rc = module::check_device(device, context(ctx).device_count(), "flag_create")) return rc;
    // Events are visible to every device of the context, so a flag is not tied to `device`.
    Flag *f = new (std::nothrow) Flag;
    if (!f) return host_error(AFMESH_HAL_NO_MEMORY, "flag_create: out of memory");
    *flag = f;
    return AFMESH_HAL_OK;
}

// The HAL asks callers to destroy a flag only after every stream passed its
// waits. Should waits still be pending, they are released rather than left to
// hang their lists, and the device is waited for before their events go back.
int flag_destroy(void *ctx, void *flag) {
    Context &c = context(ctx);
    std::unique_ptr<Flag> f(as_flag(flag));
    if (!f) return host_error(AFMESH_HAL_INVALID_ARGUMENT, "flag_destroy: null flag");
    std::lock_guard<std::mutex> lock(f->mutex);
    ze_result_t first_error = ZE_RESULT_SUCCESS;
    for (PendingWait &w : f->waits) {
        ze_result_t res = w.released ? ZE_RESULT_SUCCESS : zeEventHostSignal(w.release);
        if (res == ZE_RESULT_SUCCESS) res = zeEventHostSynchronize(w.passed, UINT64_MAX);
        if (res != ZE_RESULT_SUCCESS) {
            if (first_error == ZE_RESULT_SUCCESS) first_error = res;
            continue;  // the device may still use these events: leak them rather than recycle them
        }
        c.events->give(w.release);
        c.events->give(w.passed);
    }
    return first_error == ZE_RESULT_SUCCESS ? AFMESH_HAL_OK
                                            : fail_ze(first_error, "flag_destroy: releasing pending waits");
}

int flag_write(void *ctx, void *flag, uint32_t value) {
    Context &c = context(ctx);
    Flag *f = as_flag(flag);
    if (!f) return host_error(AFMESH_HAL_INVALID_ARGUMENT, "flag_write: null flag");
    std::lock_guard<std::mutex> lock(f->mutex);
    if (value < f->value)
        return host_error(AFMESH_HAL_INVALID_ARGUMENT,
                          "flag_write: %u is below the flag's value %u; flags only increase", value, f->value);
    f->value = value;
    for (PendingWait &w : f->waits) {
        if (w.released || w.value > value) continue;
        // Host-scope signal: host writes made before this call are visible to the released work.
        if (ze_result_t res = zeEventHostSignal(w.release)) return fail_ze(res, "zeEventHostSignal");
        w.released = true;
    }
    reclaim_passed(c, *f);
    return AFMESH_HAL_OK;
}

int stream_wait_flag(void *ctx, void *stream, void *flag, uint32_t value) {
    Context &c = context(ctx);
    Flag *f = as_flag(flag);
    if (!f) return host_error(AFMESH_HAL_INVALID_ARGUMENT, "stream_wait_flag: null flag");
    std::lock_guard<std::mutex> lock(f->mutex);
    reclaim_passed(c, *f);

    PendingWait w{value, nullptr, nullptr, value <= f->value};
    ze_result_t res = c.events->take(&w.release);
    if (res == ZE_RESULT_SUCCESS) res = c.events->take(&w.passed);
    if (res == ZE_RESULT_SUCCESS && w.released) res = zeEventHostSignal(w.release);
    if (res == ZE_RESULT_SUCCESS) {
        ze_command_list_handle_t list = c.list_for(stream);
        std::lock_guard<std::mutex> list_lock(c.list_locks.of(list));
        res = zeCommandListAppendBarrier(list, nullptr, 0, nullptr);
        if (res == ZE_RESULT_SUCCESS) res = zeCommandListAppendBarrier(list, w.passed, 1, &w.release);
    }
    if (res != ZE_RESULT_SUCCESS) {
        if (w.release) c.events->give(w.release);
        if (w.passed) c.events->give(w.passed);
        return fail_ze(res, "stream_wait_flag: enqueueing the wait");
    }
    f->waits.push_back(w);
    return AFMESH_HAL_OK;
}

}  // namespace afmesh::ze
