// SPDX-License-Identifier: Apache-2.0
#include "topology/memory_node.h"

#include <linux/mempolicy.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>

#include "log.h"

namespace afmesh::topology {
namespace {

constexpr unsigned long kBitsPerWord = sizeof(unsigned long) * CHAR_BIT;
constexpr unsigned long kMaxNodes = MemoryNodeScope::kMaskWords * kBitsPerWord;

long get_policy(int *mode, unsigned long *mask) {
    return syscall(SYS_get_mempolicy, mode, mask, kMaxNodes, nullptr, 0UL);
}

long set_policy(int mode, const unsigned long *mask) {
    // The kernel reads maxnode - 1 bits, so one more than the mask holds.
    return syscall(SYS_set_mempolicy, mode, mask, mask ? kMaxNodes + 1 : 0UL);
}

}  // namespace

MemoryNodeScope::MemoryNodeScope(int node) {
    if (node < 0) return;
    if (static_cast<unsigned long>(node) >= kMaxNodes) {
        error_ = "NUMA node " + std::to_string(node) + " is beyond the " + std::to_string(kMaxNodes) + " supported";
        return;
    }
    if (get_policy(&previous_mode_, previous_mask_) != 0) {
        error_ = std::string("get_mempolicy: ") + strerror(errno);
        return;
    }
    unsigned long mask[MemoryNodeScope::kMaskWords] = {};
    mask[static_cast<unsigned long>(node) / kBitsPerWord] = 1UL << (static_cast<unsigned long>(node) % kBitsPerWord);
    // Preferred, not bound: a full node falls back to the others instead of failing the allocation.
    if (set_policy(MPOL_PREFERRED, mask) != 0) {
        error_ = "set_mempolicy(MPOL_PREFERRED, node " + std::to_string(node) + "): " + strerror(errno);
        return;
    }
    changed_ = true;
}

MemoryNodeScope::~MemoryNodeScope() {
    if (!changed_) return;
    // MPOL_DEFAULT takes no mask; the others get back the one they had. The
    // kernel accepted this policy moments ago, so a refusal is unexpected:
    // the thread keeps preferring the NIC's node, which is worth a line.
    if (set_policy(previous_mode_, previous_mode_ == MPOL_DEFAULT ? nullptr : previous_mask_) != 0)
        AFMESH_LOG(AFMESH_LOG_WARN, "set_mempolicy: cannot restore this thread's memory policy (mode %d): %s",
                   previous_mode_, strerror(errno));
}

void thread_memory_policy(int *mode, int *first_node) {
    unsigned long mask[MemoryNodeScope::kMaskWords] = {};
    *mode = -1;
    *first_node = -1;
    if (get_policy(mode, mask) != 0) return;
    for (unsigned long bit = 0; bit < kMaxNodes; ++bit)
        if (mask[bit / kBitsPerWord] & (1UL << (bit % kBitsPerWord))) {
            *first_node = static_cast<int>(bit);
            return;
        }
}

}  // namespace afmesh::topology
