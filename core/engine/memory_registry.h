// SPDX-License-Identifier: Apache-2.0
// Memory registrations with one transport: the ones the user made up front
// and the ones made on the fly for unregistered buffers (cached until
// deregistered or the node ends). Lookups find the registration covering an
// address range, so a tensor inside a registered buffer needs no call.
// Device memory the transport cannot register but the engine stages through
// pinned host memory (staging.h) is only recorded: registering it up front
// must succeed, and its staging buffers are registered when first used.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>

#include "afmesh/hal/transport.h"
#include "module_loader.h"
#include "status.h"
#include "thread_annotations.h"

namespace afmesh {

struct Registration {
    uintptr_t base = 0;
    uint64_t bytes = 0;
    uint32_t kind = AFMESH_MEM_HOST;
    int device = -1;
    afmesh_net_mr *mr = nullptr;  // null for memory the engine stages (recorded only)
    afmesh_net_rkey rkey{};
    bool cached = false;  // made on the fly, not by the user

    bool covers(uintptr_t p, uint64_t n) const { return p >= base && n <= bytes && p - base <= bytes - n; }
    /** Where `p` sits for a peer writing into this registration. */
    uint64_t offset_of(uintptr_t p) const { return p - base; }
};

class MemoryRegistry {
public:
    /** `staged_kinds`: AFMESH_MEM_BIT()s of kinds the engine stages, recorded without the transport. */
    MemoryRegistry(const Module &transport, uint32_t staged_kinds) : transport_(transport), staged_kinds_(staged_kinds) {}
    ~MemoryRegistry();
    MemoryRegistry(const MemoryRegistry &) = delete;
    MemoryRegistry &operator=(const MemoryRegistry &) = delete;

    /** Registers [ptr, ptr+bytes) for local and remote access. */
    Status add(void *ptr, uint64_t bytes, uint32_t kind, int device, const Registration **out);
    /** Deregisters a registration returned by add(); NOT_FOUND for anything else. */
    Status remove(const Registration *registration);
    /**
     * The registration covering [ptr, ptr+bytes) with the same kind, making
     * (and caching) one when none does. Registering on the hot path is slow
     * but correct; it is logged once per buffer at info level.
     */
    Status find_or_add(void *ptr, uint64_t bytes, uint32_t kind, int device, const Registration **out);
    /**
     * Changes whenever a registration goes away: a registration found before
     * (a prepared push-pull's) is still valid while this is unchanged.
     */
    uint64_t epoch() const { return removals_.load(std::memory_order_acquire); }

private:
    const Registration *find_locked(uintptr_t p, uint64_t n, uint32_t kind) const AFMESH_REQUIRES(mu_);
    /** Puts `found` first among the recent ones. */
    void remember(const Registration *found) AFMESH_REQUIRES(mu_);
    Status add_locked(void *ptr, uint64_t bytes, uint32_t kind, int device, bool cached, const Registration **out)
        AFMESH_REQUIRES(mu_);

    const Module &transport_;
    const uint32_t staged_kinds_;
    Mutex mu_;
    std::multimap<uintptr_t, std::unique_ptr<Registration>> by_base_ AFMESH_GUARDED_BY(mu_);
    // The registrations find_or_add() found last, the latest first: a steady
    // stream of push-pulls looks up the same few buffers (its pushes', its
    // pulls'), and a hit here skips the walk of the map.
    std::array<const Registration *, 4> recent_ AFMESH_GUARDED_BY(mu_){};
    std::atomic<uint64_t> removals_{0};  // epoch()
};

}  // namespace afmesh
