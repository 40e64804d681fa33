// SPDX-License-Identifier: Apache-2.0
#include "region_table.h"

#include <sys/random.h>

#include <utility>
#include <vector>

namespace afmesh::tcp {

bool Region::contains(const void *ptr, uint64_t bytes) const {
    const auto p = reinterpret_cast<uintptr_t>(ptr), b = reinterpret_cast<uintptr_t>(base_);
    return p >= b && contains(p - b, bytes);
}

// enter() and revoke() each write one flag and then read the other, all
// sequentially consistent: whichever runs second sees the first, so either
// the access is refused or revoke() waits for it.
bool Region::enter() {
    accessors_.fetch_add(1, std::memory_order_seq_cst);
    if (revoked_.load(std::memory_order_seq_cst)) {
        leave();
        return false;
    }
    return true;
}

void Region::leave() {
    if (accessors_.fetch_sub(1, std::memory_order_seq_cst) == 1 && revoked_.load(std::memory_order_seq_cst))
        accessors_.notify_all();
}

void Region::revoke() {
    revoked_.store(true, std::memory_order_seq_cst);
    for (uint32_t n = accessors_.load(std::memory_order_seq_cst); n != 0;
         n = accessors_.load(std::memory_order_seq_cst))
        accessors_.wait(n, std::memory_order_seq_cst);
}

Region *RegionTable::add(uint8_t *base, uint64_t bytes, uint32_t access) {
    MutexLock lock(&mu_);
    uint64_t id = 0;
    do {
        // Up to 256 bytes come whole and uninterrupted once the pool is ready.
        if (getrandom(&id, sizeof id, 0) != static_cast<ssize_t>(sizeof id)) return nullptr;
    } while (id == 0 || by_id_.count(id));
    auto region = std::make_shared<Region>(id, base, bytes, access);
    Region *handle = region.get();
    id_of_.emplace(handle, id);
    by_id_.emplace(id, std::move(region));
    return handle;
}

std::shared_ptr<Region> RegionTable::find(uint64_t id) const {
    MutexLock lock(&mu_);
    auto it = by_id_.find(id);
    return it == by_id_.end() ? nullptr : it->second;
}

std::shared_ptr<Region> RegionTable::find(const Region *handle) const {
    MutexLock lock(&mu_);
    auto it = id_of_.find(handle);
    return it == id_of_.end() ? nullptr : by_id_.at(it->second);
}

bool RegionTable::remove(const Region *handle) {
    std::shared_ptr<Region> region;
    {
        MutexLock lock(&mu_);
        auto it = id_of_.find(handle);
        if (it == id_of_.end()) return false;
        auto node = by_id_.extract(it->second);
        region = std::move(node.mapped());
        id_of_.erase(it);
    }
    // Outside the lock: waiting for an access in progress must not stall lookups.
    region->revoke();
    return true;
}

void RegionTable::clear() {
    std::vector<std::shared_ptr<Region>> regions;
    {
        MutexLock lock(&mu_);
        for (auto &[id, region] : by_id_) regions.push_back(std::move(region));
        by_id_.clear();
        id_of_.clear();
    }
    for (auto &region : regions) region->revoke();
}

}  // namespace afmesh::tcp
