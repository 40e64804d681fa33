// SPDX-License-Identifier: Apache-2.0
// The cuda module's entry point: its operations table and the query symbol.
#include "cuda_internal.h"

#define AFMESH_CUDA_STR2(x) #x
#define AFMESH_CUDA_STR(x) AFMESH_CUDA_STR2(x)

namespace afmesh::cuda {
namespace {

constexpr const char *kName = "cuda";
constexpr const char *kVersion =
    "afmesh cuda " AFMESH_VERSION_STRING ", CUDA runtime " AFMESH_CUDA_STR(CUDART_VERSION) " (static)";

const afmesh_device_ops kOps = {
    sizeof(afmesh_device_ops),
    AFMESH_MEM_CUDA,
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
    // Always present; they answer NOT_SUPPORTED when the driver lacks
    // cuStreamWaitValue32 / cuMemGetHandleForAddressRange, which is only
    // known once init() has found a driver.
    flag_create,
    flag_destroy,
    flag_write,
    stream_wait_flag,
    dmabuf_export,
};

}  // namespace
}  // namespace afmesh::cuda

extern "C" AFMESH_MODULE_EXPORT int afmesh_module_query(uint32_t host_abi_major, const afmesh_host_services *host,
                                                        afmesh_module_desc *out) {
    using namespace afmesh::cuda;
    afmesh::module::bind_host(host, kName);
    return afmesh_module_describe(host_abi_major, out, AFMESH_MODULE_DEVICE, kName, kVersion, &kOps);
}
