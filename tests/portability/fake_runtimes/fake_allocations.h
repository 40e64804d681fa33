// SPDX-License-Identifier: Apache-2.0
// The fake runtimes' allocation registry: which ranges are "device" or
// "host" memory, for pointer queries and address ranges. All of it is host
// memory underneath.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <map>
#include <mutex>

namespace afmesh::fake {

enum class MemoryKind { kDevice, kHost };

struct Allocation {
    uintptr_t base;
    size_t size;
    MemoryKind kind;
};

class Allocations {
public:
    void *allocate(size_t size, size_t alignment, MemoryKind kind) {
        if (alignment < 256) alignment = 256;
        const size_t rounded = (size + alignment - 1) / alignment * alignment;
        void *p = aligned_alloc(alignment, rounded ? rounded : alignment);
        if (!p) return nullptr;
        std::lock_guard<std::mutex> lock(mutex_);
        ranges_[reinterpret_cast<uintptr_t>(p)] = {reinterpret_cast<uintptr_t>(p), size, kind};
        return p;
    }
    /** False when `p` is not the start of a live allocation. */
    bool release(void *p) {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            if (ranges_.erase(reinterpret_cast<uintptr_t>(p)) == 0) return false;
        }
        free(p);
        return true;
    }
    /** The allocation containing `p`, if any. */
    bool find(const void *p, Allocation *out) {
        const uintptr_t address = reinterpret_cast<uintptr_t>(p);
        std::lock_guard<std::mutex> lock(mutex_);
        auto it = ranges_.upper_bound(address);
        if (it == ranges_.begin()) return false;
        --it;
        if (address >= it->second.base + it->second.size) return false;
        *out = it->second;
        return true;
    }

private:
    std::mutex mutex_;
    std::map<uintptr_t, Allocation> ranges_;
};

}  // namespace afmesh::fake
