// SPDX-License-Identifier: Apache-2.0
// How device memory reaches the NIC (GPUDirect RDMA), probed once per context:
//  - dma-buf: ibv_reg_dmabuf_mr exists in the loaded libibverbs (rdma-core
//    >= 34) and the caller hands over the dma-buf its device module exported;
//  - peer memory: a peer-memory client (nvidia_peermem / nv_peer_mem, or
//    ROCm's amdkfd) lets plain ibv_reg_mr pin device pointers;
//  - otherwise host memory only, and the engine stages through it.
#pragma once

#include <cstdint>
#include <string>

#include "verbs_api.h"

namespace afmesh::ibverbs {

struct GpuDirect {
    bool dmabuf = false;       ///< ibv_reg_dmabuf_mr resolved
    bool nvidia_peer = false;  ///< NVIDIA peer-memory client loaded
    bool amd_peer = false;     ///< AMD (amdkfd) peer-memory client loaded

    /** AFMESH_MEM_BIT()s of the kinds mem_register accepts. */
    uint32_t mem_kinds() const;
    /** Whether plain ibv_reg_mr can register device memory of `kind`. */
    bool peer_memory_for(uint32_t kind) const;
    /** One line per memory kind: the path it takes, or why it is staged. */
    std::string describe() const;
};

GpuDirect probe_gpudirect(const VerbsApi &api);

}  // namespace afmesh::ibverbs
