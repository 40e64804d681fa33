// SPDX-License-Identifier: Apache-2.0
// Device flags that make a stream wait for a push-pull (afmesh_stream_wait):
// one per slot of the worker's in-flight table (inflight_table.h), made by
// the first stream_wait on that slot and kept for the worker's life.
//
// A stream waits until its slot's flag holds the op's sequence; settling
// the op writes that value. Sequences grow with every reuse of the slot, so
// the values written to one flag only ever increase, as the device module
// requires (hal/afmesh/hal/device.h), and a wait for an earlier op of the
// slot is already satisfied. Without the device module's four flag calls,
// a stream cannot wait for the host: stream_wait is then not supported.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "module_loader.h"
#include "status.h"

namespace afmesh {

class StreamFlags {
public:
    /** `device`: the device module whose flags these are, on device `device_id`; `slots` flags. */
    StreamFlags(const Module &device, int device_id, size_t slots);
    /** Destroys the flags made. */
    ~StreamFlags();
    StreamFlags(const StreamFlags &) = delete;
    StreamFlags &operator=(const StreamFlags &) = delete;

    /** Enqueues on `stream` a wait until `slot`'s flag holds `value`, making the flag first if needed. */
    Status wait(uint16_t slot, void *stream, uint32_t value);
    /** Writes `value` to `slot`'s flag (made by wait()), letting streams waiting for it proceed; logs a failure. */
    void release(uint16_t slot, uint32_t value);

private:
    const Module &device_;
    const int device_id_;
    std::vector<void *> flags_;  // per slot; null until the first wait() on it
};

}  // namespace afmesh
