// SPDX-License-Identifier: Apache-2.0
// The hip module's entry point: its operations table and the query symbol.
#include <hip/hip_version.h>

#include "hip_internal.h"

#define AFMESH_HIP_STR2(x) #x
#define AFMESH_HIP_STR(x) AFMESH_HIP_STR2(x)

namespace afmesh::hip {
namespace {

constexpr const char *kName = "hip";
constexpr const char *kVersion = "afmesh hip " AFMESH_VERSION_STRING ", HIP " AFMESH_HIP_STR(
    HIP_VERSION_MAJOR) "." AFMESH_HIP_STR(HIP_VERSION_MINOR) "." AFMESH_HIP_STR(HIP_VERSION_PATCH);

const afmesh_device_ops kOps = {
    sizeof(afmesh_device_ops),
    AFMESH_MEM_HIP,
    init,
    fini,
    device_count,
    device_info,
    set_device,
    mem_alloc,
    mem_free,
    pointer_query,
    memcpy_sync,
    memcpy_async,
    stream_create,
    stream_destroy,
    stream_sync,
    event_create,
    event_destroy,
    event_record,
    event_query,
    event_sync,
    flag_create,
    flag_destroy,
    flag_write,
    stream_wait_flag,
    // HIP 5.2 has no dma-buf export (hsa_amd_portable_export_dmabuf arrived
    // with ROCm 5.6's HSA runtime), so transports register AMD memory through
    // peer memory or stage through pinned host memory.
    nullptr,
};

}  // namespace
}  // namespace afmesh::hip

extern "C" AFMESH_MODULE_EXPORT int afmesh_module_query(uint32_t host_abi_major, const afmesh_host_services *host,
                                                        afmesh_module_desc *out) {
    using namespace afmesh::hip;
    afmesh::module::bind_host(host, kName);
    return afmesh_module_describe(host_abi_major, out, AFMESH_MODULE_DEVICE, kName, kVersion, &kOps);
}
