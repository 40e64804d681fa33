// SPDX-License-Identifier: Apache-2.0
#include "gpudirect.h"

#include <unistd.h>

#include "afmesh/hal/module.h"
#include "mem_kind_names.h"

namespace afmesh::ibverbs {
namespace {

bool exists(const char *path) { return access(path, F_OK) == 0; }

}  // namespace

GpuDirect probe_gpudirect(const VerbsApi &api) {
    GpuDirect g;
    g.dmabuf = api.reg_dmabuf_mr != nullptr;
    // MLNX_OFED's peer-memory API lists clients under memory_peers; the
    // upstream nvidia_peermem module shows up in /sys/module instead.
    g.nvidia_peer = exists("/sys/kernel/mm/memory_peers/nv_mem/version") || exists("/sys/module/nvidia_peermem") ||
                    exists("/sys/module/nv_peer_mem");
    g.amd_peer = exists("/sys/kernel/mm/memory_peers/amdkfd/version") || exists("/sys/module/amdkfd");
    return g;
}

uint32_t GpuDirect::mem_kinds() const {
    uint32_t kinds = AFMESH_MEM_BIT(AFMESH_MEM_HOST);
    if (dmabuf) kinds |= AFMESH_MEM_BIT(AFMESH_MEM_CUDA) | AFMESH_MEM_BIT(AFMESH_MEM_HIP) | AFMESH_MEM_BIT(AFMESH_MEM_ZE);
    if (nvidia_peer) kinds |= AFMESH_MEM_BIT(AFMESH_MEM_CUDA);
    if (amd_peer) kinds |= AFMESH_MEM_BIT(AFMESH_MEM_HIP);
    return kinds;
}

bool GpuDirect::peer_memory_for(uint32_t kind) const {
    return (kind == AFMESH_MEM_CUDA && nvidia_peer) || (kind == AFMESH_MEM_HIP && amd_peer);
}

std::string GpuDirect::describe() const {
    std::string text;
    for (uint32_t kind = AFMESH_MEM_CUDA; kind < AFMESH_MEM_KIND_COUNT; ++kind) {
        text += std::string("memory ") + mem_kind_name(kind) + ": ";
        if (dmabuf && peer_memory_for(kind))
            text += "ibv_reg_dmabuf_mr when given a dma-buf, else ibv_reg_mr through the peer-memory client\n";
        else if (dmabuf)
            text += "ibv_reg_dmabuf_mr (needs the device module's dma-buf export); no peer-memory client\n";
        else if (peer_memory_for(kind))
            text += "ibv_reg_mr through the peer-memory client (this libibverbs has no ibv_reg_dmabuf_mr)\n";
        else
            text += "staged through host memory (no ibv_reg_dmabuf_mr, no peer-memory client)\n";
    }
    return text;
}

}  // namespace afmesh::ibverbs
