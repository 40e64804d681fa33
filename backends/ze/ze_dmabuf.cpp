// SPDX-License-Identifier: Apache-2.0
// dma-buf export of device memory for GPUDirect RDMA registration.
//
// zeMemGetIpcHandle is not used: the specification makes its handle opaque
// (Intel's driver happens to carry a dma-buf fd inside, which nothing
// guarantees). The specified route is external memory export: the allocation
// asks for ZE_EXTERNAL_MEMORY_TYPE_FLAG_DMA_BUF when it is made (mem_alloc
// does so on devices that support it), and zeMemGetAllocProperties with a
// chained ze_external_memory_export_fd_t returns a dma-buf fd for it. Memory
// the module did not allocate, or allocated before it knew, is NOT_SUPPORTED.
#include "ze_internal.h"

namespace afmesh::ze {

int dmabuf_export(void *ctx, const void *ptr, size_t bytes, int *fd, uint64_t *offset) {
    Context &c = context(ctx);
    if (!ptr || bytes == 0 || !fd || !offset)
        return host_error(AFMESH_HAL_INVALID_ARGUMENT, "dmabuf_export: null pointer or empty range");

    void *base = nullptr;
    size_t size = 0;
    if (ze_result_t res = zeMemGetAddressRange(c.context, ptr, &base, &size))
        return fail_ze(res, "zeMemGetAddressRange(%p)", ptr);
    const uintptr_t begin = reinterpret_cast<uintptr_t>(ptr), first = reinterpret_cast<uintptr_t>(base);
    if (!base || begin < first || bytes > size - (begin - first))
        return host_error(AFMESH_HAL_INVALID_ARGUMENT,
                          "dmabuf_export: [%p, +%zu) is not inside one Level Zero allocation", ptr, bytes);

    ze_external_memory_export_fd_t exported = {ZE_STRUCTURE_TYPE_EXTERNAL_MEMORY_EXPORT_FD, nullptr,
                                               ZE_EXTERNAL_MEMORY_TYPE_FLAG_DMA_BUF, -1};
    ze_memory_allocation_properties_t props{};
    props.stype = ZE_STRUCTURE_TYPE_MEMORY_ALLOCATION_PROPERTIES;
    props.pNext = &exported;
    ze_device_handle_t device = nullptr;
    ze_result_t res = zeMemGetAllocProperties(c.context, base, &props, &device);
    if (res != ZE_RESULT_SUCCESS || exported.fd < 0)
        return host_error(AFMESH_HAL_NOT_SUPPORTED,
                          "dmabuf_export: %p cannot be exported as a dma-buf (%s); only device memory from this "
                          "module's mem_alloc on a device with dma-buf export can",
                          ptr, result_name(res));
    *fd = exported.fd;
    *offset = begin - first;
    return AFMESH_HAL_OK;
}

}  // namespace afmesh::ze
