// SPDX-License-Identifier: Apache-2.0
// The ze module's entry point: its operations table and the query symbol.
#include "ze_internal.h"

namespace afmesh::ze {
namespace {

constexpr const char *kName = "ze";
constexpr const char *kVersion = "afmesh ze " AFMESH_VERSION_STRING ", Level Zero loader " AFMESH_ZE_LOADER_VERSION;

const afmesh_device_ops kOps = {
    sizeof(afmesh_device_ops),
    AFMESH_MEM_ZE,
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
    dmabuf_export,
};

}  // namespace
}  // namespace afmesh::ze

extern "C" AFMESH_MODULE_EXPORT int afmesh_module_query(uint32_t host_abi_major, const afmesh_host_services *host,
                                                        afmesh_module_desc *out) {
    using namespace afmesh::ze;
    afmesh::module::bind_host(host, kName);
    return afmesh_module_describe(host_abi_major, out, AFMESH_MODULE_DEVICE, kName, kVersion, &kOps);
}
