// SPDX-License-Identifier: Apache-2.0
// Registered memory regions. A region is named on the wire by its id (the
// rkey's key). Ids are random 64-bit values, like an RDMA rkey a capability:
// a peer can write only into a region it was told about, never into one it
// guessed (0, 1, 2... would let any connection write anywhere), and a stale
// key reaches a newer registration with probability 2^-64.
//
// Deregistration must guarantee that the module never touches the memory
// again once it returns, while the progress thread may be receiving into the
// region (or a poster sending from it) at that very moment. Every access is
// therefore bracketed by a RegionAccess; revoke() stops new accesses and
// waits for the ones in progress, each of which is a single non-blocking
// socket call or memcpy.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <unordered_map>

#include "thread_annotations.h"

namespace afmesh::tcp {

class Region {
public:
    Region(uint64_t id, uint8_t *base, uint64_t length, uint32_t access)
        : id_(id), base_(base), length_(length), access_(access) {}
    Region(const Region &) = delete;
    Region &operator=(const Region &) = delete;

    uint64_t id() const { return id_; }
    uint8_t *base() const { return base_; }
    uint64_t length() const { return length_; }
    bool allows(uint32_t access) const { return (access_ & access) == access; }
    /** Whether [offset, offset + bytes) lies inside the region; immune to overflow. */
    bool contains(uint64_t offset, uint64_t bytes) const { return offset <= length_ && bytes <= length_ - offset; }
    /** Whether [ptr, ptr + bytes) lies inside the region. */
    bool contains(const void *ptr, uint64_t bytes) const;
    bool revoked() const { return revoked_.load(std::memory_order_acquire); }

private:
    friend class RegionAccess;
    template <int>
    friend class RegionAccesses;
    friend class RegionTable;

    bool enter();
    void leave();
    void revoke();

    const uint64_t id_;
    uint8_t *const base_;
    const uint64_t length_;
    const uint32_t access_;
    std::atomic<uint32_t> accessors_{0};
    std::atomic<bool> revoked_{false};
};

/**
 * Permission to touch a region's memory for one operation (one socket call
 * or copy). Refused once the region is revoked. Default-constructible, to
 * be acquired only where the operation needs it; a gathered send holds
 * several in a RegionAccesses.
 */
class RegionAccess {
public:
    RegionAccess() = default;
    explicit RegionAccess(Region &region) { acquire(region); }
    ~RegionAccess() {
        if (region_) region_->leave();
    }
    RegionAccess(const RegionAccess &) = delete;
    RegionAccess &operator=(const RegionAccess &) = delete;

    /** Must not already hold an access. False when the region is revoked. */
    bool acquire(Region &region) {
        region_ = region.enter() ? &region : nullptr;
        return region_ != nullptr;
    }
    explicit operator bool() const { return region_ != nullptr; }

private:
    Region *region_ = nullptr;
};

/**
 * Up to N accesses held together, for a gathered send that reads from
 * several regions in one socket call. Only those taken cost anything to
 * release: an array of N RegionAccess set up and torn down all N on every
 * send, about 500 of an 8 B send's 1,260 instructions.
 */
template <int N>
class RegionAccesses {
public:
    RegionAccesses() = default;
    ~RegionAccesses() {
        for (int i = 0; i < count_; ++i) held_[i]->leave();
    }
    RegionAccesses(const RegionAccesses &) = delete;
    RegionAccesses &operator=(const RegionAccesses &) = delete;

    /** False when the region is revoked (nothing is then held for it), or when N are held already. */
    bool acquire(Region &region) {
        if (count_ == N || !region.enter()) return false;
        held_[count_++] = &region;
        return true;
    }

private:
    Region *held_[N];  // the first count_ are held
    int count_ = 0;
};

class RegionTable {
public:
    /**
     * Registers [base, base + bytes). The returned object is also the caller's
     * handle (afmesh_net_mr); the table keeps it alive until remove(). Null,
     * with errno set, when the kernel gives no random bytes for the id.
     */
    Region *add(uint8_t *base, uint64_t bytes, uint32_t access);
    /** The live region with wire id `id`, or null. */
    std::shared_ptr<Region> find(uint64_t id) const;
    /** The live region behind a caller's handle, or null (unknown or already deregistered). */
    std::shared_ptr<Region> find(const Region *handle) const;
    /**
     * Deregisters; false for an unknown handle. When this returns, no access
     * to the memory is in progress and none will start.
     */
    bool remove(const Region *handle);
    /** Revokes every region (context teardown). */
    void clear();

private:
    mutable Mutex mu_;
    std::unordered_map<uint64_t, std::shared_ptr<Region>> by_id_ AFMESH_GUARDED_BY(mu_);
    std::unordered_map<const Region *, uint64_t> id_of_ AFMESH_GUARDED_BY(mu_);
};

}  // namespace afmesh::tcp
