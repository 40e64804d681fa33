// SPDX-License-Identifier: Apache-2.0
// dma-buf export of device memory for GPUDirect RDMA registration
// (cuMemGetHandleForAddressRange, driver 11.7+ on kernels with dma-buf).
#include <unistd.h>

#include "cuda_internal.h"

namespace afmesh::cuda {

int dmabuf_export(void *ctx, const void *ptr, size_t bytes, int *fd, uint64_t *offset) {
    Context &c = context(ctx);
    if (!ptr || bytes == 0 || !fd || !offset)
        return host_error(AFMESH_HAL_INVALID_ARGUMENT, "dmabuf_export: null pointer or empty range");
    const uintptr_t begin = reinterpret_cast<uintptr_t>(ptr);
    if (begin + bytes < begin) return host_error(AFMESH_HAL_INVALID_ARGUMENT, "dmabuf_export: range wraps around");
    if (!c.driver.get_handle_for_address_range)
        return host_error(AFMESH_HAL_NOT_SUPPORTED,
                          "the NVIDIA driver has no cuMemGetHandleForAddressRange (dma-buf export)");

    cudaPointerAttributes attr{};
    if (cudaError_t err = cudaPointerGetAttributes(&attr, ptr))
        return fail_runtime(err, "cudaPointerGetAttributes(%p)", ptr);
    if (attr.type != cudaMemoryTypeDevice)
        return host_error(AFMESH_HAL_NOT_SUPPORTED, "dmabuf_export: %p is not CUDA device memory", ptr);

    // The driver wants a range aligned to host pages: round [ptr, ptr+bytes)
    // outwards. cudaMalloc hands out memory from device pages of at least
    // 64 KiB, so the rounded range stays in memory of the same device with the
    // same properties, which is what the driver requires.
    const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    const uintptr_t aligned_begin = begin & ~(page - 1);
    const uintptr_t aligned_end = (begin + bytes + page - 1) & ~(page - 1);

    ScopedDevice scope;  // the driver call acts on the current context
    if (cudaError_t err = scope.enter(attr.device)) return fail_runtime(err, "cudaSetDevice(%d)", attr.device);
    int handle = -1;
    CUresult res = c.driver.get_handle_for_address_range(&handle, static_cast<CUdeviceptr>(aligned_begin),
                                                         aligned_end - aligned_begin,
                                                         CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
    if (res != CUDA_SUCCESS) return fail_driver(c.driver, res, "cuMemGetHandleForAddressRange(DMA_BUF_FD)");
    *fd = handle;
    *offset = begin - aligned_begin;
    return AFMESH_HAL_OK;
}

}  // namespace afmesh::cuda
