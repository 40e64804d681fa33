// SPDX-License-Identifier: Apache-2.0
// Allocating on a chosen NUMA node: the calling thread prefers that node for
// the pages allocated while a MemoryNodeScope lives. Pinned host memory (a
// device runtime's cudaHostAlloc, hipHostMalloc...) takes its pages when it
// is allocated, so the staging buffers a NIC reads and writes land on the
// NIC's node instead of wherever the allocating thread happens to run. The
// raw system calls, not libnuma: nothing else of it is needed.
#pragma once

#include <string>

namespace afmesh::topology {

class MemoryNodeScope {
public:
    /** Words of a node mask: 1024 nodes, the kernel's largest MAX_NUMNODES. */
    static constexpr unsigned kMaskWords = 16;

    /**
     * Prefers `node` (>= 0) for this thread's allocations until destroyed,
     * then restores its previous policy. A negative node changes nothing.
     * When the kernel refuses (no such node, no NUMA support), ok() is false
     * and error() says why; nothing has changed then either.
     */
    explicit MemoryNodeScope(int node);
    ~MemoryNodeScope();
    MemoryNodeScope(const MemoryNodeScope &) = delete;
    MemoryNodeScope &operator=(const MemoryNodeScope &) = delete;

    bool ok() const { return error_.empty(); }
    const std::string &error() const { return error_; }

private:
    bool changed_ = false;
    int previous_mode_ = 0;
    unsigned long previous_mask_[kMaskWords] = {};
    std::string error_;
};

/** The policy this thread allocates with: its mode (MPOL_*) and the first node of its mask (-1: none). */
void thread_memory_policy(int *mode, int *first_node);

}  // namespace afmesh::topology
