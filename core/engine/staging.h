// SPDX-License-Identifier: Apache-2.0
// Staging: device memory the transport cannot register (CUDA memory over
// tcp, say) travels through pinned host memory from the device module. The
// decision is the transport's caps.mem_kinds alone, so nothing here knows
// any transport: a transport that registers device memory (GPUDirect) gets
// the tensor itself, one that cannot gets a pinned copy.
//
// Pinned buffers are expensive to allocate and register, so they are pooled
// by power-of-two capacity and registered once; after warm-up a staged
// tensor costs a copy and no allocation. Host tensors never come here: the
// engines test needed() (one bit) and go on.
//
// A large staged push on a stream is copied in chunks (AFMESH_STAGING_CHUNK),
// each with its own event, so the transport sends chunk k while the device
// copies chunk k+1: the copy and the send overlap instead of adding up.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "afmesh/hal/device.h"
#include "counters.h"
#include "engine/wire.h"
#include "memory_registry.h"
#include "module_loader.h"
#include "status.h"
#include "thread_annotations.h"

namespace afmesh {

/** Whether `transport` registers memory of `kind` itself (otherwise the engine stages it). */
inline bool transport_registers(const Module &transport, uint32_t kind) {
    return kind < AFMESH_MEM_KIND_COUNT && (transport.net_caps().mem_kinds & AFMESH_MEM_BIT(kind));
}

class Staging {
public:
    /** A registered pinned host buffer. */
    struct Buffer {
        void *ptr = nullptr;
        uint64_t capacity = 0;
        const Registration *reg = nullptr;
    };

    /**
     * `chunk_bytes`: the piece a staged push on a stream is copied and sent in
     * (AFMESH_STAGING_CHUNK). `numa_node`: where the pinned buffers go, the
     * NIC's node (placement.h); -1 for no preference.
     */
    Staging(const Module &device, const Module &transport, MemoryRegistry &registry, int device_id,
            uint64_t chunk_bytes, int numa_node)
        : device_(device), transport_(transport), registry_(registry), device_id_(device_id),
          chunk_bytes_(std::max(chunk_bytes, wire::kMinChunkBytes)),  // receivers bound write counts by it
          numa_node_(numa_node) {}
    ~Staging();
    Staging(const Staging &) = delete;
    Staging &operator=(const Staging &) = delete;

    uint64_t chunk_bytes() const { return chunk_bytes_; }
    /** Copies made (or queued on a stream) so far, and their bytes: the staging_* fields of afmesh_stats. */
    uint64_t copies() const { return copies_.get(); }
    uint64_t copied_bytes() const { return copied_bytes_.get(); }

    /** True when memory of `kind` must be staged: the transport cannot register it. */
    bool needed(uint32_t kind) const { return !transport_registers(transport_, kind); }

    /** OK when the device module can copy memory of `kind` (which the transport cannot register). */
    Status check_kind(uint32_t kind, const std::string &what) const;

    /** A pinned, registered buffer of at least `bytes` (> 0); give it back with release(). */
    Status acquire(uint64_t bytes, Buffer *out);

    /** Returns a buffer to the pool; a default Buffer is a no-op. */
    void release(Buffer &b);

    /** Copies between host and device memory; returns when done. */
    Status copy(void *dst, const void *src, uint64_t bytes) const;

    /** Queues a copy on `stream`, behind the work the caller queued there (see record()). */
    Status copy_async(void *dst, const void *src, uint64_t bytes, void *stream) const;

    /**
     * Captures the work queued on `stream` so far in a pooled event, which
     * query() polls without blocking; give it back with release_event().
     */
    Status record(void *stream, void **event);

    /** *done once the recorded work has finished; an error when the stream failed. Never blocks. */
    Status query(void *event, bool *done) const;

    /**
     * Returns an event to the pool; `wait`: first waits for its work (which
     * may still be writing into staging buffers about to be reused). Null is a no-op.
     */
    void release_event(void *event, bool wait);

private:
    static constexpr uint64_t kMinCapacity = 4096;
    const afmesh_device_ops &dev() const { return device_.device(); }
    void count_copy(uint64_t bytes) const {
        copies_.add();
        copied_bytes_.add(bytes);
    }

    const Module &device_;
    const Module &transport_;
    MemoryRegistry &registry_;
    const int device_id_;
    const uint64_t chunk_bytes_;
    const int numa_node_;
    mutable Tally copies_, copied_bytes_;  // counted by the const copy calls
    Mutex mu_;  // the pools; never held across a device call that waits
    std::multimap<uint64_t, Buffer> free_ AFMESH_GUARDED_BY(mu_);
    std::vector<Buffer> all_ AFMESH_GUARDED_BY(mu_);
    std::vector<void *> events_ AFMESH_GUARDED_BY(mu_);
    bool numa_refused_ AFMESH_GUARDED_BY(mu_) = false;  // said once: the kernel would not prefer numa_node_
};

}  // namespace afmesh
